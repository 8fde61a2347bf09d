"""The pieces model families share: the norms and activations their layers are built from.

Each is the formula of its docstring over NumPy arrays, the last axis the features.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rms_norm", "silu"]


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm(x) = x / sqrt(mean(x²) + eps) · γ over the last axis (Zhang & Sennrich 2019).

    Unlike LayerNorm there is no mean to subtract and no bias: only the scale is fixed.
    """
    mean_square = np.mean(np.square(x), axis=-1, keepdims=True)
    normed = x / np.sqrt(mean_square + x.dtype.type(eps))
    normed *= gain  # in place: one (n, d_model) temporary fewer, and a layer runs two norms
    return normed


def silu(x: np.ndarray) -> np.ndarray:
    """SiLU(x) = x · σ(x) = x / (1 + e^(-x)) (also called swish)."""
    with np.errstate(over="ignore"):  # e^(-x) = inf for x < -88 gives x / inf = -0, correctly
        # The same numbers as x / (1 + np.exp(-x)), with one (n, d_ff) temporary instead of three.
        denominator = np.exp(-x)
        denominator += 1
        return np.divide(x, denominator, out=denominator)
