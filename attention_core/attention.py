"""Attention with every intermediate step returned: scaled dot product and its rivals.

Shapes: q `(..., q_pos, d_k)`, k `(..., k_pos, d_k)`, v `(..., k_pos, d_v)`; scores and weights
`(..., q_pos, k_pos)` (rows are queries, columns are keys); output `(..., q_pos, d_v)`. The
leading `...` (batch, head) dims broadcast. q_pos may differ from k_pos (cross-attention).
Masks are boolean, True = may attend, and broadcast to `(..., q_pos, k_pos)`.

All scoring functions share one tail (`_finish`): mask -> softmax -> weighted sum of values,
so they differ only in how `scores` and `scaled` are computed.

Every function runs on NumPy arrays and on torch tensors (CPU or CUDA): it computes in the
inputs' array namespace `xp`, on their device, and gradients flow through every step. Given
tensors, the steps hold tensors; lists and NumPy arrays (a mask, say) join the tensors' device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from . import validation
from .softmax import stable_softmax
from .validation import AttentionInputError, device

__all__ = [
    "SCORING_FUNCTIONS",
    "AdditiveParams",
    "AttentionSteps",
    "additive_attention",
    "attend",
    "cosine_attention",
    "dot_product_attention",
    "init_additive_params",
    "scaled_dot_product_attention",
    "soft_cap",
]


@dataclass(frozen=True, eq=False)
class AttentionSteps:
    """Every step of one attention computation, in the order it happens.

    scores        `(..., q_pos, k_pos)`  raw compatibility of query i with key j (e.g. q_i·k_j)
    scaled        `(..., q_pos, k_pos)`  scores × scale (what the softmax would see unmasked)
    masked        `(..., q_pos, k_pos)`  scaled, with -inf where the mask is False
    weights       `(..., q_pos, k_pos)`  softmax over keys; each row sums to 1 (0 if fully masked)
    output        `(..., q_pos, d_v)`    weights @ v
    fully_masked  `(..., q_pos)` bool    True for a query that may attend to nothing; its weights
                                         and output are all zero
    scale         float                  the factor used (1/sqrt(d_k) by default, 1.0 unscaled,
                                         1/temperature for cosine)
    softcap       float or None          c when scaled = c·tanh(scores·scale / c) (Gemma 2's
                                         logit soft-capping), None when scaled = scores·scale

    Arrays are NumPy arrays or torch tensors, whichever the inputs were.
    Compared by identity (arrays have no single truth value); pickles, so it can be cached.
    """

    scores: Any
    scaled: Any
    masked: Any
    weights: Any
    output: Any
    fully_masked: Any
    scale: float
    softcap: float | None = None


def _check_qkv(q: object, k: object, v: object) -> tuple[Any, Any, Any, Any]:
    """The namespace xp and validated q, k, v in it, on one device, in one float dtype.

    d_k equality is checked by the caller.
    """
    xp = validation.array_namespace(q, k, v)
    q = validation.as_matrix(q, "Q (queries)", xp)
    k = validation.as_matrix(k, "K (keys)", xp)
    v = validation.as_matrix(v, "V (values)", xp)
    if k.shape[-2] != v.shape[-2]:
        raise AttentionInputError(
            f"K has {k.shape[-2]} rows but V has {v.shape[-2]}: every key needs exactly one "
            "value, so K and V must have the same number of rows (key positions)."
        )
    validation.broadcast_batch(("Q", q.shape[:-2]), ("K", k.shape[:-2]), ("V", v.shape[:-2]))
    return xp, *validation.to_common(xp, q, k, v)


def check_dot_product(q: object, k: object, v: object) -> tuple[Any, Any, Any, Any]:
    """`_check_qkv`, plus the width every dot-product score needs: q `(..., q_pos, d_k)` and
    k `(..., k_pos, d_k)` share d_k."""
    xp, q, k, v = _check_qkv(q, k, v)
    validation.check_same_width(
        q, k, "Q", "K", "queries and keys must have the same width d_k (one dot product each)"
    )
    return xp, q, k, v


def score_scale(scale: object, d_k: int) -> float:
    """The score scale: 1/√d_k unless the caller chose one."""
    return 1.0 / math.sqrt(d_k) if scale is None else validation.check_real(scale, "scale")


def _score_shape(q: Any, k: Any) -> tuple[int, ...]:
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    shape = (*batch, q.shape[-2], k.shape[-2])
    validation.check_size(shape, "The score matrix")
    return shape


def _shared_matmul(a: Any, b: Any) -> Any:
    """a @ b `(..., g, m, n)`, for a b shared along axis -3 (``b.shape[-3] == 1``).

    Grouped-query attention gives each KV head's keys and values to a group of g query heads:
    q `(kv, g, q_pos, d)` against k `(kv, 1, k_pos, d)`. The same product with the group's rows
    stacked, `(kv, g·q_pos, d) @ (kv, d, k_pos)`, is g small matrix products fewer; NumPy's
    broadcasting matmul runs one per head.
    """
    # A narrower guard only falls back to a @ b: the same numbers, more slowly.
    stackable = a.ndim >= 3 and b.ndim == a.ndim  # pragma: no mutate
    if not (stackable and b.shape[-3] == 1 and a.shape[:-3] == b.shape[:-3]):  # pragma: no mutate
        return a @ b
    stacked = a.reshape(*a.shape[:-3], a.shape[-3] * a.shape[-2], a.shape[-1])
    return (stacked @ b[..., 0, :, :]).reshape(*a.shape[:-1], b.shape[-1])


def soft_cap(x: Any, cap: float) -> Any:
    """c·tanh(x / c): x where |x| ≪ c, bent smoothly to stay within (-c, c).

    Gemma 2 caps its attention scores (c = 50) and its final logits (c = 30) this way, so no
    score can grow large enough to put all of a row's weight on one key.
    """
    # A torch tensor brings its own tanh: NumPy's would take it off its device and its graph.
    return cap * (x / cap).tanh() if hasattr(x, "tanh") else cap * np.tanh(x / cap)


def _finish(
    xp: Any,
    scores: Any,
    scaled: Any,
    scale: float,
    v: Any,
    mask: object,
    *,
    checked: bool = True,
    softcap: float | None = None,
) -> AttentionSteps:
    """Mask, softmax and weighted sum: the part every scoring function shares."""
    if checked and not bool(xp.all(xp.isfinite(scaled))):
        raise AttentionInputError(
            "Some attention scores overflowed to infinity: the inputs are too large for "
            f"{scaled.dtype}. Scale Q and K down (or use float64)."
        )
    if mask is None:
        masked = scaled
        fully_masked = xp.zeros(scaled.shape[:-1], dtype=xp.bool, device=device(scaled))
    else:
        allowed = mask
        if checked:
            allowed = validation.as_mask(mask, "The mask", tuple(scaled.shape), xp)
            validation.check_size(
                np.broadcast_shapes(allowed.shape, scaled.shape), "The masked scores"
            )
        if not isinstance(scaled, np.ndarray):
            allowed = xp.asarray(allowed, device=device(scaled))  # a NumPy mask joins tensors
        # -inf makes exp() exactly 0, so a blocked key gets exactly zero weight.
        masked = xp.where(allowed, scaled, -math.inf)
        # Read off the mask's own shape (a causal mask is one (q_pos, k_pos) for every head).
        fully_masked = ~xp.broadcast_to(xp.any(allowed, axis=-1), masked.shape[:-1])
    weights = stable_softmax(masked, axis=-1)
    # Each output row is a convex combination of value rows (or zero if nothing is visible).
    output = _shared_matmul(weights, v)  # (..., q_pos, d_v)
    return AttentionSteps(
        scores, scaled, masked, weights, output, fully_masked, float(scale), softcap
    )


def scaled_dot_product_attention(
    q: object,
    k: object,
    v: object,
    *,
    mask: object = None,
    scale: float | None = None,
    softcap: float | None = None,
) -> AttentionSteps:
    """Scaled dot-product attention, as in "Attention Is All You Need" and torch's SDPA.

    scores  = Q Kᵀ                              (..., q_pos, k_pos)
    scaled  = scores · scale,  scale = 1/√d_k by default
              (with a softcap c: c·tanh(scores · scale / c), Gemma 2's soft-capping)
    masked  = scaled where mask else -inf
    weights = softmax(masked, over keys)
    output  = weights V                          (..., q_pos, d_v)

    Same result as `torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
    scale=scale)` with a boolean mask. A query that may attend to nothing gets zero weights and a
    zero output (as recent torch SDPA does; `torch.softmax` and `nn.MultiheadAttention` give NaN)
    and is flagged in `fully_masked`.
    """
    xp, q, k, v = check_dot_product(q, k, v)
    _score_shape(q, k)
    if softcap is not None:
        softcap = validation.check_real(softcap, "softcap", positive=True)
    return scaled_dot_product(xp, q, k, v, mask, score_scale(scale, q.shape[-1]), softcap=softcap)


def scaled_dot_product(
    xp: Any,
    q: Any,
    k: Any,
    v: Any,
    mask: Any,
    scale: float,
    *,
    checked: bool = True,
    softcap: float | None = None,
) -> AttentionSteps:
    """The formula of `scaled_dot_product_attention`, on q, k, v already checked.

    checked=False also skips `_finish`'s checks of the scores and of the mask (which must then
    be a boolean array that broadcasts): for a caller whose inputs are its own results, checked
    once per call where the user's input came in (a model's forward pass, whose per-layer,
    per-step checks would cost more than the formula).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by _finish
        scores = _shared_matmul(q, k.mT)  # (..., q_pos, k_pos)
        # With unit-variance entries q·k has variance d_k; 1/√d_k brings it back to 1 so the
        # softmax does not saturate into a one-hot with vanishing gradients.
        scaled = scores * scale
        if softcap is not None:
            scaled = soft_cap(scaled, softcap)
    return _finish(xp, scores, scaled, scale, v, mask, checked=checked, softcap=softcap)


def dot_product_attention(
    q: object, k: object, v: object, *, mask: object = None
) -> AttentionSteps:
    """Unscaled dot-product (Luong "dot") attention: scaled_dot_product_attention with scale=1.

    scores = Q Kᵀ,  weights = softmax(scores),  output = weights V
    """
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=1.0)


@dataclass(frozen=True, eq=False)
class AdditiveParams:
    """Parameters of additive (Bahdanau) attention: score(q, k) = vᵀ tanh(W_q q + W_k k).

    w_q `(d_attn, d_q)`, w_k `(d_attn, d_k)` (nn.Linear layout, applied as x @ W.T), v `(d_attn,)`.
    Usually d_q = d_k, but queries and keys may have different widths here.
    """

    w_q: Any
    w_k: Any
    v: Any

    def __post_init__(self) -> None:
        w_q = validation.as_float_array(self.w_q, "W_q", min_ndim=2, max_ndim=2)
        w_k = validation.as_float_array(self.w_k, "W_k", min_ndim=2, max_ndim=2)
        v = validation.as_float_array(self.v, "v", min_ndim=1, max_ndim=1)
        if not w_q.shape[0] == w_k.shape[0] == v.shape[0]:
            raise AttentionInputError(
                f"W_q has {w_q.shape[0]} rows, W_k has {w_k.shape[0]} and v has {v.shape[0]} "
                "entries: all three must equal the hidden size d_attn."
            )
        object.__setattr__(self, "w_q", w_q)
        object.__setattr__(self, "w_k", w_k)
        object.__setattr__(self, "v", v)

    @property
    def d_attn(self) -> int:
        return int(self.v.shape[0])


def init_additive_params(d_k: int, d_attn: int, seed: int = 0) -> AdditiveParams:
    """Random additive-attention parameters (Xavier-uniform W_q, W_k; v ~ U(-1/√d_attn, ..)).

    Deterministic for a given seed.
    """
    d_k = validation.check_int(d_k, "d_k", minimum=1)
    d_attn = validation.check_int(d_attn, "d_attn", minimum=1)
    validation.check_size((d_attn, d_k), "W_q")
    rng = np.random.default_rng(validation.check_int(seed, "seed", minimum=0))
    bound = math.sqrt(6.0 / (d_k + d_attn))
    w_q = rng.uniform(-bound, bound, size=(d_attn, d_k))
    w_k = rng.uniform(-bound, bound, size=(d_attn, d_k))
    v = rng.uniform(-1.0, 1.0, size=d_attn) / math.sqrt(d_attn)
    return AdditiveParams(w_q, w_k, v)


def additive_attention(
    q: object, k: object, v: object, *, params: AdditiveParams, mask: object = None
) -> AttentionSteps:
    """Additive (Bahdanau) attention.

    scores_ij = vᵀ tanh(W_q q_i + W_k k_j)      (..., q_pos, k_pos)
    scaled    = scores  (scale = 1: the learned v already sets the sharpness)
    weights   = softmax(masked scores),  output = weights V
    """
    if not isinstance(params, AdditiveParams):
        raise AttentionInputError(
            "additive attention needs params=AdditiveParams(...); create them with "
            "init_additive_params(d_k, d_attn, seed)."
        )
    xp, q, k, v = _check_qkv(q, k, v)
    for x, w, name in ((q, params.w_q, "Q"), (k, params.w_k, "K")):
        if x.shape[-1] != w.shape[1]:
            raise AttentionInputError(
                f"{name} has {x.shape[-1]} columns but W_{name.lower()} expects {w.shape[1]}: "
                f"create the parameters with the width of {name} (init_additive_params(d_k=...))."
            )
    shape = _score_shape(q, k)
    validation.check_size((*shape, params.d_attn), "The additive hidden layer")
    # The parameters (NumPy) follow the inputs to their namespace, device and dtype.
    w_q, w_k, w_v = validation.to_like(q, params.w_q, params.w_k, params.v)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by _finish
        hq = q @ w_q.T  # (..., q_pos, d_attn)
        hk = k @ w_k.T  # (..., k_pos, d_attn)
        # Every (query, key) pair goes through a small tanh layer, so the score need not be
        # bilinear.
        hidden = xp.tanh(hq[..., :, None, :] + hk[..., None, :, :])  # (..., q_pos, k_pos, d_attn)
    scores = hidden @ w_v  # (..., q_pos, k_pos)
    return _finish(xp, scores, scores, 1.0, v, mask)


def cosine_attention(
    q: object, k: object, v: object, *, temperature: float = 0.1, mask: object = None
) -> AttentionSteps:
    """Cosine-similarity attention with a temperature.

    scores_ij = (q_i · k_j) / (‖q_i‖ ‖k_j‖)  in [-1, 1]  (0 if either vector is zero)
    scaled    = scores / temperature          (scale = 1/temperature)
    weights   = softmax(masked scaled),  output = weights V
    """
    xp, q, k, v = _check_qkv(q, k, v)
    validation.check_same_width(
        q, k, "Q", "K", "queries and keys must have the same width to compare them"
    )
    _score_shape(q, k)
    temperature = validation.check_real(temperature, "temperature", positive=True)

    def unit(x: Any) -> Any:
        norm = xp.linalg.vector_norm(x, axis=-1, keepdims=True)
        # A zero vector has no direction; giving it a zero unit vector makes its cosine 0.
        return xp.where(norm > 0, x / xp.where(norm > 0, norm, 1.0), 0.0)

    # Normalising removes length, so only the angle between query and key counts.
    scores = xp.clip(unit(q) @ unit(k).mT, -1.0, 1.0)  # (..., q_pos, k_pos)
    scale = 1.0 / temperature
    # Cosines live in [-1, 1], too flat for a softmax; the temperature sharpens them.
    scaled = scores * scale
    return _finish(xp, scores, scaled, scale, v, mask)


SCORING_FUNCTIONS: Mapping[str, Callable[..., AttentionSteps]] = MappingProxyType(
    {
        "dot": dot_product_attention,
        "scaled_dot": scaled_dot_product_attention,
        "additive": additive_attention,
        "cosine": cosine_attention,
    }
)


def attend(
    q: object,
    k: object,
    v: object,
    *,
    scoring: str = "scaled_dot",
    mask: object = None,
    scale: float | None = None,
    temperature: float = 0.1,
    additive_params: AdditiveParams | None = None,
) -> AttentionSteps:
    """Run attention with the scoring function named `scoring` (a key of SCORING_FUNCTIONS).

    "dot" -> dot_product_attention, "scaled_dot" -> scaled_dot_product_attention (uses `scale`),
    "additive" -> additive_attention (needs `additive_params`), "cosine" -> cosine_attention
    (uses `temperature`). Arguments that do not apply to the chosen function are ignored.
    """
    if scoring == "scaled_dot":
        return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
    if scoring == "dot":
        return dot_product_attention(q, k, v, mask=mask)
    if scoring == "cosine":
        return cosine_attention(q, k, v, temperature=temperature, mask=mask)
    if scoring == "additive":
        if additive_params is None:
            raise AttentionInputError(
                "additive scoring needs additive_params: create them with "
                "init_additive_params(d_k, d_attn, seed)."
            )
        return additive_attention(q, k, v, params=additive_params, mask=mask)
    names = ", ".join(repr(n) for n in SCORING_FUNCTIONS)
    raise AttentionInputError(f"Unknown scoring function {scoring!r}: choose one of {names}.")
