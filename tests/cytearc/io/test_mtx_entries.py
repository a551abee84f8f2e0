"""The compiled parser of Matrix Market entry lines against pandas' C parser (the reader's other path)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cytearc.io.mtx_entries import integer_entries
from cytearc.io.tenx import read_entry_table


def _pandas(text: str, n_fields: int) -> np.ndarray:
    """What the reader's pandas path parses from ``text``."""
    names = ["feature", "cell", "value"][:n_fields]
    frame = read_entry_table(text, dict.fromkeys(names, np.dtype(np.int64)))
    return frame.to_numpy().T.reshape(n_fields, -1)


_numbers = st.integers(min_value=0, max_value=10**18 - 1)
_space = st.sampled_from([" ", "\t", "  ", " \t"])


@st.composite
def _texts(draw: st.DrawFn) -> tuple[str, int]:
    n_fields = draw(st.sampled_from([2, 3]))
    lines = []
    for _ in range(draw(st.integers(min_value=1, max_value=30))):
        kind = draw(st.sampled_from(["entry"] * 6 + ["blank", "comment"]))
        if kind == "entry":
            fields = [str(draw(_numbers)) for _ in range(n_fields)]
            if draw(st.booleans()):
                fields[0] = "0" * draw(st.integers(1, 3)) + fields[0]
            lead = draw(st.sampled_from(["", " ", "\t"]))
            trail = draw(st.sampled_from(["", " ", "\t"]))
            line = lead + "".join(f + draw(_space) for f in fields[:-1]) + fields[-1] + trail
        else:
            line = draw(st.sampled_from(["", " ", "\t "] if kind == "blank" else ["%", "% 1 2 3"]))
        lines.append(line)
    end = draw(st.sampled_from(["\n", "\r\n"]))
    text = end.join(lines) + draw(st.sampled_from(["", end]))
    return text, n_fields


@settings(max_examples=300, deadline=None)
@given(_texts())
def test_same_entries_as_pandas(case: tuple[str, int]) -> None:
    text, n_fields = case
    np.testing.assert_array_equal(integer_entries(text, n_fields), _pandas(text, n_fields))


@pytest.mark.parametrize(
    "text",
    [
        "1 2 3.5\n",  # a decimal
        "1 2 -3\n",  # a sign
        "1 2 +3\n",
        "1 2 3e2\n",
        "1 2 3 % inline\n",  # an inline comment
        "1 2 3\n  % indented\n",  # pandas: a line of missing fields
        "1 2\n",  # a field too few
        "1 2 3 4\n",  # a field too many
        "1 2 3\r4 5 6\n",  # a lone carriage return
        "1 2 1000000000000000000\n",  # 19 digits
        "1 2 0001000000000000000000\n",
        "1 2 3\n4 5 x\n",  # a letter
        "1 2 3\n4 5 é\n",  # not ASCII
        "1,2,3\n",
    ],
)
def test_declines_what_pandas_must_parse(text: str) -> None:
    assert integer_entries(text, 3) is None


def test_pattern_lines() -> None:
    entries = integer_entries("3 4\n5 6", 2)
    assert entries is not None
    assert entries.tolist() == [[3, 5], [4, 6]]
    assert entries.dtype == np.int64
    assert entries.flags.c_contiguous
