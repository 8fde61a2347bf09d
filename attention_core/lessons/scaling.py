"""Why divide by √d_k: the experiment behind the scale, measured on random queries and keys.

A lesson built from the core pieces (the softmax, the entropy of `summaries`), shown by the
scaled dot-product page's "Why divide by √d_k?" section.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..softmax import stable_softmax
from ..summaries import entropy
from ..validation import as_float_array, check_int, check_size

__all__ = ["ScalingExperiment", "scaling_experiment"]


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
            p = stable_softmax(s, axis=-1)
            fields[f"max_weight_{label}"].append(float(np.mean(p.max(axis=-1))))
            fields[f"entropy_{label}"].append(float(np.mean(entropy(p))))
            fields[f"gradient_norm_{label}"].append(float(np.mean(_jacobian_norm(p))))
    arrays = {
        name: np.array(values)
        for name, values in fields.items()
        if name not in ("d_k", "num_keys", "num_samples", "seed")
    }
    return ScalingExperiment(
        d_k=np.array(dks), num_keys=n_keys, num_samples=n_samples, seed=seed, **arrays
    )
