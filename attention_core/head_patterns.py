"""What does a head do? Simple detectors that read a head's role from its attention weights.

Given self-attention weights `(..., head, q_pos, k_pos)` (rows are queries, each sums to 1),
every head gets one score per pattern, a number in [0, 1] (`n` = number of tokens, positions
counted from 0, `w[i, j]` the weight query i gives key j):

    previous  = mean over i = 1..n-1 of w[i, i-1]         weight on the token just before
    next      = mean over i = 0..n-2 of w[i, i+1]         weight on the token just after
    self      = mean over i = 0..n-1 of w[i, i]           weight on the query's own token
    cls       = mean over i of Σ_{j ∈ C} w[i, j]          weight on the [CLS] position(s) C
    sep       = mean over i of Σ_{j ∈ S} w[i, j]          weight on the [SEP] position(s) S
    broad     = mean over i of H(w[i]) / log n            entropy relative to the uniform row:
                                                          1 = spread evenly, 0 = one key

and a label: the strongest of previous, next, self, cls and sep when that score reaches
`threshold` (at least that share of the weight, on average, goes there); otherwise "broad" when
the broad score reaches `broad_threshold`; otherwise "mixed". These are the simple, readable
tests used to survey BERT's heads (Clark et al., "What Does BERT Look At?", 2019); they describe
where the weight goes, not why.

`head_average` is the mean pattern over the heads, `(..., q_pos, k_pos)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .summaries import attention_entropy
from .validation import AttentionInputError, as_float_array, as_pattern, check_real

__all__ = [
    "HEAD_PATTERNS",
    "HeadPatterns",
    "head_average",
    "head_patterns",
]

# Scored patterns, in the order used to break ties between labels.
HEAD_PATTERNS = ("previous", "next", "self", "cls", "sep", "broad")
TARGETED = HEAD_PATTERNS[:-1]


@dataclass(frozen=True, eq=False)
class HeadPatterns:
    """One score per head and pattern, `(..., head)` each, and the label they give.

    previous, next, self, cls, sep, broad   `(..., head)` scores in [0, 1] (see the module)
    labels      `(..., head)` str: one of HEAD_PATTERNS, or "mixed"
    threshold, broad_threshold              the cut-offs the labels used
    """

    previous: np.ndarray
    next: np.ndarray
    self: np.ndarray
    cls: np.ndarray
    sep: np.ndarray
    broad: np.ndarray
    labels: np.ndarray
    threshold: float
    broad_threshold: float

    def score(self, pattern: str) -> np.ndarray:
        """The `(..., head)` scores of one pattern (a name in HEAD_PATTERNS)."""
        if pattern not in HEAD_PATTERNS:
            raise AttentionInputError(
                f"{pattern!r} is not a head pattern; choose one of {', '.join(HEAD_PATTERNS)}."
            )
        return getattr(self, pattern)

    def label_score(self) -> np.ndarray:
        """`(..., head)`: the score behind each label (the broad score for "mixed")."""
        out = self.broad.copy()
        for pattern in TARGETED:
            chosen = self.labels == pattern
            out[chosen] = getattr(self, pattern)[chosen]
        return out

    def special_share(self) -> float:
        """Share of all attention weight that lands on [CLS] or [SEP], averaged over every
        head and query: mean of cls + sep."""
        return float(np.mean(self.cls + self.sep))


def _positions(positions: Sequence[int], n: int, name: str) -> np.ndarray:
    """Distinct positions in 0..n-1 (negative ones count from the end, like Python)."""
    out = []
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, int | np.integer):
            raise AttentionInputError(f"{name} must be whole-number positions, got {p!r}.")
        if not -n <= p < n:
            raise AttentionInputError(
                f"{name} holds position {p}, outside the {n} tokens (0..{n - 1})."
            )
        out.append(int(p) % n)
    return np.unique(np.array(out, dtype=np.int64))


def head_patterns(
    weights: object,
    *,
    cls_positions: Sequence[int] = (0,),
    sep_positions: Sequence[int] = (-1,),
    threshold: float = 0.5,
    broad_threshold: float = 0.8,
) -> HeadPatterns:
    """Score and label every head of `weights` `(..., head, q_pos, k_pos)`, q_pos == k_pos.

    cls_positions / sep_positions   where the [CLS] and [SEP] tokens are (BERT puts one [CLS]
                                    first and one [SEP] last: the defaults)
    threshold         a targeted pattern labels the head when its score is at least this
    broad_threshold   otherwise "broad" when the normalised entropy is at least this

    Formulas in the module docstring; each score is in [0, 1].
    """
    w = as_pattern(weights, min_ndim=3).astype(np.float64)
    n = w.shape[-1]
    threshold = check_real(threshold, "threshold")
    broad_threshold = check_real(broad_threshold, "broad_threshold")
    cls_at = _positions(cls_positions, n, "cls_positions")
    sep_at = _positions(sep_positions, n, "sep_positions")

    # Diagonals of the (q_pos, k_pos) pattern: offset -1 is "key just before the query".
    previous = np.diagonal(w, offset=-1, axis1=-2, axis2=-1).mean(axis=-1)
    following = np.diagonal(w, offset=1, axis1=-2, axis2=-1).mean(axis=-1)
    own = np.diagonal(w, axis1=-2, axis2=-1).mean(axis=-1)
    # Summing the columns of the special tokens counts all weight that goes to them.
    cls = w[..., cls_at].sum(axis=-1).mean(axis=-1)
    sep = w[..., sep_at].sum(axis=-1).mean(axis=-1)
    # Dividing by log n (the entropy of a uniform row) makes sentences of any length comparable.
    broad = attention_entropy(w).mean(axis=-1) / math.log(n)

    scores = {"previous": previous, "next": following, "self": own, "cls": cls, "sep": sep}
    targeted = np.stack([scores[p] for p in TARGETED])  # (pattern, ..., head)
    best = targeted.argmax(axis=0)  # first maximum: ties go to the earlier pattern
    strongest = np.take_along_axis(targeted, best[None], axis=0)[0]
    labels = np.where(
        strongest >= threshold,
        np.array(TARGETED, dtype=object)[best],
        np.where(broad >= broad_threshold, "broad", "mixed"),
    ).astype(str)
    return HeadPatterns(
        previous=previous,
        next=following,
        self=own,
        cls=cls,
        sep=sep,
        broad=broad,
        labels=labels,
        threshold=threshold,
        broad_threshold=broad_threshold,
    )


def head_average(weights: object) -> np.ndarray:
    """The mean pattern over heads: `(..., head, q_pos, k_pos)` -> `(..., q_pos, k_pos)`.

    avg[i, j] = (1/H) Σ_h w_h[i, j]; rows still sum to 1, but the average blurs heads with
    different roles into one picture.
    """
    w = as_float_array(weights, "weights", min_ndim=3)
    return w.mean(axis=-3)
