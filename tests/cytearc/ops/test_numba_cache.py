"""UMAP's numba functions from numba's disk cache give the bits of a fresh compilation.

:func:`cytearc.ops.neighbors.umap_module` turns on numba's cache for the
functions the graph and the layout compile. A process that compiles them
as umap-learn does (no cache) and processes that use numba's cache (the
first one on a machine compiles and saves, the next ones load) must
compute the same connectivities and the same embedding, bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import hashlib, sys, warnings
    import numpy as np, scipy.sparse as sp
    warnings.filterwarnings("ignore", category=ImportWarning)
    if sys.argv[1] == "cached":
        from cytearc.ops.neighbors import umap_module
        u = umap_module()
    else:
        import umap.umap_ as u
    from cytearc.ops.neighbors import knn
    x = np.random.default_rng(0).standard_normal((600, 10))
    indices, distances = knn(x, 15, seed=0)
    graph, _, _ = u.fuzzy_simplicial_set(
        sp.coo_matrix((600, 1)), 15, np.random.RandomState(0), "euclidean",
        knn_indices=indices, knn_dists=distances.astype(np.float32),
    )
    graph = sp.csr_matrix(graph)
    graph.sort_indices()
    a, b = u.find_ab_params(1.0, 0.5)
    embedding, _ = u.simplicial_set_embedding(
        data=x, graph=graph.tocoo(), n_components=2, initial_alpha=1.0, a=a, b=b, gamma=1.0,
        negative_sample_rate=5, n_epochs=100, init=x[:, :2].copy(),
        random_state=np.random.RandomState(0), metric="euclidean", metric_kwds={},
        densmap=False, densmap_kwds={}, output_dens=False,
    )
    digest = hashlib.sha256(graph.data.tobytes() + graph.indices.tobytes())
    digest.update(np.ascontiguousarray(embedding).tobytes())
    print(digest.hexdigest())
    """
)


def _digest(kind: str) -> str:
    done = subprocess.run(
        [sys.executable, "-P", "-c", SCRIPT, kind],
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_cached_umap_functions_give_the_bits_of_a_fresh_compilation() -> None:
    """Compiled without the cache, then twice with it (saved or loaded, then loaded): one digest."""
    compiled = _digest("plain")
    first = _digest("cached")
    loaded = _digest("cached")
    assert compiled == first == loaded
