"""Summaries of attention patterns, and the experiment behind the 1/√d_k scale."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .softmax import _stable_softmax
from .validation import AttentionInputError, as_float_array, check_int, check_size

__all__ = [
    "HeadStatistics",
    "ScalingExperiment",
    "attention_entropy",
    "head_statistics",
    "scaling_experiment",
]


def _check_weights(weights: object, min_ndim: int) -> np.ndarray:
    w = as_float_array(weights, "weights", min_ndim=min_ndim)
    if (w < 0).any():
        raise AttentionInputError(
            "weights contain negative numbers: attention weights are probabilities (softmax "
            "outputs), so they must be between 0 and 1."
        )
    return w


def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
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
    return _entropy(w, axis=int(axis))


@dataclass(frozen=True, eq=False)
class ScalingExperiment:
    """Why divide by √d_k: measured over random unit-variance q and k, one value per d_k.

    d_k                      `(n_dk,)` int   the widths tried
    dot_variance             `(n_dk,)`       measured Var(q·k) (theory: d_k)
    scaled_dot_variance      `(n_dk,)`       measured Var(q·k/√d_k) (theory: 1)
    max_weight_unscaled / _scaled      mean of the largest softmax weight over a row of keys
    entropy_unscaled / _scaled         mean entropy of that row (nats; uniform = log num_keys)
    gradient_norm_unscaled / _scaled   mean Frobenius norm of the softmax Jacobian
                                       diag(p) - p pᵀ (how much gradient reaches the scores)
    num_keys, num_samples, seed        the set-up
    """

    d_k: Any
    dot_variance: Any
    scaled_dot_variance: Any
    max_weight_unscaled: Any
    max_weight_scaled: Any
    entropy_unscaled: Any
    entropy_scaled: Any
    gradient_norm_unscaled: Any
    gradient_norm_scaled: Any
    num_keys: int
    num_samples: int
    seed: int


def _jacobian_norm(p: np.ndarray) -> np.ndarray:
    """‖diag(p) - p pᵀ‖_F per row, from Σp² - 2Σp³ + (Σp²)² (no n×n matrix needed)."""
    s2 = np.sum(p**2, axis=-1)
    s3 = np.sum(p**3, axis=-1)
    return np.sqrt(np.maximum(s2 - 2 * s3 + s2**2, 0.0))


def scaling_experiment(
    d_k_values: Sequence[int] = (2, 8, 32, 128, 512),
    num_samples: int = 2000,
    num_keys: int = 16,
    seed: int = 0,
) -> ScalingExperiment:
    """Sample q and num_keys keys with i.i.d. N(0, 1) entries, for each d_k, and compare the
    softmax of q·k with and without the 1/√d_k scale.

    Var(q·k) = Σ_i Var(q_i k_i) = d_k, so unscaled scores spread out as √d_k grows and the
    softmax turns into a near one-hot: the max weight -> 1, the entropy -> 0, and the Jacobian
    (the gradient path) -> 0. Scaled scores keep unit variance at every d_k.
    Deterministic for a given seed.
    """
    dks = as_float_array(d_k_values, "d_k_values", min_ndim=1, max_ndim=1)
    dks = [check_int(d, "each d_k", minimum=1) for d in dks.tolist()]
    n_samples = check_int(num_samples, "num_samples", minimum=2)
    n_keys = check_int(num_keys, "num_keys", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // max(1, n_keys * max(dks)))
    check_size((min(chunk, n_samples), n_keys, max(dks)), "One batch of samples")
    fields: dict[str, list[float]] = {name: [] for name in ScalingExperiment.__dataclass_fields__}
    for d in dks:
        scores_parts = []
        for start in range(0, n_samples, chunk):
            m = min(chunk, n_samples - start)
            q = rng.standard_normal((m, 1, d))
            k = rng.standard_normal((m, n_keys, d))
            scores_parts.append(np.sum(q * k, axis=-1))  # (samples, keys)
        scores = np.concatenate(scores_parts)
        fields["dot_variance"].append(float(np.var(scores)))
        fields["scaled_dot_variance"].append(float(np.var(scores / math.sqrt(d))))
        for label, s in (("unscaled", scores), ("scaled", scores / math.sqrt(d))):
            p = _stable_softmax(s, axis=-1)
            fields[f"max_weight_{label}"].append(float(np.mean(p.max(axis=-1))))
            fields[f"entropy_{label}"].append(float(np.mean(_entropy(p))))
            fields[f"gradient_norm_{label}"].append(float(np.mean(_jacobian_norm(p))))
    arrays = {
        name: np.array(values)
        for name, values in fields.items()
        if name not in ("d_k", "num_keys", "num_samples", "seed")
    }
    return ScalingExperiment(
        d_k=np.array(dks), num_keys=n_keys, num_samples=n_samples, seed=seed, **arrays
    )


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
        mean_entropy=mean_over(_entropy(w), valid),
        mean_max_weight=mean_over(w.max(axis=-1), valid),
        previous_token=mean_over(w[..., prev_rows, prev_rows - 1], valid[..., prev_rows]),
        self_token=mean_over(
            w[..., np.arange(diag_len), np.arange(diag_len)], valid[..., :diag_len]
        ),
        first_token=mean_over(w[..., 0], valid),
    )
