"""A llama checkpoint's weights, named and shaped as ``LlamaForCausalLM``'s, kept read-only.

Weights are stored bfloat16 (257 MiB instead of 513; the format SmolLM2 was published in) and
every product is computed in float32: a matrix is widened (a 16-bit shift) just before it is
used. ``load_llama(weights_dtype=np.float32)`` keeps float32 weights instead, trading memory for
speed (no widening per step); bench/README.md measures both. The offline package's file is
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

    attn_norm, ffn_norm  `(d_model,)` float32 RMSNorm gains γ
    w_qkv      `(H·d_head + 2·KV·d_head, d_model)`  W_q, W_k, W_v stacked: one product, not three
    b_qkv      `(H·d_head + 2·KV·d_head,)` float32  b_q, b_k, b_v stacked (Qwen2); None: no biases
    w_o        `(d_model, H·d_head)`
    w_gate_up  `(2·d_ff, d_model)`  W_gate over W_up: one product, not two
    w_down     `(d_model, d_ff)`
    The single matrices (w_q ... w_up) are views into the stacked ones; float32 ones are kept
    column-major (same shapes, a faster product).
    """

    attn_norm: np.ndarray
    w_qkv: np.ndarray
    w_o: np.ndarray
    ffn_norm: np.ndarray
    w_gate_up: np.ndarray
    w_down: np.ndarray
    b_qkv: np.ndarray | None = None
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
        picker = TensorPicker(state, source)

        def take(name: str, shape: tuple[int, ...], optional: bool = False) -> Any:
            arr = picker.stored(name, shape, optional=optional)
            if arr is None:
                return None
            if len(shape) == 1:
                return read_only(np.ascontiguousarray(widen(arr), dtype=np.float32))
            return read_only(arr if arr.dtype == stored else to_storage(widen(arr), dtype))

        def stack(*parts: Any) -> Any:
            return None if any(p is None for p in parts) else read_only(np.concatenate(parts))

        def for_products(w: Any) -> Any:
            # y = x Wᵀ reads Wᵀ: a float32 W kept column-major makes Wᵀ contiguous, the layout
            # OpenBLAS multiplies fastest (bench/README.md, *The decoder LLM*).
            # A bfloat16 W stays row-major: _linear widens it a block of rows at a time.
            if w is None or w.dtype != np.float32:
                return w
            return read_only(np.asfortranarray(w))

        def layer(p: str) -> LlamaLayerWeights:  # p = "model.layers.{i}"
            return LlamaLayerWeights(
                attn_norm=take(f"{p}.input_layernorm.weight", (d,)),
                w_qkv=for_products(
                    stack(
                        take(f"{p}.self_attn.q_proj.weight", (h * dh, d)),
                        take(f"{p}.self_attn.k_proj.weight", (kv * dh, d)),
                        take(f"{p}.self_attn.v_proj.weight", (kv * dh, d)),
                    )
                ),
                w_o=for_products(take(f"{p}.self_attn.o_proj.weight", (d, h * dh))),
                ffn_norm=take(f"{p}.post_attention_layernorm.weight", (d,)),
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
            )

        weights = cls(
            embed=take("model.embed_tokens.weight", (config.vocab_size, d)),
            layers=picker.layers("model.layers", config.num_hidden_layers, layer),
            final_norm=take("model.norm.weight", (d,)),
            lm_head=None
            if config.tie_word_embeddings
            else take(
                "lm_head.weight",
                (config.vocab_size, d),
                optional=config.tie_word_embeddings is None,
            ),
        )
        picker.check()
        return weights
