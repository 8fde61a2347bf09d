"""What the forward pass returns: the KV cache it grows, every layer's steps, the trace.

LlamaCache       one ``decoding.KVCache`` per layer, immutable: a pass returns a new one
LlamaLayerSteps  every intermediate of one decoder layer, in the order they happen
KeptSteps        the steps of a layer that ``run_llama(keep=...)`` kept (every family's)
LlamaTrace       a pass over n new tokens: embeddings, layers, final stream, logits, cache;
                 ``trace.point(name)`` reads a named point (``attention_core.models.points``)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.attention import AttentionSteps
from attention_core.decoding import DecoderCache

from ..passes import KeptSteps
from ..trace import DecoderTrace

__all__ = ["KeptSteps", "LlamaCache", "LlamaLayerSteps", "LlamaTrace"]


@dataclass(frozen=True, eq=False)
class LlamaCache(DecoderCache):
    """The KV cache: one ``decoding.KVCache`` per layer, keys and values `(kv_head, 1, pos,
    d_head)` (the 1 broadcasts over the query heads of a group). Immutable: ``append`` in the
    forward pass returns a new cache, so a page can keep the old one.

    ``bytes_used`` counts K and V of every layer; ``mha_bytes`` is what the same cache would take
    if every query head had its own K and V (multi-head attention): H/KV times more.
    ``bytes_reserved`` is what is allocated: each layer's rows sit in a buffer with room to grow
    (up to twice ``bytes_used``), shared with the caches of earlier steps, so a step writes only
    its new K and V rows instead of copying the whole cache.
    """

    num_query_heads: int

    @property
    def mha_bytes(self) -> int:
        return self.bytes_used * self.num_query_heads // self.num_kv_heads


@dataclass(frozen=True, eq=False)
class LlamaLayerSteps:
    """Every intermediate of one decoder layer for `n` new positions; k_pos = cache + n.

    input           `(n, d_model)`            residual stream entering the layer
    attn_norm       `(n, d_model)`            RMSNorm(input)
    q               `(head, n, d_head)`       queries before RoPE
    k, v            `(kv_head, n, d_head)`    new keys (before RoPE) and values
    q_normed, k_normed   same shapes, after QK-norm (Qwen3, Gemma 3, OLMo 2), or None
    q_rot, k_rot    same shapes, after RoPE (a NoPE layer's: the same as before it)
    attention       ``AttentionSteps`` shaped `(kv_head, group, n, k_pos)`: scores, scaled,
                    masked, weights, output `(kv_head, group, n, d_head)`
    attn_output     `(n, d_model)`            concat(heads) W_oᵀ
    ffn_output      `(n, d_model)`            SwiGLU feed-forward output
    hidden          `(n, d_model)`            the layer's output (after both residuals)
    edited_heads    `(head, n, d_head)` or None   the heads' outputs as an edit of
                    layer.{l}.heads replaced them (None: not edited)

    With ``run_llama(edits=...)`` each of the layer's points holds what the pass went on
    with: attn_output, ffn_output and hidden as edited, ``head_outputs`` the edited heads,
    while ``attention`` keeps the softmax steps as computed.
    """

    input: np.ndarray
    attn_norm: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_rot: np.ndarray
    k_rot: np.ndarray
    attention: AttentionSteps
    attn_output: np.ndarray
    ffn_output: np.ndarray
    hidden: np.ndarray
    edited_heads: np.ndarray | None = None
    q_normed: np.ndarray | None = None
    k_normed: np.ndarray | None = None

    def _heads(self, x: np.ndarray) -> np.ndarray:
        # (..., kv_head, group, n, k) -> (..., head, n, k): head h = kv_head·group + g, as in
        # transformers; a started pass's batch axis (run_llama's start) stays in front.
        return x.reshape(*x.shape[:-4], -1, *x.shape[-2:])

    @property
    def weights(self) -> np.ndarray:
        """`(head, n, k_pos)` softmax weights (transformers' ``output_attentions``)."""
        return self._heads(self.attention.weights)

    @property
    def scores(self) -> np.ndarray:
        """`(head, n, k_pos)` scaled scores q·k/√d_head before the mask (after the soft cap,
        where the family caps them)."""
        return self._heads(self.attention.scaled)

    @property
    def head_outputs(self) -> np.ndarray:
        """`(head, n, d_head)` each head's weighted sum of values, as W_o read it (after an
        edit of the heads)."""
        if self.edited_heads is not None:
            return self.edited_heads
        return self._heads(self.attention.output)


@dataclass(frozen=True, eq=False)
class LlamaTrace(DecoderTrace):
    """A forward pass over `n` new tokens, every step kept.

    input_ids `(n,)`, positions `(n,)` (cache length + 0..n-1), embeddings `(n, d_model)` (the
    stream entering layer 0: resid.0, as edited),
    layers (one ``LlamaLayerSteps`` each, or ``KeptSteps`` with ``run_llama(keep=…)``),
    final_hidden `(n, d_model)` (after the last RMSNorm),
    logits `(n_logits, vocab)` for the last position (or all, with ``all_logits=True``), and the
    ``cache`` after this pass (holding every position so far).
    """

    input_ids: np.ndarray
    positions: np.ndarray
    embeddings: np.ndarray
    layers: tuple[LlamaLayerSteps | KeptSteps, ...]
    final_hidden: np.ndarray
    logits: np.ndarray
    cache: LlamaCache
