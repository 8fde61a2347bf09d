"""Positional information: sinusoidal and learned tables, rotary embeddings (RoPE), ALiBi.

Attention itself is blind to order (permuting the tokens permutes the outputs), so position
must be injected: added to the embeddings (sinusoidal, learned), rotated into q and k (RoPE), or
added to the scores as a distance penalty (ALiBi). Tables are float64 NumPy arrays;
`apply_rotary` and `rope_scores` also run on torch tensors (CPU or CUDA), like `attention`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .validation import (
    AttentionInputError,
    array_namespace,
    as_float_array,
    check_int,
    check_real,
    check_same_width,
    check_size,
    device,
    to_common,
    to_like,
)

__all__ = [
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "learned_encoding",
    "llama3_frequencies",
    "rope_scores",
    "rotary_tables",
    "rotate_half_pairs",
    "sinusoid_shift_matrix",
    "sinusoid_wavelengths",
    "sinusoidal_encoding",
]


def check_base(base: object) -> float:
    """The sinusoids' `base` as a float, or an `AttentionInputError` unless it exceeds 1."""
    base = check_real(base, "base", positive=True)
    if base <= 1:
        raise AttentionInputError(f"base must be greater than 1 (10000 is standard), got {base}.")
    return base


def sinusoid_frequencies(d_model: int, base: float) -> np.ndarray:
    """ω_i = base^(-2i/d_model) for pair i = 0 .. ceil(d_model/2) - 1, `(ceil(d_model/2),)`."""
    return base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """Fixed sinusoidal position table of "Attention Is All You Need", `(num_positions, d_model)`.

    PE[p, 2i]   = sin(p / base^(2i/d_model))
    PE[p, 2i+1] = cos(p / base^(2i/d_model))

    Pair i is a point turning on a circle with wavelength 2π·base^(2i/d_model): fast in the first
    dimensions, slow in the last. An odd d_model ends with a lone sine dimension.
    """
    n = check_int(num_positions, "num_positions", minimum=1)
    d = check_int(d_model, "d_model", minimum=1)
    base = check_base(base)
    check_size((n, d), "The position table")
    angles = np.arange(n, dtype=np.float64)[:, None] * sinusoid_frequencies(d, base)  # (pos, pairs)
    pe = np.empty((n, d))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d // 2])
    return pe


def sinusoid_wavelengths(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Wavelength of each (sin, cos) pair, `(ceil(d_model/2),)`: 2π·base^(2i/d_model).

    From 2π (pair 0) up to just under 2π·base; measured in positions.
    """
    d = check_int(d_model, "d_model", minimum=1)
    return 2 * np.pi / sinusoid_frequencies(d, check_base(base))


def sinusoid_shift_matrix(d_model: int, offset: float, base: float = 10000.0) -> np.ndarray:
    """The fixed linear map M `(d_model, d_model)` with PE[p + offset] = M @ PE[p] for every p.

    M is block diagonal: pair i, (sin ωp, cos ωp) with ω = base^(-2i/d_model), is rotated by
    [[cos ωk, sin ωk], [-sin ωk, cos ωk]] (k = offset), from sin(a+b) = sin a cos b + cos a sin b
    and cos(a+b) = cos a cos b - sin a sin b. M depends on the offset only, not on p, which is why
    a linear layer can learn to attend "k tokens back".

    For odd d_model the last dimension is a sine without its cosine partner, so no exact linear
    map exists there; M holds cos(ωk) in that corner and only the other dimensions are exact.
    """
    d = check_int(d_model, "d_model", minimum=1)
    k = check_real(offset, "offset")
    base = check_base(base)
    check_size((d, d), "The shift matrix")
    m = np.zeros((d, d))
    for i, omega in enumerate(sinusoid_frequencies(d, base)):
        c, s = math.cos(omega * k), math.sin(omega * k)
        a = 2 * i
        if a + 1 < d:
            m[a, a], m[a, a + 1] = c, s
            m[a + 1, a], m[a + 1, a + 1] = -s, c
        else:
            m[a, a] = c
    return m


def learned_encoding(
    num_positions: int, d_model: int, seed: int = 0, std: float = 0.02
) -> np.ndarray:
    """A random `(num_positions, d_model)` table, N(0, std²), standing in for a learned one.

    BERT and GPT-2 start their position tables like this (std 0.02) and train them; unlike the
    sinusoidal table, nothing relates row p to row p+k and positions past the table do not exist.
    """
    n = check_int(num_positions, "num_positions", minimum=1)
    d = check_int(d_model, "d_model", minimum=1)
    std = check_real(std, "std", positive=True)
    check_size((n, d), "The position table")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    return rng.normal(0.0, std, size=(n, d))


def _rotary_positions(positions: object, x: Any, xp: Any) -> Any:
    """float64 positions `(pos,)` (or broadcastable to x.shape[:-1]) on x's device."""
    if positions is None:
        return xp.arange(x.shape[-2], dtype=xp.float64, device=device(x))
    pos = as_float_array(positions, "positions", xp=xp, min_ndim=1)
    try:
        np.broadcast_shapes(tuple(pos.shape), tuple(x.shape[:-1]))
    except ValueError:
        raise AttentionInputError(
            f"positions has shape {tuple(pos.shape)} but x has {x.shape[-2]} positions (shape "
            f"{tuple(x.shape)}): give one position per row of x."
        ) from None
    return xp.astype(xp.asarray(pos, device=device(x)), xp.float64)


def apply_rotary(x: object, positions: object = None, base: float = 10000.0) -> Any:
    """Rotary position embedding (RoPE, Su et al. 2021), Hugging Face "rotate_half" convention.

    x `(..., pos, d)` with d even; positions `(pos,)` (or broadcastable to x.shape[:-1]),
    default 0 .. pos-1. Dimension i is paired with dimension i + d/2 (not 2i with 2i+1 as in the
    paper), exactly like `transformers`' `apply_rotary_pos_emb` for Llama, GPT-NeoX, etc.:

    θ_i = p · base^(-2i/d),  i = 0 .. d/2 - 1
    out[..., i]       = x[..., i] cos θ_i - x[..., i + d/2] sin θ_i
    out[..., i + d/2] = x[..., i + d/2] cos θ_i + x[..., i] sin θ_i

    Rotating q at position m and k at position n by their angles makes q·k depend on m - n only.
    Runs on NumPy arrays and torch tensors; the angles are computed in float64 either way.
    A model that rotates many arrays at the same positions builds `rotary_tables` once and calls
    `rotate_half_pairs` for each (what this function does for one array).
    """
    xp = array_namespace(x, positions)
    x = as_float_array(x, "x", xp=xp, min_ndim=2)
    if x.shape[-1] % 2:
        raise AttentionInputError(
            "Rotary embeddings rotate pairs of dimensions, so the width must be even; "
            f"x has {x.shape[-1]}."
        )
    (x,) = to_common(xp, x)
    cos, sin = rotary_tables(_rotary_positions(positions, x, xp), x.shape[-1], base, like=x)
    return rotate_half_pairs(x, cos, sin)


def rotary_tables(
    positions: Any, d: int, base: float, *, like: Any, frequencies: np.ndarray | None = None
) -> tuple[Any, Any]:
    """cos θ and sin θ `(..., pos, d)` for `apply_rotary` (θ_i repeated for i and i + d/2).

    positions: float64 positions in the namespace of `like`, whose dtype and device the tables
    take (angles in float64, then rounded once). frequencies `(d/2,)`: the ω_i to use instead of
    base^(-2i/d) (a scaled RoPE: `llama3_frequencies`).
    """
    xp = array_namespace(like)
    if frequencies is None:
        frequencies = sinusoid_frequencies(d, check_base(base))
    (frequencies,) = to_like(positions, frequencies)
    theta = positions[..., None] * frequencies  # (..., pos, d/2)
    cos, sin = to_like(
        like, xp.concat([xp.cos(theta)] * 2, axis=-1), xp.concat([xp.sin(theta)] * 2, axis=-1)
    )
    return cos, sin


def llama3_frequencies(
    d: int,
    base: float,
    factor: float,
    low_freq_factor: float,
    high_freq_factor: float,
    original_context: float,
) -> np.ndarray:
    """Llama 3.1's scaled RoPE frequencies (rope_type "llama3"), `(d/2,)` float64.

    With ω_i = base^(-2i/d) and wavelength λ_i = 2π/ω_i, for a model trained on
    `original_context` positions:
        λ_i < original / high_freq_factor   ω_i             (short waves: kept)
        λ_i > original / low_freq_factor    ω_i / factor    (long waves: slowed down)
        between                             (1 - s) ω_i / factor + s ω_i,
                                            s = (original / λ_i - low) / (high - low)
    """
    omega = sinusoid_frequencies(d, check_base(base))
    wavelength = 2 * math.pi / omega
    # Waves shorter than the context turn many times in it and keep their speed; those longer
    # than it are slowed by `factor`, so far positions look like the near ones trained on.
    s = (original_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - s) * omega / factor + s * omega
    slowed = np.where(wavelength > original_context / low_freq_factor, omega / factor, blended)
    return np.where(wavelength < original_context / high_freq_factor, omega, slowed)


def rotate_half_pairs(x: Any, cos: Any, sin: Any) -> Any:
    """x · cos θ + rotate_half(x) · sin θ with rotate_half(x) = (-x[d/2:], x[:d/2]).

    x `(..., pos, d)`; cos, sin from `rotary_tables`, broadcasting to x.
    """
    xp = array_namespace(x)
    half = x.shape[-1] // 2
    rotated_half = xp.concat([-x[..., half:], x[..., :half]], axis=-1)
    # A 2-D rotation per pair: lengths are kept, only the angle encodes the position.
    return x * cos + rotated_half * sin


def rope_scores(
    q: object,
    k: object,
    q_positions: object = None,
    k_positions: object = None,
    base: float = 10000.0,
) -> Any:
    """Dot-product scores after rotating q and k: rot(q, m) · rot(k, n), `(..., q_pos, k_pos)`.

    Unscaled (divide by √d yourself if you want SDPA's scores). Depends on m - n, not m and n.
    """
    xp = array_namespace(q, k)
    q = as_float_array(q, "Q (queries)", xp=xp, min_ndim=2)
    k = as_float_array(k, "K (keys)", xp=xp, min_ndim=2)
    check_same_width(q, k, "Q", "K", "queries and keys must have the same width d_k")
    check_size((q.shape[-2], k.shape[-2]), "The score matrix")
    q, k = to_common(xp, q, k)
    rq = apply_rotary(q, q_positions, base)
    rk = apply_rotary(k, k_positions, base)
    return rq @ rk.mT


def alibi_slopes(num_heads: int) -> np.ndarray:
    """Head-specific ALiBi slopes, `(num_heads,)`, as in Press et al. 2022 and HF Bloom.

    For n a power of 2: a geometric sequence starting at 2^(-8/n) with that ratio, e.g. 8 heads
    -> 1/2, 1/4, ..., 1/256. Otherwise, with m the largest power of 2 below n: the m slopes for
    m heads, then every other slope of the 2m-head sequence until there are n.
    """
    n = check_int(num_heads, "num_heads", minimum=1)
    check_size((n,), "The slopes")

    def power_of_2_slopes(count: int) -> list[float]:
        start = 2.0 ** (-8.0 / count)
        return [start ** (i + 1) for i in range(count)]

    m = 2 ** math.floor(math.log2(n))
    slopes = power_of_2_slopes(m)
    if m < n:
        slopes += power_of_2_slopes(2 * m)[0::2][: n - m]
    return np.array(slopes)


def alibi_bias(
    num_heads: int, q_len: int, k_len: int | None = None, *, symmetric: bool = False
) -> np.ndarray:
    """ALiBi score bias `(head, q_pos, k_pos)`: bias[h, i, j] = slope_h · (j - i).

    Added to the scaled scores, it penalises key j linearly with its distance behind query i, a
    different rate per head (`alibi_slopes`). Queries and keys are aligned top-left like
    `causal_mask` (query i is at position i).

    For j > i the formula gives a positive bias (a bonus for future keys). ALiBi was designed for
    causal models, where a causal mask removes those entries; combine it with `causal_mask`.
    `symmetric=True` gives -slope_h · |i - j| instead, a common bidirectional variant.
    """
    slopes = alibi_slopes(num_heads)
    q = check_int(q_len, "q_len", minimum=1)
    k = q if k_len is None else check_int(k_len, "k_len", minimum=1)
    check_size((slopes.size, q, k), "The ALiBi bias")
    distance = np.arange(k)[None, :] - np.arange(q)[:, None]  # j - i, (q_pos, k_pos)
    if symmetric:
        distance = -np.abs(distance)
    return slopes[:, None, None] * distance
