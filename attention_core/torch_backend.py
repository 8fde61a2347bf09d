"""What only torch needs: moving arrays and parameters to tensors, and masks made on a device.

The attention math itself is not here: every function of `attention_core` (softmax, the
attention variants, multi-head, rotary embeddings, `combine_masks`) runs on torch tensors as it
is, written once against the array API. Given tensors, it computes on their device (CPU or
CUDA), returns the same Steps dataclasses holding tensors, and gradients flow through every
step. Those functions are re-exported below, so `torch_backend.scaled_dot_product_attention` and
`attention_core.scaled_dot_product_attention` are the same function.

This module imports torch; `import attention_core` does not.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

import numpy as np

from . import masks as _masks
from .attention import (
    AdditiveParams,
    additive_attention,
    attend,
    cosine_attention,
    dot_product_attention,
    scaled_dot_product_attention,
)
from .masks import combine_masks
from .multihead import merge_heads, multi_head_attention, split_heads
from .softmax import softmax
from .validation import AttentionInputError, as_float_array

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
            # AdditiveParams stores NumPy only; additive_attention moves them on the fly.
            raise AttentionInputError(
                "AdditiveParams stay NumPy: pass them as they are to additive_attention, which "
                "moves them to the input's device."
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


# --- masks on a device --------------------------------------------------------------------------
# The mask builders take sizes, not arrays, so they cannot see a device: these put the same
# boolean masks on the one asked for.


def causal_mask(q_len: int, k_len: int | None = None, device: DeviceLike = None) -> torch.Tensor:
    """`attention_core.causal_mask` as a bool tensor on `device` (torch's is_causal convention)."""
    return torch.from_numpy(_masks.causal_mask(q_len, k_len)).to(device)


def padding_mask(
    valid_keys: object, q_len: int, k_len: int | None = None, device: DeviceLike = None
) -> torch.Tensor:
    """`attention_core.padding_mask` as a bool tensor on `device`; valid_keys may be a tensor."""
    if isinstance(valid_keys, torch.Tensor):
        valid_keys = valid_keys.detach().cpu().numpy()
    return torch.from_numpy(_masks.padding_mask(valid_keys, q_len, k_len)).to(device)


def sliding_window_mask(
    q_len: int, window: int, k_len: int | None = None, device: DeviceLike = None
) -> torch.Tensor:
    """`attention_core.sliding_window_mask` as a bool tensor on `device`."""
    return torch.from_numpy(_masks.sliding_window_mask(q_len, window, k_len)).to(device)


def prefix_lm_mask(q_len: int, prefix_len: int, device: DeviceLike = None) -> torch.Tensor:
    """`attention_core.prefix_lm_mask` as a bool tensor on `device`."""
    return torch.from_numpy(_masks.prefix_lm_mask(q_len, prefix_len)).to(device)
