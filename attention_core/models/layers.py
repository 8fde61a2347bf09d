"""The pieces model families share: activations and norms, written once over NumPy arrays.

    erf         the error function, vectorised (A&S 7.1.26)
    gelu        GELU(x) = ½ x (1 + erf(x / √2)), the exact form BERT was trained with
    gelu_tanh   GELU's tanh approximation, GPT-2's "gelu_new"
    layer_norm  LayerNorm(x) = (x - mean) / sqrt(var + eps) · γ + β over the last axis
    rms_norm    RMSNorm(x) = x / sqrt(mean(x²) + eps) · γ over the last axis (Llama, Qwen2)
    rms         sqrt(mean(x²) + eps), what RMSNorm divides by
    silu        SiLU(x) = x · σ(x), the gate of a SwiGLU MLP

A norm takes its learned γ (and β) as arrays, so each family keeps its weights in its own
layout and calls the same formula.
"""

from __future__ import annotations

import numpy as np

__all__ = ["erf", "gelu", "gelu_tanh", "layer_norm", "rms", "rms_norm", "silu"]


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, vectorised in NumPy. (SciPy is not a dependency, and ``math.erf``
    in a Python loop over every activation of every layer would cost more than the layer.)

    erf(x) ≈ sign(x) · (1 - (a₁t + a₂t² + a₃t³ + a₄t⁴ + a₅t⁵) · exp(-x²)),  t = 1 / (1 + p|x|)

    Abramowitz & Stegun, Handbook of Mathematical Functions, formula 7.1.26: absolute error at
    most 1.5e-7 in exact arithmetic (about 6e-7 when evaluated in float32, i.e. a few float32
    ulps near ±1), far below what the 1e-4 parity with torch's ``erf`` needs.
    """
    x = _as_float(x)
    shape, x = x.shape, np.atleast_1d(x)  # in-place ufuncs need arrays, not NumPy scalars
    dtype = x.dtype
    a1, a2, a3, a4, a5, p = (
        dtype.type(c)
        for c in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429, 0.3275911)
    )
    # In-place updates: this runs on the (q_pos, d_ff) activations of every layer, so each
    # saved temporary array is a measurable share of the forward pass.
    ax = np.abs(x)
    t = p * ax
    t += 1
    np.reciprocal(t, out=t)
    poly = a5 * t  # Horner's rule for a1 t + a2 t² + ... + a5 t⁵
    for a in (a4, a3, a2, a1):
        poly += a
        poly *= t
    gauss = np.square(ax, out=ax)
    np.negative(gauss, out=gauss)
    # exp(-x²) underflows to exactly 0 for |x| > ~9 (float32), giving erf = ±1 with no warning.
    with np.errstate(under="ignore"):
        np.exp(gauss, out=gauss)
    poly *= gauss
    np.subtract(1, poly, out=poly)
    # erf is odd: compute it for |x| and give it x's sign.
    return np.copysign(poly, x, out=poly).reshape(shape)


def _as_float(x: object) -> np.ndarray:
    """float32/float64 stay as they are; anything else becomes float64."""
    x = np.asarray(x)
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float64)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x · Φ(x) = ½ x (1 + erf(x / √2)), the exact form BERT was trained with."""
    x = _as_float(x)
    out = erf(x * x.dtype.type(1.0 / np.sqrt(2.0)))
    out += 1
    out *= x
    out *= 0.5
    return out


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU(x) ≈ ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))), the approximation GPT-2 was trained
    with (transformers' "gelu_new", torch's ``gelu(approximate="tanh")``): within ~1e-3 of the
    exact ``gelu``, so a checkpoint must be run with the form it was trained with."""
    x = _as_float(x)
    inner = x * x
    inner *= x.dtype.type(0.044715)
    inner += 1
    inner *= x  # x + 0.044715 x³, one temporary for the (n, d_ff) activations
    inner *= x.dtype.type(np.sqrt(2.0 / np.pi))
    out = np.tanh(inner, out=inner)
    out += 1
    out *= x
    out *= 0.5
    return out


def layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm(x) = (x - mean) / sqrt(var + eps) · γ + β over the last axis (biased var,
    like torch). ``gain`` γ and ``bias`` β are `(d_model,)`."""
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=-1, keepdims=True)
    # Every position gets zero mean and unit variance, so the residual stream's scale stays
    # fixed however many layers add to it; γ and β then restore a learned scale and shift.
    return centered / np.sqrt(var + x.dtype.type(eps)) * gain + bias


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm(x) = x / sqrt(mean(x²) + eps) · γ over the last axis (Zhang & Sennrich 2019).

    Unlike LayerNorm there is no mean to subtract and no bias: only the scale is fixed.
    """
    normed = x / rms(x, eps)
    normed *= gain  # in place: one (n, d_model) temporary fewer, and a layer runs two norms
    return normed


def rms(x: np.ndarray, eps: float) -> np.ndarray:
    """sqrt(mean(x²) + eps) over the last axis, kept `(..., 1)`: what RMSNorm divides by. Held
    fixed, it makes the norm linear, so what several writers add up to can be split by writer."""
    return np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + x.dtype.type(eps))


def silu(x: np.ndarray) -> np.ndarray:
    """SiLU(x) = x · σ(x) = x / (1 + e^(-x)) (also called swish)."""
    with np.errstate(over="ignore"):  # e^(-x) = inf for x < -88 gives x / inf = -0, correctly
        # The same numbers as x / (1 + np.exp(-x)), with one (n, d_ff) temporary instead of three.
        denominator = np.exp(-x)
        denominator += 1
        return np.divide(x, denominator, out=denominator)
