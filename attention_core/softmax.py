"""Softmax: the stable version the library uses, and the textbook one for comparison."""

from __future__ import annotations

import numpy as np

from .validation import AttentionInputError, as_float_array

__all__ = ["naive_softmax", "softmax", "softmax_jacobian"]


def _check_axis(arr: np.ndarray, axis: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise AttentionInputError(f"axis must be an integer, got {axis!r}.")
    if not -arr.ndim <= axis < arr.ndim:
        raise AttentionInputError(
            f"axis {axis} does not exist for an array with {arr.ndim} dimension(s)."
        )
    return int(axis)


def _stable_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax without input validation; `x` is a float array that may contain -inf."""
    # Subtracting the row maximum leaves softmax unchanged (it cancels in the ratio) and keeps
    # every exponent <= 0, so exp never overflows.
    row_max = np.max(x, axis=axis, keepdims=True)
    # A row of only -inf has max -inf; shift it by 0 instead so exp gives zeros, not NaN.
    row_max[~np.isfinite(row_max)] = 0
    # In place from here on: for a real model these arrays are (head, q_pos, k_pos) per layer.
    exps = np.subtract(x, row_max)
    np.exp(exps, out=exps)
    total = np.sum(exps, axis=axis, keepdims=True)
    visible = total > 0
    if visible.all():
        exps /= total
        return exps
    # A fully masked row sums to 0: it gets all-zero weights (it may attend to nothing).
    return np.divide(exps, total, out=np.zeros_like(exps), where=visible)


def softmax(x: object, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along `axis`.

    softmax(x)_i = exp(x_i - max(x)) / Σ_j exp(x_j - max(x))

    Entries may be -inf (masked); a slice that is entirely -inf gives all-zero weights, never NaN.
    float32 input gives float32 output, float64 stays float64, integers become float64.
    NaN and +inf are rejected with `AttentionInputError`.
    """
    arr = as_float_array(x, "the softmax input", min_ndim=1, allow_neg_inf=True)
    return _stable_softmax(arr, _check_axis(arr, axis))


def naive_softmax(x: object, axis: int = -1) -> np.ndarray:
    """The textbook softmax exp(x_i) / Σ_j exp(x_j), with no max-subtraction and no guard.

    Kept on purpose so the masking lab can show why the stable version exists: scores above ~710
    (float64) or ~88 (float32) overflow exp to inf and give inf/inf = NaN, and a fully masked row
    (all -inf) gives 0/0 = NaN. NumPy's overflow/invalid warnings are silenced; the NaN and inf
    values are returned as they are.
    """
    arr = as_float_array(x, "the softmax input", min_ndim=1, allow_nonfinite=True)
    axis = _check_axis(arr, axis)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        exps = np.exp(arr)
        return exps / np.sum(exps, axis=axis, keepdims=True)


def softmax_jacobian(weights: object) -> np.ndarray:
    """Jacobian of softmax at the point whose output is `weights`, for each row.

    J_ij = ∂p_i/∂x_j = p_i (δ_ij - p_j), i.e. J = diag(p) - p pᵀ.
    `weights` `(..., n)` -> `(..., n, n)`. The gradient reaching the scores is Jᵀ times the
    gradient at the weights, so a nearly one-hot p (J ≈ 0) blocks learning.
    """
    p = as_float_array(weights, "weights", min_ndim=1)
    return p[..., :, None] * np.eye(p.shape[-1], dtype=p.dtype) - p[..., :, None] * p[..., None, :]
