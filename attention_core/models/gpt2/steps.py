"""What GPT-2's forward pass returns: the KV cache it grows, every block's steps, the trace.

GPT2Cache        one ``decoding.KVCache`` per layer, immutable: a pass returns a new one
GPT2LayerSteps   every intermediate of one block, in the order they happen
GPT2Trace        a pass over n new tokens: embeddings, layers, final stream, logits, cache;
                 ``trace.point(name)`` reads a named point (``attention_core.models.points``)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.attention import AttentionSteps
from attention_core.decoding import DecoderCache

from ..passes import KeptSteps
from ..trace import DecoderTrace

__all__ = ["GPT2Cache", "GPT2LayerSteps", "GPT2Trace"]


@dataclass(frozen=True, eq=False)
class GPT2Cache(DecoderCache):
    """The KV cache: one ``decoding.KVCache`` per layer, keys and values `(head, pos, d_head)`.
    Immutable: a pass returns a new cache, so a page can keep the old one. Every query head has
    its own keys and values, so ``mha_bytes`` (what multi-head attention keeps) is
    ``bytes_used``."""

    @property
    def mha_bytes(self) -> int:
        return self.bytes_used


@dataclass(frozen=True, eq=False)
class GPT2LayerSteps:
    """Every intermediate of one GPT-2 block for `n` new positions; k_pos = cache + n.

    input        `(n, d_model)`         residual stream entering the block
    attn_norm    `(n, d_model)`         ln_1(input)
    q, k, v      `(head, n, d_head)`    queries, new keys and values (no rotation: positions
                                        entered with the embeddings)
    attention    ``AttentionSteps`` shaped `(head, n, k_pos)`: scores, scaled, masked,
                 weights, output `(head, n, d_head)`
    head_outputs `(head, n, d_head)`    each head's output as W_o read it (after an edit)
    attn_output  `(n, d_model)`         concat(heads) W_oᵀ + b_o
    ffn_norm     `(n, d_model)`         ln_2(input + attn_output)
    ffn_hidden   `(n, d_ff)`            GELU(ffn_norm W_fcᵀ + b_fc), the MLP's neurons
    ffn_output   `(n, d_model)`         ffn_hidden W_projᵀ + b_proj
    hidden       `(n, d_model)`         the block's output (after both residuals)

    With ``run_gpt2(edits=...)`` each point holds what the pass went on with; ``attention``
    keeps the softmax steps as computed, before an edit of the heads.
    """

    input: np.ndarray
    attn_norm: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    attention: AttentionSteps
    head_outputs: np.ndarray
    attn_output: np.ndarray
    ffn_norm: np.ndarray
    ffn_hidden: np.ndarray
    ffn_output: np.ndarray
    hidden: np.ndarray

    @property
    def weights(self) -> np.ndarray:
        """`(head, n, k_pos)` softmax weights (transformers' ``output_attentions``)."""
        return self.attention.weights

    @property
    def scores(self) -> np.ndarray:
        """`(head, n, k_pos)` scaled scores q·k/√d_head before the mask."""
        return self.attention.scaled


@dataclass(frozen=True, eq=False)
class GPT2Trace(DecoderTrace):
    """A forward pass over `n` new tokens, every step kept.

    input_ids `(n,)`, positions `(n,)` (cache length + 0..n-1),
    token_embeddings `(n, d_model)` (wte rows), position_embeddings `(n, d_model)` (wpe rows),
    embeddings `(n, d_model)` their sum, the stream entering block 0 (resid.0, as edited),
    layers (one ``GPT2LayerSteps`` each), final_hidden `(n, d_model)` (after ln_f),
    logits `(n_logits, vocab)` for the last position (or all, with ``all_logits=True``), and the
    ``cache`` after this pass (holding every position so far).
    """

    input_ids: np.ndarray
    positions: np.ndarray
    token_embeddings: np.ndarray
    position_embeddings: np.ndarray
    embeddings: np.ndarray
    layers: tuple[GPT2LayerSteps | KeptSteps, ...]
    final_hidden: np.ndarray
    logits: np.ndarray
    cache: GPT2Cache | None
