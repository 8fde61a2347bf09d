"""Two attention patterns side by side: what changed, where, and by how much.

Every page can show two views of one pattern (two heads, two layers, a mask on and off, scaling
on and off, two positional encodings). This module says how they differ, in numbers and in one
sentence a learner can read:

    difference = B − A                                  (q_pos, k_pos)
    TV_i       = ½ Σ_j |B_ij − A_ij|                    (q_pos,)  per query row

TV_i is the total variation distance between row i of A and row i of B: for rows that are
softmax distributions it runs from 0 (the same distribution) to 1 (no key in common), and it is
the largest amount of probability any set of keys gained or lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .validation import AttentionInputError, as_float_array

__all__ = ["SAME_TOLERANCE", "PatternComparison", "compare_patterns"]

# Below this every cell agrees to float32 rounding after a softmax: call the patterns the same.
SAME_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class PatternComparison:
    """Pattern A against pattern B, over the same queries (rows) and keys (columns).

    a, b                `(q_pos, k_pos)` float64   the two patterns
    difference          `(q_pos, k_pos)`           b − a: positive where B gives more weight
    max_abs_difference  float                      max |difference|
    largest             (int, int)                 (query, key), from 0, of the largest
                                                   |difference| (the first in row order on ties)
    row_tv              `(q_pos,)`                 ½ Σ_j |difference_ij|, total variation per row
    most_moved_row      int                        argmax row_tv (the first on ties)
    query_labels, key_labels                       one label per row, per column
    names               (str, str)                 what A and B are ("head 1", "head 2")
    sentence            str                        what differs most, for a learner
    """

    a: np.ndarray
    b: np.ndarray
    difference: np.ndarray
    max_abs_difference: float
    largest: tuple[int, int]
    row_tv: np.ndarray
    most_moved_row: int
    query_labels: tuple[str, ...]
    key_labels: tuple[str, ...]
    names: tuple[str, str]
    sentence: str

    @property
    def same(self) -> bool:
        """Whether no cell differs by more than SAME_TOLERANCE."""
        return self.max_abs_difference <= SAME_TOLERANCE


def compare_patterns(
    a: object,
    b: object,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    *,
    names: tuple[str, str] = ("A", "B"),
) -> PatternComparison:
    """Compare two `(q_pos, k_pos)` patterns: difference b − a, per-row total variation distance,
    the cell that changed most, and one sentence naming it.

    Raises AttentionInputError when a pattern is ragged, not 2-D, holds NaN or ±inf, when the
    two shapes differ, or when the labels do not match the rows and columns.
    """
    a = _pattern(a, f"Pattern {names[0]}")
    b = _pattern(b, f"Pattern {names[1]}")
    if a.shape != b.shape:
        raise AttentionInputError(
            f"{names[0]} has shape {a.shape} (queries × keys) but {names[1]} has {b.shape}: "
            "compare two patterns over the same queries and the same keys."
        )
    rows, cols = a.shape
    query_labels, key_labels = tuple(map(str, query_labels)), tuple(map(str, key_labels))
    for labels, count, what in ((query_labels, rows, "query"), (key_labels, cols, "key")):
        if len(labels) != count:
            raise AttentionInputError(
                f"There are {len(labels)} {what} labels but the patterns have {count} "
                f"{'rows' if what == 'query' else 'columns'}: give one label per {what}."
            )
    difference = b - a  # (q_pos, k_pos)
    magnitude = np.abs(difference)
    i, j = np.unravel_index(int(np.argmax(magnitude)), magnitude.shape)
    # Half the L1 distance: the probability mass a row moved from some keys to others.
    row_tv = 0.5 * magnitude.sum(axis=-1)  # (q_pos,)
    comparison = dict(
        a=a,
        b=b,
        difference=difference,
        max_abs_difference=float(magnitude[i, j]),
        largest=(int(i), int(j)),
        row_tv=row_tv,
        most_moved_row=int(np.argmax(row_tv)),
        query_labels=query_labels,
        key_labels=key_labels,
        names=(str(names[0]), str(names[1])),
    )
    return PatternComparison(**comparison, sentence=_sentence(**comparison))


def _pattern(x: object, name: str) -> np.ndarray:
    return np.asarray(as_float_array(x, name, min_ndim=2, max_ndim=2), dtype=np.float64)


def _sentence(
    *,
    a: np.ndarray,
    b: np.ndarray,
    difference: np.ndarray,
    max_abs_difference: float,
    largest: tuple[int, int],
    row_tv: np.ndarray,
    most_moved_row: int,
    query_labels: tuple[str, ...],
    key_labels: tuple[str, ...],
    names: tuple[str, str],
) -> str:
    name_a, name_b = names
    if max_abs_difference <= SAME_TOLERANCE:
        return (
            f"{name_a} and {name_b} are the same pattern: no weight differs by more than "
            f"{SAME_TOLERANCE:g}."
        )
    i, j = largest
    r = most_moved_row
    row = f"query {r + 1} “{query_labels[r]}”"
    return (
        f"The largest change is query {i + 1} “{query_labels[i]}” → key {j + 1} "
        f"“{key_labels[j]}”: {_number(a[i, j])} in {name_a}, {_number(b[i, j])} in {name_b} "
        f"({_signed(difference[i, j])}); the row that moved most is "
        f"{'the same query' if r == i else row}, with a total variation distance of "
        f"{_number(row_tv[r])} (half the sum of its |{name_b} − {name_a}|: 0 means the same "
        "weights, 1 means no key in common)."
    )


def _number(value: float) -> str:
    """Three decimals (weights live in 0..1), scientific below them; a real minus sign."""
    value = float(value)
    size = abs(value)
    text = f"{size:.1e}" if 0 < size < 5e-4 else f"{size:.3f}"
    return f"−{text}" if value < 0 and float(text) != 0 else text


def _signed(value: float) -> str:
    text = _number(value)
    return text if text.startswith("−") else f"+{text}"
