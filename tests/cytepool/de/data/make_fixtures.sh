#!/usr/bin/env bash
# Regenerate the extra R parity fixtures of tests/cytepool/de (needs R with limma and edgeR:
# Debian `apt-get install r-base-core r-bioc-limma r-bioc-edger`; made with R 4.2.2,
# limma 3.54.1, edgeR 3.40.2, the versions of the shared fixtures).
# Usage: bash make_fixtures.sh /path/to/shared/limma
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shared="${1:?path to shared/limma}"
ref="$shared/ref_limma_voom.R"
run() {  # name input extra-args...
  local name="$1" input="$2"; shift 2
  local tmp; tmp="$(mktemp -d)"
  Rscript "$ref" --counts "$input/counts.csv" --samples "$input/samples.csv" --out "$tmp" "$@" >/dev/null
  mkdir -p "$here/r/$name"
  for f in keep libsizes hyper fit toptable voom_trend design; do cp "$tmp/$f.csv" "$here/r/$name/"; done
  sed -n 's/^options: .* filter=/filter=/p' "$tmp/session.txt" > "$here/r/$name/options.txt"
  rm -r "$tmp"
}
run shared_filter_tmm_donor "$shared/fixtures/input" --filter --norm TMM --donor donor
run shared_contrast_donor "$shared/fixtures/input" --norm TMM --donor donor --contrast "donorD2-donorD3"
run unbalanced_filter_tmm "$here/unbalanced" --filter --norm TMM
run unbalanced_filter_none_donor "$here/unbalanced" --filter --norm none --donor donor
run unbalanced_filter_tmm_batch "$here/unbalanced" --condition batch --filter --norm TMM
run unbalanced_contrast "$here/unbalanced" --filter --norm TMM --donor donor --contrast "conditionC-conditionB"

# R's lowess on its own: random points with ties, outliers and several spans, full precision.
mkdir -p "$here/r/lowess"
Rscript - "$here/r/lowess" <<'RCODE'
out <- commandArgs(trailingOnly = TRUE)[1]
set.seed(1)
for (k in 1:5) {
  n <- c(5, 17, 200, 1000, 3001)[k]
  x <- round(rnorm(n) * 3, if (k %% 2 == 0) 1 else 6)
  y <- sin(x) + rnorm(n) * 0.3 + ifelse(runif(n) < 0.05, 5, 0)
  f <- c(2/3, 0.5, 0.3, 0.5, 0.1)[k]
  l <- lowess(x, y, f = f)
  writeLines(c("x,y,f,x_sorted,fitted", sprintf("%.17g,%.17g,%.17g,%.17g,%.17g", x, y, f, l$x, l$y)),
             file.path(out, sprintf("case%d.csv", k)))
}
RCODE
