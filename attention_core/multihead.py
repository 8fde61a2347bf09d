"""Multi-head attention with every step exposed, in torch `nn.MultiheadAttention` layout.

Parameters follow `nn.Linear` (`y = x @ W.T + b`), so they load into
`torch.nn.MultiheadAttention` as `in_proj_weight = cat([w_q, w_k, w_v])`,
`in_proj_bias = cat([b_q, b_k, b_v])`, `out_proj.weight = w_o`, `out_proj.bias = b_o`.

Like `attention`, every function runs on NumPy arrays and on torch tensors (CPU or CUDA).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import AttentionSteps, scaled_dot_product, scaled_dot_product_attention
from .validation import (
    AttentionInputError,
    array_namespace,
    as_float_array,
    as_matrix,
    broadcast_batch,
    check_int,
    check_size,
    to_common,
    to_like,
)

__all__ = [
    "MultiHeadParams",
    "MultiHeadSteps",
    "init_multi_head_params",
    "merge_heads",
    "multi_head_attention",
    "split_heads",
]

_FIELDS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


@dataclass(frozen=True, eq=False)
class MultiHeadParams:
    """Projection weights of multi-head attention, torch `nn.Linear` layout (`x @ W.T + b`).

    w_q, w_k, w_v, w_o  `(d_model, d_model)`;  b_q, b_k, b_v, b_o  `(d_model,)`.
    Head h uses rows h·d_head .. (h+1)·d_head of w_q/w_k/w_v (columns of w_o), as torch does.
    Arrays are NumPy or tensors (`torch_backend.to_torch(params)`); either kind runs with either
    kind of input, moved to the inputs' device and dtype.
    """

    w_q: Any
    w_k: Any
    w_v: Any
    w_o: Any
    b_q: Any
    b_k: Any
    b_v: Any
    b_o: Any

    def __post_init__(self) -> None:
        values = {}
        for name in _FIELDS:
            value = getattr(self, name)
            # Tensors stay tensors (on their device); lists and numbers become NumPy.
            xp = array_namespace(value)
            values[name] = as_float_array(value, name, xp=xp, min_ndim=1, max_ndim=2)
        d_model = int(values["w_q"].shape[-1])
        for name, value in values.items():
            expected = (d_model, d_model) if name.startswith("w") else (d_model,)
            if tuple(value.shape) != expected:
                raise AttentionInputError(
                    f"{name} has shape {tuple(value.shape)} but should be {expected}: every "
                    "projection maps d_model features to d_model features."
                )
            object.__setattr__(self, name, value)

    @property
    def d_model(self) -> int:
        return int(self.w_q.shape[-1])

    @property
    def num_parameters(self) -> int:
        """4·d_model² weights + 4·d_model biases."""
        return 4 * self.d_model**2 + 4 * self.d_model


@dataclass(frozen=True, eq=False)
class MultiHeadSteps:
    """Every step of multi-head attention, in order.

    x_q `(..., q_pos, d_model)`, x_kv `(..., k_pos, d_model)`   inputs (x_kv is x_q for self-attn)
    q, k, v        `(..., pos, d_model)`         projections x W.T + b
    q_heads, k_heads, v_heads `(..., head, pos, d_head)`  split into heads
    attention      AttentionSteps per head, weights `(..., head, q_pos, k_pos)`
    concat         `(..., q_pos, d_model)`       head outputs side by side
    output         `(..., q_pos, d_model)`       concat W_o.T + b_o
    """

    x_q: Any
    x_kv: Any
    q: Any
    k: Any
    v: Any
    q_heads: Any
    k_heads: Any
    v_heads: Any
    attention: AttentionSteps
    concat: Any
    output: Any

    @property
    def weights(self) -> Any:
        """The attention pattern `(..., head, q_pos, k_pos)`: `attention.weights`."""
        return self.attention.weights


def _check_heads(d_model: int, num_heads: object) -> int:
    h = check_int(num_heads, "num_heads", minimum=1)
    if d_model % h:
        divisors = [n for n in range(1, d_model + 1) if d_model % n == 0]
        raise AttentionInputError(
            f"num_heads={h} does not divide d_model={d_model}: each head gets d_model/num_heads "
            f"features, so choose one of {divisors}."
        )
    return h


def _head_multipliers(head_mask: object, num_heads: int, like: Any) -> Any:
    """`(head,)` multipliers as `(head, 1, 1)`, on `like`'s device and dtype."""
    m = as_float_array(head_mask, "head_mask", xp=array_namespace(head_mask), min_ndim=1)
    if tuple(m.shape) != (num_heads,):  # also refuses a (layer, head) mask: pick its row
        raise AttentionInputError(
            f"head_mask has shape {tuple(m.shape)} but there are {num_heads} heads: give one "
            "multiplier per head (1 keeps a head, 0 removes it)."
        )
    (m,) = to_like(like, m)
    return m[:, None, None]


def check_widths(x_q: Any, x_kv: Any, d_model: int) -> None:
    """Raise unless both inputs have d_model features per token."""
    for x, name in ((x_q, "x_q"), (x_kv, "x_kv")):
        if x.shape[-1] != d_model:
            raise AttentionInputError(
                f"{name} has {x.shape[-1]} features per token but the parameters expect "
                f"d_model={d_model}: use inputs of width {d_model} or parameters made for "
                f"d_model={x.shape[-1]}."
            )


def init_multi_head_params(d_model: int, num_heads: int, seed: int = 0) -> MultiHeadParams:
    """Random parameters: Xavier-uniform weights, small non-zero biases U(-0.1, 0.1).

    Deterministic for a given seed. (torch initialises biases to 0; ours are non-zero so that
    tests and pictures exercise them.) `num_heads` is only checked to divide `d_model`.
    """
    d_model = check_int(d_model, "d_model", minimum=1)
    _check_heads(d_model, num_heads)
    check_size((4, d_model, d_model), "The parameters")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    # Xavier: keeps the variance of activations roughly constant through each projection.
    bound = math.sqrt(6.0 / (d_model + d_model))
    weights = [rng.uniform(-bound, bound, size=(d_model, d_model)) for _ in range(4)]
    biases = [rng.uniform(-0.1, 0.1, size=d_model) for _ in range(4)]
    return MultiHeadParams(*weights, *biases)


def split_heads(x: object, num_heads: int) -> Any:
    """`(..., pos, d_model)` -> `(..., head, pos, d_head)`, d_head = d_model / num_heads.

    Head h takes features h·d_head .. (h+1)·d_head - 1 (torch's order).
    """
    xp = array_namespace(x)
    x = as_float_array(x, "x", xp=xp, min_ndim=2)
    return split_heads_unchecked(x, _check_heads(x.shape[-1], num_heads))


def split_heads_unchecked(x: Any, num_heads: int) -> Any:
    """`(..., pos, d_model)` -> `(..., head, pos, d_head)`: `split_heads` on an array already
    checked."""
    *lead, pos, d_model = x.shape
    return x.reshape(*lead, pos, num_heads, d_model // num_heads).swapaxes(-2, -3)


def merge_heads(x: object) -> Any:
    """`(..., head, pos, d_head)` -> `(..., pos, head·d_head)`: the inverse of split_heads."""
    xp = array_namespace(x)
    return merge_heads_unchecked(as_float_array(x, "x", xp=xp, min_ndim=3))


def merge_heads_unchecked(x: Any) -> Any:
    """`(..., head, pos, d_head)` -> `(..., pos, head·d_head)`: `merge_heads` on an array
    already checked."""
    *lead, h, pos, d_head = x.shape
    return x.swapaxes(-2, -3).reshape(*lead, pos, h * d_head)


def _linear(x: Any, w: Any, b: Any) -> Any:
    """x Wᵀ + b `(..., out)` for x `(..., in)`: one product over every leading position at once,
    twice as fast for a training batch (NumPy multiplies a stack of matrices one at a time).
    Each output is still its own row's dot products, so a batch gives each sequence's numbers
    up to the rounding of those sums, whose order a BLAS may choose by the rows around them."""
    *lead, width = x.shape
    return (x.reshape(math.prod(lead), width) @ w.T).reshape(*lead, w.shape[0]) + b


def multi_head_attention(
    x_q: object,
    x_kv: object = None,
    *,
    params: MultiHeadParams,
    num_heads: int,
    mask: object = None,
    head_mask: object = None,
) -> MultiHeadSteps:
    """Multi-head attention (Vaswani et al. 2017), like `nn.MultiheadAttention` without dropout.

    q = x_q W_qᵀ + b_q,  k = x_kv W_kᵀ + b_k,  v = x_kv W_vᵀ + b_v          (..., pos, d_model)
    head_h = softmax(q_h k_hᵀ / √d_head) v_h, one per head          (..., head, q_pos, d_head)
    output = concat(head_1..head_H) W_oᵀ + b_o                              (..., q_pos, d_model)

    `x_kv=None` means self-attention (x_kv = x_q). `mask` is boolean (True = may attend) and
    broadcasts to `(..., head, q_pos, k_pos)`: a `(q_pos, k_pos)` mask applies to every head;
    for a per-example mask `(batch, q_pos, k_pos)` add the head axis yourself: `mask[:, None]`.
    With tensor inputs, NumPy parameters move to the inputs' device and dtype.

    `head_mask` `(head,)` multiplies each head's output before W_o, as Hugging Face's
    ``head_mask`` multiplies its attention weights ((m·P)V = m·(PV)): 0 removes a head (Michel
    et al. 2019), 1 keeps it. The steps keep each head's unmultiplied softmax pattern in
    `attention`; `concat` holds the multiplied outputs.
    """
    if not isinstance(params, MultiHeadParams):
        raise AttentionInputError(
            "params must be MultiHeadParams; create them with "
            "init_multi_head_params(d_model, num_heads, seed)."
        )
    xp = array_namespace(x_q, x_kv, params.w_q)
    x_q = as_matrix(x_q, "x_q (query input)", xp)
    x_kv = x_q if x_kv is None else as_matrix(x_kv, "x_kv (key/value input)", xp)
    d_model = params.d_model
    check_widths(x_q, x_kv, d_model)
    h = _check_heads(d_model, num_heads)
    broadcast_batch(("x_q", x_q.shape[:-2]), ("x_kv", x_kv.shape[:-2]))
    batch = np.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
    check_size((*batch, h, x_q.shape[-2], x_kv.shape[-2]), "The attention pattern")

    self_attention = x_kv is x_q
    x_q, x_kv = to_common(xp, x_q, x_kv)
    x_kv = x_q if self_attention else x_kv
    p = dict(zip(_FIELDS, to_like(x_q, *(getattr(params, name) for name in _FIELDS)), strict=True))
    multipliers = None if head_mask is None else _head_multipliers(head_mask, h, x_q)
    return multi_head(x_q, x_kv, p, h, mask, multipliers)


def multi_head(
    x_q: Any,
    x_kv: Any,
    p: Mapping[str, Any],
    num_heads: int,
    mask: Any,
    head_multipliers: Any = None,
    *,
    checked: bool = True,
) -> MultiHeadSteps:
    """The formula of `multi_head_attention` on inputs already checked, `p` the parameters'
    arrays by field name, like x_q, and `head_multipliers` `(head, 1, 1)` or None.

    checked=False also skips the attention's own checks of the scores and the mask (a boolean
    array that broadcasts): for a caller whose inputs are its own results, a model's forward
    pass run thousands of times in training.
    """
    # Separate projections let the same tokens play different roles: what to look for (q),
    # what to be found by (k) and what to hand over (v).
    q = _linear(x_q, p["w_q"], p["b_q"])  # (..., q_pos, d_model)
    k = _linear(x_kv, p["w_k"], p["b_k"])  # (..., k_pos, d_model)
    v = _linear(x_kv, p["w_v"], p["b_v"])  # (..., k_pos, d_model)
    # Each head attends in its own d_head-dimensional subspace, so heads can track
    # different relations at the cost of one full-width head.
    q_heads = split_heads_unchecked(q, num_heads)  # (..., head, q_pos, d_head)
    k_heads = split_heads_unchecked(k, num_heads)  # (..., head, k_pos, d_head)
    v_heads = split_heads_unchecked(v, num_heads)  # (..., head, k_pos, d_head)
    if checked:
        attention = scaled_dot_product_attention(q_heads, k_heads, v_heads, mask=mask)
    else:
        xp = array_namespace(q_heads)
        scale = 1.0 / math.sqrt(q_heads.shape[-1])
        attention = scaled_dot_product(xp, q_heads, k_heads, v_heads, mask, scale, checked=False)
    head_outputs = attention.output  # (..., head, q_pos, d_head)
    if head_multipliers is not None:
        head_outputs = head_outputs * head_multipliers
    concat = merge_heads_unchecked(head_outputs)  # (..., q_pos, d_model)
    # W_o mixes the heads' results back into one d_model-wide representation per token.
    output = _linear(concat, p["w_o"], p["b_o"])  # (..., q_pos, d_model)
    return MultiHeadSteps(x_q, x_kv, q, k, v, q_heads, k_heads, v_heads, attention, concat, output)
