"""`torch.nn.MultiheadAttention` run on our parameters: the independent check of multi-head.

`torch_multi_head_reference` loads `MultiHeadParams` (already in torch's `nn.Linear` layout) into
`nn.MultiheadAttention` and returns what torch computes, as NumPy arrays; `compare_with_torch`
measures how far our NumPy `MultiHeadSteps` are from it. torch is imported inside the functions,
so `import attention_core` stays NumPy-only; without torch they raise `TorchNotInstalledError`,
whose message says how to install it.

`token_embeddings` gives the multi-head page its inputs: a seeded random vector per token.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .multihead import MultiHeadParams, MultiHeadSteps, check_widths, split_heads
from .validation import AttentionInputError, as_mask, as_matrix, check_int, check_size

__all__ = [
    "TORCH_INSTALL_COMMAND",
    "TorchComparison",
    "TorchNotInstalledError",
    "TorchReference",
    "compare_with_torch",
    "token_embeddings",
    "torch_multi_head_reference",
]

TORCH_INSTALL_COMMAND = "pip install torch==2.13.0"
_DTYPES = ("float32", "float64")


class TorchNotInstalledError(ImportError):
    """torch is not installed; the message says how to install it."""

    def __init__(self) -> None:
        super().__init__(
            "PyTorch is not installed, so the comparison with torch.nn.MultiheadAttention "
            f"cannot run. Install it with `{TORCH_INSTALL_COMMAND}` and restart the app; "
            "everything else works without it."
        )


@dataclass(frozen=True, eq=False)
class TorchReference:
    """What `torch.nn.MultiheadAttention` computed, as NumPy arrays.

    output   `(..., q_pos, d_model)`
    weights  `(..., head, q_pos, k_pos)`  per head (`average_attn_weights=False`)
    dtype    "float32" or "float64", the torch dtype it ran in
    torch_version  `torch.__version__`
    """

    output: np.ndarray
    weights: np.ndarray
    dtype: str
    torch_version: str


@dataclass(frozen=True)
class TorchComparison:
    """Largest absolute differences between our steps and torch's, over every element."""

    output_difference: float
    weights_difference: float
    dtype: str
    torch_version: str

    @property
    def largest(self) -> float:
        return max(self.output_difference, self.weights_difference)


def token_embeddings(tokens: Sequence[str], d_model: int, seed: int = 0) -> np.ndarray:
    """Untrained embeddings `(tokens, d_model)`: one N(0, 1) vector per distinct token.

    Token t's vector comes from a generator seeded by (seed, crc32(t)), so a repeated token gets
    the same vector and a token keeps its vector when the sentence around it changes (the same
    rule as `examples.sentence_example`, so a word looks the same on every page).
    """
    tokens = [str(t) for t in tokens]
    if not tokens:
        raise AttentionInputError("There are no tokens: type a few words separated by spaces.")
    d_model = check_int(d_model, "d_model", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    check_size((len(tokens), d_model), "The embeddings")
    # crc32 (unlike hash()) is the same in every Python process, so links stay reproducible.
    return np.stack(
        [
            np.random.default_rng([seed, zlib.crc32(t.encode())]).standard_normal(d_model)
            for t in tokens
        ]
    )


def _import_torch():
    try:
        import torch
    except ImportError:
        raise TorchNotInstalledError() from None
    return torch


def torch_multi_head_reference(
    x_q: object,
    x_kv: object,
    params: MultiHeadParams,
    num_heads: int,
    mask: object = None,
    *,
    dtype: str = "float32",
) -> TorchReference:
    """Run `torch.nn.MultiheadAttention(batch_first=True)` with `params` loaded into it.

    in_proj_weight = [W_Q; W_K; W_V],  in_proj_bias = [b_Q; b_K; b_V],
    out_proj.weight = W_O,  out_proj.bias = b_O,   dropout 0, eval mode.

    x_q `(q_pos, d_model)` or `(batch, q_pos, d_model)`; x_kv likewise with k_pos (None means
    self-attention). `mask` is ours (boolean, True = may attend) `(q_pos, k_pos)`; torch's boolean
    `attn_mask` means the opposite (True = blocked), so it is inverted on the way in. A query
    with no key to attend to gives NaN in torch (and zeros in attention_core).
    """
    torch = _import_torch()
    if dtype not in _DTYPES:
        raise AttentionInputError(f"dtype must be one of {_DTYPES}, got {dtype!r}.")
    if not isinstance(params, MultiHeadParams) or not isinstance(params.w_q, np.ndarray):
        raise AttentionInputError(
            "params must be MultiHeadParams holding NumPy arrays; create them with "
            "init_multi_head_params(d_model, num_heads, seed)."
        )
    x_q = as_matrix(x_q, "x_q (query input)")
    x_kv = x_q if x_kv is None else as_matrix(x_kv, "x_kv (key/value input)")
    if x_q.ndim > 3 or x_kv.ndim > 3:
        raise AttentionInputError(
            "nn.MultiheadAttention takes (pos, d_model) or (batch, pos, d_model) inputs; "
            f"got x_q {x_q.shape} and x_kv {x_kv.shape}."
        )
    d_model = params.d_model
    check_widths(x_q, x_kv, d_model)
    # split_heads checks that num_heads divides d_model, with the learner's message.
    split_heads(np.zeros((1, d_model)), num_heads)
    unbatched = x_q.ndim == 2 and x_kv.ndim == 2
    xq = x_q[None] if x_q.ndim == 2 else x_q
    xkv = x_kv[None] if x_kv.ndim == 2 else x_kv
    if xq.shape[0] != xkv.shape[0]:
        if 1 not in (xq.shape[0], xkv.shape[0]):
            raise AttentionInputError(
                f"x_q has batch size {xq.shape[0]} and x_kv {xkv.shape[0]}: they must match."
            )
        batch = max(xq.shape[0], xkv.shape[0])
        xq = np.broadcast_to(xq, (batch, *xq.shape[1:]))
        xkv = np.broadcast_to(xkv, (batch, *xkv.shape[1:]))
    attn_mask = None
    if mask is not None:
        grid = (xq.shape[-2], xkv.shape[-2])
        allowed = np.broadcast_to(as_mask(mask, "mask", grid), grid)
        attn_mask = torch.from_numpy(~allowed)  # torch: True = not allowed

    torch_dtype = getattr(torch, dtype)
    module = torch.nn.MultiheadAttention(
        d_model, num_heads, dropout=0.0, bias=True, batch_first=True, dtype=torch_dtype
    ).eval()

    def tensor(array: np.ndarray):
        return torch.tensor(np.ascontiguousarray(array), dtype=torch_dtype)

    with torch.no_grad():
        module.in_proj_weight.copy_(tensor(np.concatenate([params.w_q, params.w_k, params.w_v])))
        module.in_proj_bias.copy_(tensor(np.concatenate([params.b_q, params.b_k, params.b_v])))
        module.out_proj.weight.copy_(tensor(params.w_o))
        module.out_proj.bias.copy_(tensor(params.b_o))
        kv = tensor(xkv)
        output, weights = module(
            tensor(xq),
            kv,
            kv,
            attn_mask=attn_mask,
            need_weights=True,
            average_attn_weights=False,
        )
    output, weights = output.numpy(), weights.numpy()  # (batch, q_pos, d), (batch, h, q, k)
    if unbatched:
        output, weights = output[0], weights[0]
    return TorchReference(output, weights, dtype, str(torch.__version__))


def compare_with_torch(
    steps: MultiHeadSteps,
    params: MultiHeadParams,
    num_heads: int,
    mask: object = None,
    *,
    dtype: str = "float32",
) -> TorchComparison:
    """Largest |ours - torch| of the output and of the per-head weights, for the same inputs.

    Queries that may attend to nothing are left out: torch gives NaN there, attention_core 0.
    """
    if not isinstance(steps, MultiHeadSteps):
        raise AttentionInputError("steps must be the MultiHeadSteps of multi_head_attention.")
    steps_heads = int(np.shape(steps.q_heads)[-3])
    if steps_heads != num_heads:
        raise AttentionInputError(
            f"The steps were computed with {steps_heads} heads but num_heads={num_heads}: "
            "compare with the same number of heads."
        )
    self_attention = steps.x_kv is steps.x_q
    ref = torch_multi_head_reference(
        steps.x_q, None if self_attention else steps.x_kv, params, num_heads, mask, dtype=dtype
    )
    ours_weights = np.asarray(steps.attention.weights, dtype=np.float64)
    ours_output = np.asarray(steps.output, dtype=np.float64)
    answered = ~np.asarray(steps.attention.fully_masked)  # (..., head, q_pos)
    weight_rows = np.broadcast_to(answered[..., None], ours_weights.shape)
    output_rows = np.broadcast_to(answered.any(axis=-2)[..., None], ours_output.shape)
    ours_weights = np.broadcast_to(ours_weights, ref.weights.shape)
    ours_output = np.broadcast_to(ours_output, ref.output.shape)

    def largest(ours: np.ndarray, theirs: np.ndarray, keep: np.ndarray) -> float:
        keep = np.broadcast_to(keep, ours.shape)
        if not keep.any():
            return 0.0
        return float(np.max(np.abs(ours[keep] - theirs.astype(np.float64)[keep])))

    return TorchComparison(
        output_difference=largest(ours_output, ref.output, output_rows),
        weights_difference=largest(ours_weights, ref.weights, weight_rows),
        dtype=dtype,
        torch_version=ref.torch_version,
    )
