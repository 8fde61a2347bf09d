"""The same attention functions on torch tensors, on CPU or CUDA.

Results match the NumPy functions within float tolerance and come back in the same dataclasses
(`AttentionSteps`, `MultiHeadSteps`) holding tensors on the device the inputs live on. Nothing is
moved between devices except parameters and masks, which follow the inputs. No autograd graph is
cut: gradients flow through every step.

This is the only module that imports torch; `import attention_core` does not load it.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass, replace
from typing import Any

import numpy as np

from . import masks as _np_masks
from .attention import SCORING_FUNCTIONS, AdditiveParams, AttentionSteps
from .multihead import MultiHeadParams, MultiHeadSteps
from .validation import (
    AttentionInputError,
    as_float_array,
    broadcast_batch,
    check_int,
    check_real,
    check_same_width,
    check_size,
)

try:
    import torch
except ImportError as err:  # pragma: no cover - torch is a test requirement
    raise ImportError(
        "attention_core.torch_backend needs PyTorch: pip install torch (the NumPy functions in "
        "attention_core work without it)."
    ) from err

__all__ = [
    "additive_attention",
    "attend",
    "causal_mask",
    "combine_masks",
    "cosine_attention",
    "dot_product_attention",
    "merge_heads",
    "multi_head_attention",
    "padding_mask",
    "prefix_lm_mask",
    "scaled_dot_product_attention",
    "sliding_window_mask",
    "softmax",
    "split_heads",
    "to_numpy",
    "to_torch",
]

DeviceLike = str | torch.device | None


# --- conversion ---------------------------------------------------------------------------------


def _array_to_tensor(x: object, name: str, device: DeviceLike, dtype: Any = None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x
    else:
        t = torch.from_numpy(np.ascontiguousarray(as_float_array(x, name, allow_empty=True)))
    return t.to(device=device if device is not None else t.device, dtype=dtype or t.dtype)


def to_torch(params_or_array: Any, device: DeviceLike = None, dtype: Any = None) -> Any:
    """Convert arrays, `MultiHeadParams`, `AdditiveParams` or Steps dataclasses to torch.

    Arrays (and nested lists) become tensors, keeping float32/float64 unless `dtype` is given;
    dataclasses come back as the same dataclass holding tensors. `device` defaults to CPU.
    """
    if is_dataclass(params_or_array) and not isinstance(params_or_array, type):
        if isinstance(params_or_array, AdditiveParams):
            # AdditiveParams stores NumPy only; the functions below convert it on the fly.
            raise AttentionInputError(
                "AdditiveParams stay NumPy: pass them as they are to "
                "torch_backend.additive_attention, which moves them to the input's device."
            )
        changes = {}
        for f in fields(params_or_array):
            value = getattr(params_or_array, f.name)
            if isinstance(value, np.ndarray | torch.Tensor):
                changes[f.name] = _array_to_tensor(value, f.name, device, dtype)
            elif is_dataclass(value):
                changes[f.name] = to_torch(value, device, dtype)
        return replace(params_or_array, **changes)
    if isinstance(params_or_array, np.ndarray) and params_or_array.dtype == np.bool_:
        return torch.from_numpy(params_or_array.copy()).to(device)
    return _array_to_tensor(params_or_array, "the array", device, dtype)


def to_numpy(obj: Any) -> Any:
    """Tensors (or dataclasses of tensors) -> NumPy arrays on the CPU, detached from autograd."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().numpy()
    if is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: to_numpy(getattr(obj, f.name))
            for f in fields(obj)
            if isinstance(getattr(obj, f.name), torch.Tensor) or is_dataclass(getattr(obj, f.name))
        }
        return replace(obj, **changes)
    return obj


# --- validation of tensors ----------------------------------------------------------------------


def _tensor(
    x: object, name: str, *, min_ndim: int = 2, allow_neg_inf: bool = False
) -> torch.Tensor:
    """A floating tensor from a tensor (kept on its device) or anything NumPy accepts."""
    if not isinstance(x, torch.Tensor):
        x = torch.from_numpy(np.ascontiguousarray(as_float_array(x, name, min_ndim=min_ndim)))
    if x.is_complex():
        raise AttentionInputError(f"{name} contains complex numbers: use real numbers only.")
    if not x.is_floating_point():
        x = x.to(torch.float64)
    elif x.dtype not in (torch.float32, torch.float64):
        x = x.to(torch.float32)
    if x.ndim < min_ndim:
        raise AttentionInputError(
            f"{name} must have at least {min_ndim} dimension(s), but it has shape {tuple(x.shape)}."
        )
    if x.numel() == 0:
        raise AttentionInputError(f"{name} is empty (shape {tuple(x.shape)}).")
    bad = torch.isnan(x) | (torch.isposinf(x) if allow_neg_inf else torch.isinf(x))
    if bool(bad.any()):
        where = [int(i) for i in torch.nonzero(bad)[0]]
        raise AttentionInputError(
            f"{name} contains {x[tuple(where)].item()} at index {where} (counting from 0): all "
            "entries must be finite numbers."
        )
    return x


def _common(*tensors: torch.Tensor) -> list[torch.Tensor]:
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            raise AttentionInputError(
                f"Inputs live on different devices ({device} and {t.device}): move them to one "
                "device with .to(device)."
            )
    dtype = torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32
    return [t.to(dtype) for t in tensors]


def _mask_tensor(mask: object, target: tuple[int, ...], device: torch.device) -> torch.Tensor:
    if isinstance(mask, torch.Tensor):
        if mask.dtype != torch.bool:
            raise AttentionInputError(
                f"The mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}."
            )
        m = mask
    else:
        m = torch.from_numpy(
            np.ascontiguousarray(_np_masks.combine_masks(mask))  # validates booleans
        )
    try:
        full = torch.broadcast_shapes(m.shape, target)
    except RuntimeError:
        full = None
    if full is None or tuple(full)[-2:] != tuple(target)[-2:] or m.ndim == 0:
        raise AttentionInputError(
            f"The mask has shape {tuple(m.shape)} but the scores have shape {tuple(target)} "
            "(…, query positions, key positions): it must match or broadcast to it."
        )
    return m.to(device)


# --- softmax and masks --------------------------------------------------------------------------


def _stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # Same recipe as the NumPy version: shift by the row max, and give all -inf rows zeros.
    row_max = torch.amax(x, dim=dim, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exps = torch.exp(x - row_max)
    total = exps.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, exps / torch.where(total > 0, total, 1), torch.zeros_like(exps))


def softmax(x: object, axis: int = -1) -> torch.Tensor:
    """Stable softmax along `axis`; an all -inf slice gives zeros (torch.softmax gives NaN)."""
    t = _tensor(x, "the softmax input", min_ndim=1, allow_neg_inf=True)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -t.ndim <= axis < t.ndim:
        raise AttentionInputError(f"axis {axis!r} does not exist for shape {tuple(t.shape)}.")
    return _stable_softmax(t, axis)


def causal_mask(q_len: int, k_len: int | None = None, device: DeviceLike = None) -> torch.Tensor:
    """Bool tensor version of `attention_core.causal_mask` (torch's is_causal convention)."""
    return torch.from_numpy(_np_masks.causal_mask(q_len, k_len)).to(device)


def padding_mask(
    valid_keys: object, q_len: int, k_len: int | None = None, device: DeviceLike = None
) -> torch.Tensor:
    """Bool tensor version of `attention_core.padding_mask`."""
    if isinstance(valid_keys, torch.Tensor):
        valid_keys = valid_keys.detach().cpu().numpy()
    return torch.from_numpy(_np_masks.padding_mask(valid_keys, q_len, k_len)).to(device)


def sliding_window_mask(
    q_len: int, window: int, k_len: int | None = None, device: DeviceLike = None
) -> torch.Tensor:
    """Bool tensor version of `attention_core.sliding_window_mask`."""
    return torch.from_numpy(_np_masks.sliding_window_mask(q_len, window, k_len)).to(device)


def prefix_lm_mask(q_len: int, prefix_len: int, device: DeviceLike = None) -> torch.Tensor:
    """Bool tensor version of `attention_core.prefix_lm_mask`."""
    return torch.from_numpy(_np_masks.prefix_lm_mask(q_len, prefix_len)).to(device)


def combine_masks(*masks: object) -> torch.Tensor | None:
    """Logical AND of boolean tensors with broadcasting; None entries are ignored."""
    present = [m for m in masks if m is not None]
    if not present:
        return None
    tensors = []
    for index, m in enumerate(present):
        if not isinstance(m, torch.Tensor):
            m = torch.from_numpy(np.ascontiguousarray(_np_masks.combine_masks(m)))
        if m.dtype != torch.bool:
            raise AttentionInputError(f"mask {index + 1} must be boolean, got dtype {m.dtype}.")
        tensors.append(m.to(tensors[0].device) if tensors else m)
    try:
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError:
        shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
        raise AttentionInputError(
            f"These masks cannot be combined, their shapes do not match: {shapes}."
        ) from None
    out = torch.ones(shape, dtype=torch.bool, device=tensors[0].device)
    for t in tensors:
        out = out & t
    return out


# --- attention ----------------------------------------------------------------------------------


def _qkv(q: object, k: object, v: object) -> list[torch.Tensor]:
    q = _tensor(q, "Q (queries)")
    k = _tensor(k, "K (keys)")
    v = _tensor(v, "V (values)")
    if k.shape[-2] != v.shape[-2]:
        raise AttentionInputError(
            f"K has {k.shape[-2]} rows but V has {v.shape[-2]}: every key needs exactly one "
            "value, so K and V must have the same number of rows (key positions)."
        )
    broadcast_batch(
        ("Q", tuple(q.shape[:-2])), ("K", tuple(k.shape[:-2])), ("V", tuple(v.shape[:-2]))
    )
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    check_size((*batch, q.shape[-2], k.shape[-2]), "The score matrix")
    return _common(q, k, v)


def _finish(
    scores: torch.Tensor, scaled: torch.Tensor, scale: float, v: torch.Tensor, mask: object
) -> AttentionSteps:
    if mask is None:
        masked = scaled
        fully_masked = torch.zeros(scaled.shape[:-1], dtype=torch.bool, device=scaled.device)
    else:
        allowed = _mask_tensor(mask, tuple(scaled.shape), scaled.device)
        # -inf makes exp() exactly 0, so a blocked key gets exactly zero weight.
        masked = scaled.masked_fill(~allowed, float("-inf"))
        fully_masked = ~torch.broadcast_to(allowed, masked.shape).any(dim=-1)
    if bool(torch.isnan(masked).any() | torch.isposinf(masked).any()):
        raise AttentionInputError(
            "Some attention scores overflowed to infinity: the inputs are too large for "
            f"{scaled.dtype}. Scale Q and K down (or use float64)."
        )
    weights = _stable_softmax(masked, -1)
    output = weights @ v  # (..., q_pos, d_v)
    return AttentionSteps(scores, scaled, masked, weights, output, fully_masked, float(scale))


def scaled_dot_product_attention(
    q: object, k: object, v: object, *, mask: object = None, scale: float | None = None
) -> AttentionSteps:
    """softmax(mask(Q Kᵀ · scale)) V on tensors, scale = 1/√d_k by default.

    See `attention_core.scaled_dot_product_attention`; a fully masked query gets zeros, not NaN.
    """
    q, k, v = _qkv(q, k, v)
    check_same_width(
        q, k, "Q", "K", "queries and keys must have the same width d_k (one dot product each)"
    )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_real(scale, "scale")
    scores = q @ k.transpose(-1, -2)  # (..., q_pos, k_pos)
    return _finish(scores, scores * scale, scale, v, mask)


def dot_product_attention(
    q: object, k: object, v: object, *, mask: object = None
) -> AttentionSteps:
    """Unscaled dot-product attention (scale = 1) on tensors."""
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=1.0)


def cosine_attention(
    q: object, k: object, v: object, *, temperature: float = 0.1, mask: object = None
) -> AttentionSteps:
    """Cosine-similarity attention on tensors: scores = cos(q_i, k_j), scaled = scores / τ."""
    q, k, v = _qkv(q, k, v)
    check_same_width(q, k, "Q", "K", "queries and keys must have the same width to compare them")
    temperature = check_real(temperature, "temperature", positive=True)

    def unit(x: torch.Tensor) -> torch.Tensor:
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        # Zero vectors get a zero unit vector, so their cosine is 0 rather than NaN.
        return torch.where(norm > 0, x / torch.where(norm > 0, norm, 1), torch.zeros_like(x))

    scores = (unit(q) @ unit(k).transpose(-1, -2)).clamp(-1.0, 1.0)
    scale = 1.0 / temperature
    return _finish(scores, scores * scale, scale, v, mask)


def additive_attention(
    q: object, k: object, v: object, *, params: AdditiveParams, mask: object = None
) -> AttentionSteps:
    """Additive (Bahdanau) attention on tensors: scores_ij = vᵀ tanh(W_q q_i + W_k k_j)."""
    if not isinstance(params, AdditiveParams):
        raise AttentionInputError(
            "additive attention needs params=AdditiveParams(...); create them with "
            "init_additive_params(d_k, d_attn, seed)."
        )
    q, k, v = _qkv(q, k, v)
    for x, w, name in ((q, params.w_q, "Q"), (k, params.w_k, "K")):
        if x.shape[-1] != w.shape[1]:
            raise AttentionInputError(
                f"{name} has {x.shape[-1]} columns but W_{name.lower()} expects {w.shape[1]}."
            )
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    check_size((*batch, q.shape[-2], k.shape[-2], params.d_attn), "The additive hidden layer")
    w_q, w_k, vec = (
        torch.as_tensor(a, dtype=q.dtype, device=q.device)
        for a in (params.w_q, params.w_k, params.v)
    )
    hidden = torch.tanh((q @ w_q.T).unsqueeze(-2) + (k @ w_k.T).unsqueeze(-3))
    scores = hidden @ vec  # (..., q_pos, k_pos)
    return _finish(scores, scores, 1.0, v, mask)


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
    """Tensor version of `attention_core.attend` (dispatch on the scoring function's name)."""
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


# --- multi-head ---------------------------------------------------------------------------------


def _check_heads(d_model: int, num_heads: object) -> int:
    h = check_int(num_heads, "num_heads", minimum=1)
    if d_model % h:
        raise AttentionInputError(
            f"num_heads={h} does not divide d_model={d_model}: each head gets d_model/num_heads "
            "features."
        )
    return h


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """`(..., pos, d_model)` -> `(..., head, pos, d_head)` (a view, no copy)."""
    x = _tensor(x, "x")
    h = _check_heads(x.shape[-1], num_heads)
    return x.unflatten(-1, (h, x.shape[-1] // h)).transpose(-2, -3)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """`(..., head, pos, d_head)` -> `(..., pos, head·d_head)`."""
    x = _tensor(x, "x", min_ndim=3)
    return x.transpose(-2, -3).flatten(-2)


def multi_head_attention(
    x_q: object,
    x_kv: object = None,
    *,
    params: MultiHeadParams,
    num_heads: int,
    mask: object = None,
) -> MultiHeadSteps:
    """Tensor version of `attention_core.multi_head_attention`.

    Parameters may hold NumPy arrays or tensors; they are moved to the device and dtype of x_q.
    """
    if not isinstance(params, MultiHeadParams):
        raise AttentionInputError(
            "params must be MultiHeadParams; create them with "
            "init_multi_head_params(d_model, num_heads, seed)."
        )
    x_q = _tensor(x_q, "x_q (query input)")
    x_kv = x_q if x_kv is None else _tensor(x_kv, "x_kv (key/value input)")
    x_q, x_kv = _common(x_q, x_kv)
    d_model = params.d_model
    for x, name in ((x_q, "x_q"), (x_kv, "x_kv")):
        if x.shape[-1] != d_model:
            raise AttentionInputError(
                f"{name} has {x.shape[-1]} features per token but the parameters expect "
                f"d_model={d_model}."
            )
    h = _check_heads(d_model, num_heads)
    broadcast_batch(("x_q", tuple(x_q.shape[:-2])), ("x_kv", tuple(x_kv.shape[:-2])))
    batch = torch.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
    check_size((*batch, h, x_q.shape[-2], x_kv.shape[-2]), "The attention pattern")
    p = {
        f.name: torch.as_tensor(getattr(params, f.name), dtype=x_q.dtype, device=x_q.device)
        for f in fields(params)
    }
    q = x_q @ p["w_q"].T + p["b_q"]  # (..., q_pos, d_model)
    k = x_kv @ p["w_k"].T + p["b_k"]  # (..., k_pos, d_model)
    v = x_kv @ p["w_v"].T + p["b_v"]  # (..., k_pos, d_model)
    q_heads, k_heads, v_heads = (split_heads(t, h) for t in (q, k, v))
    attention = scaled_dot_product_attention(q_heads, k_heads, v_heads, mask=mask)
    concat = merge_heads(attention.output)  # (..., q_pos, d_model)
    output = concat @ p["w_o"].T + p["b_o"]  # (..., q_pos, d_model)
    return MultiHeadSteps(x_q, x_kv, q, k, v, q_heads, k_heads, v_heads, attention, concat, output)
