"""A llama checkpoint's weights, named and shaped as ``LlamaForCausalLM``'s, kept read-only.

Weights are stored bfloat16 (257 MiB instead of 513; the format SmolLM2 was published in) and
every product is computed in float32: a matrix is widened (a 16-bit shift) just before it is
used. ``load_llama(weights_dtype=np.float32)`` keeps float32 weights instead, trading memory for
speed (no widening per step); bench/bench_decoder.py measures both. The offline package's file is
llama.cpp's 4-bit Q4_1 (8-bit Q8_0 embedding), so those are the numbers a page shows, and
``LlamaModel.saved_as`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checkpoint import TensorPicker, read_only
from ..loading import number_format
from .config import LlamaConfig
from .files import BFLOAT16, to_storage, widen

__all__ = ["LlamaLayerWeights", "LlamaWeights"]


@dataclass(frozen=True, eq=False)
class LlamaLayerWeights:
    """One decoder layer, nn.Linear layout (``y = x @ W.T + b``), matrices as stored
    (``files.to_storage``: bfloat16 bits, float16 or float32).

    attn_norm, ffn_norm  `(d_model,)` float32 RMSNorm gains γ before attention and before the
               MLP; None where the family norms after each block only (OLMo 2)
    w_qkv      `(H·d_head + 2·KV·d_head, d_model)`  W_q, W_k, W_v stacked: one product, not three
    b_qkv      `(H·d_head + 2·KV·d_head,)` float32  b_q, b_k, b_v stacked (Qwen2); None: no biases
    w_o        `(d_model, H·d_head)`
    w_gate_up  `(2·d_ff, d_model)`  W_gate over W_up: one product, not two
    w_down     `(d_model, d_ff)`
    q_norm, k_norm  float32 QK-norm gains, `(d_head,)` per head (Qwen3, Gemma 3) or `(H·d_head,)`
               and `(KV·d_head,)` over the projection (OLMo 2); None without QK-norm
    post_attn_norm, post_ffn_norm  `(d_model,)` float32 gains of the norms after attention and
               after the MLP (Gemma, OLMo 2); None where there are none
    The single matrices (w_q ... w_up) are views into the stacked ones; float32 ones are kept
    column-major (same shapes, a faster product). Every gain is γ itself: Gemma's stored γ − 1
    has its 1 added back when read.
    """

    attn_norm: np.ndarray | None
    w_qkv: np.ndarray
    w_o: np.ndarray
    ffn_norm: np.ndarray | None
    w_gate_up: np.ndarray
    w_down: np.ndarray
    b_qkv: np.ndarray | None = None
    q_norm: np.ndarray | None = None
    k_norm: np.ndarray | None = None
    post_attn_norm: np.ndarray | None = None
    post_ffn_norm: np.ndarray | None = None
    b_o = None  # W_o has no bias (Llama, Qwen2): the heads' writes are all attention adds

    @property
    def w_q(self) -> np.ndarray:
        return self.w_qkv[: self.w_o.shape[1]]

    @property
    def w_k(self) -> np.ndarray:
        q_rows, kv_rows = self.w_o.shape[1], (self.w_qkv.shape[0] - self.w_o.shape[1]) // 2
        return self.w_qkv[q_rows : q_rows + kv_rows]

    @property
    def w_v(self) -> np.ndarray:
        return self.w_qkv[self.w_o.shape[1] + self.w_k.shape[0] :]

    @property
    def w_gate(self) -> np.ndarray:
        return self.w_gate_up[: self.w_down.shape[1]]

    @property
    def w_up(self) -> np.ndarray:
        return self.w_gate_up[self.w_down.shape[1] :]


@dataclass(frozen=True, eq=False)
class LlamaWeights:
    """embed `(vocab, d_model)`, layers, final_norm `(d_model,)`, lm_head (None when tied)."""

    embed: np.ndarray
    layers: tuple[LlamaLayerWeights, ...]
    final_norm: np.ndarray
    lm_head: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        arrays = [self.embed, self.final_norm, self.lm_head]
        arrays += [getattr(layer, f) for layer in self.layers for f in layer.__dataclass_fields__]
        return sum(a.nbytes for a in arrays if a is not None)

    @property
    def unembedding(self) -> np.ndarray:
        """`(vocab, d_model)` what the head reads the final stream with: lm_head, or the
        embedding read backwards when the two are tied."""
        return self.lm_head if self.lm_head is not None else self.embed

    @property
    def storage(self) -> str:
        """How the matrices are stored: "bfloat16", "float16" or "float32"."""
        return number_format(self.embed)

    @classmethod
    def from_state_dict(
        cls,
        state: dict[str, np.ndarray],
        config: LlamaConfig,
        dtype: np.dtype | type | str = BFLOAT16,
        source: str = "the model file",
    ) -> LlamaWeights:
        """Pick the tensors named like ``LlamaForCausalLM``'s (or ``Qwen2ForCausalLM``'s)
        state dict; matrices stored as ``dtype`` (already stored ones are kept), norms and
        biases as float32, all read-only. A uint16 tensor is bfloat16 bits (``read_weights``).
        The q, k, v biases are read when ``config.qkv_bias``; ``lm_head`` when the head is not
        tied (and, when the config does not say, if the file has one). Missing or mis-shaped
        tensors raise ModelFileError."""
        d, h, kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
        dh, ff = config.head_dim, config.intermediate_size
        stored = np.uint16 if dtype == BFLOAT16 else np.dtype(dtype)
        state, model, head_name = _text_part(state)
        picker = TensorPicker(state, source)

        def take(name: str, shape: tuple[int, ...], optional: bool = False) -> Any:
            arr = picker.stored(name, shape, optional=optional)
            if arr is None:
                return None
            if len(shape) == 1:
                return read_only(np.ascontiguousarray(widen(arr), dtype=np.float32))
            return read_only(arr if arr.dtype == stored else to_storage(widen(arr), dtype))

        def gain(name: str, width: int = d) -> np.ndarray:
            # Gemma's norms multiply by (1 + w): the gain γ is the stored w plus one.
            g = take(name, (width,))
            if g is None or not config.gain_offset:
                return g
            return read_only(g + np.float32(config.gain_offset))

        qk = {"head": (dh, dh), "projection": (h * dh, kv * dh)}.get(config.qk_norm)
        pre, post = config.norms in ("pre", "sandwich"), config.norms in ("sandwich", "post")
        # Each norm's name: Gemma's post_attention_layernorm follows attention, llama's is the
        # MLP's pre-norm.
        ffn_pre = "pre_feedforward_layernorm" if config.norms == "sandwich" else (
            "post_attention_layernorm")  # fmt: skip

        def stack(*parts: Any) -> Any:
            return None if any(p is None for p in parts) else read_only(np.concatenate(parts))

        def for_products(w: Any) -> Any:
            # y = x Wᵀ reads Wᵀ: a float32 W kept column-major makes Wᵀ contiguous, the layout
            # OpenBLAS multiplies fastest.
            # A bfloat16 W stays row-major: linear widens it a block of rows at a time.
            if w is None or w.dtype != np.float32:
                return w
            return read_only(np.asfortranarray(w))

        def layer(p: str) -> LlamaLayerWeights:  # p = "model.layers.{i}"
            return LlamaLayerWeights(
                attn_norm=gain(f"{p}.input_layernorm.weight") if pre else None,
                w_qkv=for_products(
                    stack(
                        take(f"{p}.self_attn.q_proj.weight", (h * dh, d)),
                        take(f"{p}.self_attn.k_proj.weight", (kv * dh, d)),
                        take(f"{p}.self_attn.v_proj.weight", (kv * dh, d)),
                    )
                ),
                w_o=for_products(take(f"{p}.self_attn.o_proj.weight", (d, h * dh))),
                ffn_norm=gain(f"{p}.{ffn_pre}.weight") if pre else None,
                w_gate_up=for_products(
                    stack(
                        take(f"{p}.mlp.gate_proj.weight", (ff, d)),
                        take(f"{p}.mlp.up_proj.weight", (ff, d)),
                    )
                ),
                w_down=for_products(take(f"{p}.mlp.down_proj.weight", (d, ff))),
                b_qkv=stack(
                    take(f"{p}.self_attn.q_proj.bias", (h * dh,)),
                    take(f"{p}.self_attn.k_proj.bias", (kv * dh,)),
                    take(f"{p}.self_attn.v_proj.bias", (kv * dh,)),
                )
                if config.qkv_bias
                else None,
                q_norm=None if qk is None else gain(f"{p}.self_attn.q_norm.weight", qk[0]),
                k_norm=None if qk is None else gain(f"{p}.self_attn.k_norm.weight", qk[1]),
                post_attn_norm=gain(f"{p}.post_attention_layernorm.weight") if post else None,
                post_ffn_norm=gain(f"{p}.post_feedforward_layernorm.weight") if post else None,
            )

        weights = cls(
            embed=take(f"{model}.embed_tokens.weight", (config.vocab_size, d)),
            layers=picker.layers(f"{model}.layers", config.num_hidden_layers, layer),
            final_norm=gain(f"{model}.norm.weight"),
            lm_head=None
            if config.tie_word_embeddings
            else take(
                head_name,
                (config.vocab_size, d),
                optional=config.tie_word_embeddings is None,
            ),
        )
        picker.check()
        return weights


# Where a checkpoint with a vision tower keeps its text part (Gemma 3): transformers 5's
# names, then 4's; a text-only checkpoint's are the first.
_TEXT_PARTS = (
    ("model", "lm_head.weight"),
    ("model.language_model", "lm_head.weight"),
    ("language_model.model", "language_model.lm_head.weight"),
)


def _text_part(state: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str, str]:
    """(state, the prefix of its decoder's tensors, its output head's name): the text part
    of a checkpoint that also holds a vision tower, whose tensors are left unread."""
    for model, head in _TEXT_PARTS:
        if f"{model}.embed_tokens.weight" in state:
            if model == "model":
                return state, model, head
            keep = (f"{model}.", head)
            return {k: v for k, v in state.items() if k.startswith(keep)}, model, head
    return state, "model", "lm_head.weight"
