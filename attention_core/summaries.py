"""Summaries of attention patterns: the entropy of each row, and per-head averages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .validation import AttentionInputError, as_float_array

__all__ = [
    "HeadStatistics",
    "attention_entropy",
    "head_statistics",
]


def _check_weights(weights: object, min_ndim: int) -> np.ndarray:
    w = as_float_array(weights, "weights", min_ndim=min_ndim)
    if (w < 0).any():
        raise AttentionInputError(
            "weights contain negative numbers: attention weights are probabilities (softmax "
            "outputs), so they must be between 0 and 1."
        )
    return w


def entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """`attention_entropy` without its checks: `p` `(..., k_pos)` -> `(...,)` in nats."""
    # 0·log 0 = 0 (its limit), so zero weights, e.g. masked keys, add nothing.
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def attention_entropy(weights: object, axis: int = -1) -> np.ndarray:
    """Shannon entropy of each attention distribution, in nats.

    H(p) = -Σ_j p_j log p_j,  with 0·log 0 = 0.
    0 means all weight on one key; log(n) means uniform over n keys. `weights` `(..., k_pos)`
    -> `(...,)` (a fully masked, all-zero row gives 0).
    """
    w = _check_weights(weights, 1)
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise AttentionInputError(f"axis must be an integer, got {axis!r}.")
    if not -w.ndim <= axis < w.ndim:
        raise AttentionInputError(f"axis {axis} does not exist for weights of shape {w.shape}.")
    return entropy(w, axis=int(axis))


@dataclass(frozen=True, eq=False)
class HeadStatistics:
    """Per-head summaries of attention weights, each `(head,)`, averaged over batch and queries.

    mean_entropy     mean entropy of a query's distribution (nats)
    mean_max_weight  mean of the largest weight per query (1 = always one key)
    previous_token   mean weight from query i to key i-1 (queries i >= 1 that have that key)
    self_token       mean weight from query i to key i (queries with i < k_pos)
    first_token      mean weight on key 0 (often a "no-op" sink in trained models)

    Fully masked queries (all-zero rows) are left out of every mean. A statistic with no query
    to average over (e.g. previous_token with a single query) is NaN.
    """

    mean_entropy: Any
    mean_max_weight: Any
    previous_token: Any
    self_token: Any
    first_token: Any


def head_statistics(weights: object) -> HeadStatistics:
    """Summaries per head of weights `(..., head, q_pos, k_pos)` (queries as rows)."""
    w = _check_weights(weights, 3)
    w = w.reshape(-1, *w.shape[-3:]).astype(np.float64)  # (batch, head, q_pos, k_pos)
    q_len, k_len = w.shape[-2:]
    valid = w.sum(axis=-1) > 0  # (batch, head, q_pos)

    def mean_over(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Mean over batch and queries of values `(batch, head, n)` where keep is True."""
        count = keep.sum(axis=(0, 2))
        total = np.where(keep, values, 0.0).sum(axis=(0, 2))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    i = np.arange(q_len)
    diag_len = min(q_len, k_len)
    prev_rows = i[(i >= 1) & (i - 1 < k_len)]
    return HeadStatistics(
        mean_entropy=mean_over(entropy(w), valid),
        mean_max_weight=mean_over(w.max(axis=-1), valid),
        previous_token=mean_over(w[..., prev_rows, prev_rows - 1], valid[..., prev_rows]),
        self_token=mean_over(
            w[..., np.arange(diag_len), np.arange(diag_len)], valid[..., :diag_len]
        ),
        first_token=mean_over(w[..., 0], valid),
    )
