"""Softmax: the stable version the library uses, and the textbook one for comparison.

Each function runs on NumPy arrays and on torch tensors (CPU or CUDA): it computes with the
inputs' array namespace `xp` and returns an array of the same kind, on the same device.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .validation import AttentionInputError, array_namespace, as_float_array, device

__all__ = ["log_sum_exp", "naive_softmax", "softmax", "softmax_jacobian"]


def _check_axis(arr: Any, axis: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise AttentionInputError(f"axis must be an integer, got {axis!r}.")
    if not -arr.ndim <= axis < arr.ndim:
        raise AttentionInputError(
            f"axis {axis} does not exist for an array with {arr.ndim} dimension(s)."
        )
    return int(axis)


def stable_softmax(x: Any, axis: int = -1) -> Any:
    """`softmax` without input validation: `x` a float array that may contain -inf, the
    weights along `axis` in its shape."""
    xp = array_namespace(x)
    # Subtracting the row maximum leaves softmax unchanged (it cancels in the ratio) and keeps
    # every exponent <= 0, so exp never overflows.
    row_max = row_maxima(x) if axis in (-1, x.ndim - 1) else xp.max(x, axis=axis, keepdims=True)
    # A row of only -inf has max -inf; shift it by 0 instead so exp gives zeros, not NaN.
    row_max = xp.where(xp.isfinite(row_max), row_max, 0.0)
    if isinstance(x, np.ndarray):
        # In place on NumPy: for a real model these arrays are (head, q_pos, k_pos) per layer,
        # and the cost page measures the peak memory. (torch needs exp's output for autograd.)
        exps = np.subtract(x, row_max)
        np.exp(exps, out=exps)
    else:
        exps = xp.exp(x - row_max)
    total = xp.sum(exps, axis=axis, keepdims=True)
    visible = total > 0
    if bool(xp.all(visible)):
        if isinstance(exps, np.ndarray):
            exps /= total
            return exps
        return exps / total
    # A fully masked row sums to 0: it gets all-zero weights (it may attend to nothing).
    return xp.where(visible, exps / xp.where(visible, total, 1.0), 0.0)


# Rows up to this long are reduced across rows (see `row_maxima`); a vocabulary's are not.
SHORT_ROW = 256


def row_maxima(x: Any) -> Any:
    """The maximum over the last axis, `(..., 1)`.

    On NumPy a short row (a pattern's keys) is reduced across rows: the last axis moved to the
    front, so that each comparison runs over every row at once, where NumPy's reduction along a
    short last axis works row by row.
    """
    if isinstance(x, np.ndarray) and x.ndim > 1 and x.shape[-1] <= SHORT_ROW:
        return np.ascontiguousarray(np.moveaxis(x, -1, 0)).max(axis=0)[..., None]
    return array_namespace(x).max(x, axis=-1, keepdims=True)


def row_sums(x: Any) -> Any:
    """Σ over the last axis, `(..., 1)`.

    On NumPy as a product with a vector of ones: BLAS sums a row in one pass, while NumPy's
    reduction along a short last axis (a pattern's 32 keys) costs several times more per row.
    BLAS may round a row differently in a batch than alone, so the softmax itself keeps NumPy's
    sum: a padded batch gives each sentence's weights bit for bit (the masking lab says so); the
    backward pass, training alone, uses this.
    """
    if isinstance(x, np.ndarray):
        *lead, width = x.shape
        ones = np.ones((width, 1), dtype=x.dtype)
        return (x.reshape(math.prod(lead), width) @ ones).reshape(*lead, 1)
    return array_namespace(x).sum(x, axis=-1, keepdims=True)


def softmax(x: object, axis: int = -1) -> Any:
    """Numerically stable softmax along `axis`.

    softmax(x)_i = exp(x_i - max(x)) / Σ_j exp(x_j - max(x))

    Entries may be -inf (masked); a slice that is entirely -inf gives all-zero weights, never NaN
    (`torch.softmax` gives NaN there). float32 input gives float32 output, float64 stays float64,
    integers become float64. NaN and +inf are rejected with `AttentionInputError`.
    """
    xp = array_namespace(x)
    arr = as_float_array(x, "the softmax input", xp=xp, min_ndim=1, allow_neg_inf=True)
    return stable_softmax(arr, _check_axis(arr, axis))


def log_sum_exp(x: np.ndarray) -> np.ndarray:
    """log Σ_j exp(x_j) over the last axis, `(...,)`: the log of softmax's denominator, so that

        log softmax(x) = x − log_sum_exp(x)

    For finite float arrays, logits over a vocabulary. Shifted by each row's maximum, so exp
    never overflows, and exact where a probability underflows to 0."""
    top = row_maxima(x)
    return (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))[..., 0]


def naive_softmax(x: object, axis: int = -1) -> Any:
    """The textbook softmax exp(x_i) / Σ_j exp(x_j), with no max-subtraction and no guard.

    Kept on purpose so the masking lab can show why the stable version exists: scores above ~710
    (float64) or ~88 (float32) overflow exp to inf and give inf/inf = NaN, and a fully masked row
    (all -inf) gives 0/0 = NaN. NumPy's overflow/invalid warnings are silenced; the NaN and inf
    values are returned as they are.
    """
    xp = array_namespace(x)
    arr = as_float_array(x, "the softmax input", xp=xp, min_ndim=1, allow_nonfinite=True)
    axis = _check_axis(arr, axis)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        exps = xp.exp(arr)
        return exps / xp.sum(exps, axis=axis, keepdims=True)


def softmax_jacobian(weights: object) -> Any:
    """Jacobian of softmax at the point whose output is `weights`, for each row.

    J_ij = ∂p_i/∂x_j = p_i (δ_ij - p_j), i.e. J = diag(p) - p pᵀ.
    `weights` `(..., n)` -> `(..., n, n)`. The gradient reaching the scores is Jᵀ times the
    gradient at the weights, so a nearly one-hot p (J ≈ 0) blocks learning.
    """
    xp = array_namespace(weights)
    p = as_float_array(weights, "weights", xp=xp, min_ndim=1)
    eye = xp.eye(p.shape[-1], dtype=p.dtype, device=device(p))
    return p[..., :, None] * eye - p[..., :, None] * p[..., None, :]
