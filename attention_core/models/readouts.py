"""What the pages read out of the real models' traces: the decoder's residual stream by stage and
by writer, head roles on probe sequences, token contributions, and losses with heads removed.

The formulas live in `logit_lens`, `head_roles` and `token_attribution`; this module only takes
the arrays they need out of a decoder's trace (`LlamaTrace`, `GPT2Trace`) or a `BertTrace`
(widening stored bfloat16 weights where
a formula reads them) and runs the extra forward passes a probe or a removed head needs. The
decoder's stream is read at its named points (``points``: resid.l, layer.l.heads through W_o,
layer.l.mlp_out), and heads are removed by edits of layer.l.heads, never by a copy of the forward.
The lens and the attribution read the stream through the model's own final norm
(``model.final_norm``: RMSNorm for Llama and Qwen2, LayerNorm for GPT-2).

    decoder_parts(model, trace, position)   ResidualParts: e, every head's and MLP's write, r_l
    decoder_lens(model, parts)              the logit lens at that position (LogitLens)
    decoder_attribution(model, parts, t, u) the logit of t (minus that of u) split by writer
    decoder_roles / encoder_roles           the weights on a probe sequence, and head roles
    repeated_half_loss(model, ids, L, mask) mean loss on the repeated half, heads masked
    decoder_contributions / encoder_contributions    ‖Σ_h α v W_O‖ per key (Kobayashi)

The readout's change as each key is hidden in turn is ``hiding``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.head_roles import HeadRoles, head_roles
from attention_core.logit_lens import (
    LogitAttribution,
    LogitLens,
    direct_logit_attribution,
    head_writes,
    logit_lens,
)
from attention_core.losses import token_losses
from attention_core.token_attribution import norm_contributions
from attention_core.validation import AttentionInputError, check_int, check_position

from . import points
from .bert import BertModel, BertTrace, run_bert_ids
from .decoder import DecoderModel
from .forward import run_decoder
from .layers import rms
from .llama.forward import head_logits
from .loading import widen
from .trace import DecoderTrace

__all__ = [
    "DECODER_PROBE_POOL",
    "ENCODER_PROBE_POOL",
    "ResidualParts",
    "decoder_attribution",
    "decoder_contributions",
    "decoder_lens",
    "decoder_parts",
    "decoder_probe_pool",
    "decoder_roles",
    "encoder_contributions",
    "encoder_roles",
    "repeated_half_loss",
]


# Ordinary tokens to draw probes from: past SmolLM2's special and byte tokens, and past
# MiniLM's [PAD], [unused*], [CLS], [SEP], [MASK] and single characters.
DECODER_PROBE_POOL = range(1000, 20_000)
ENCODER_PROBE_POOL = range(2000, 29_000)


def decoder_probe_pool(vocab_size: int) -> range:
    """``DECODER_PROBE_POOL`` within a vocabulary of ``vocab_size`` tokens: a smaller one (a
    tiny or an unfamiliar model) keeps the same share past its first tenth."""
    return range(min(DECODER_PROBE_POOL.start, vocab_size // 10),
                 min(DECODER_PROBE_POOL.stop, vocab_size))  # fmt: skip


@dataclass(frozen=True, eq=False)
class ResidualParts:
    """The decoder's residual stream at one position, and what wrote it.

    position    int (from 0)
    embedding   `(d_model,)`             e, the token's embedding
    heads       `(layer, head, d_model)` a_{l,h} = z_{l,h} W_O,hᵀ
    mlps        `(layer, d_model)`       m_l
    residuals   `(layer + 1, d_model)`   r_0 = e, r_l after layer l; r_L = e + Σ a + Σ m + Σ b
    biases      `(layer, d_model)`       b_l, what layer l's attention adds besides its heads
                                         (GPT-2's b_O); None for a model without (Llama)
    """

    position: int
    embedding: np.ndarray
    heads: np.ndarray
    mlps: np.ndarray
    residuals: np.ndarray
    biases: np.ndarray | None = None


def decoder_parts(model: DecoderModel, trace: DecoderTrace, position: int) -> ResidualParts:
    """Split the stream at `position` of a prompt's trace into its writers, read from the named
    points resid.*, layer.*.heads (through W_o) and layer.*.mlp_out."""
    position = check_position(position, trace.input_ids.shape[0])
    layers = range(len(trace.layers))
    heads = np.stack(
        [
            _post_normed(
                model,
                layer,
                head_writes(
                    trace.point(points.heads(layer))[:, position : position + 1],
                    widen(model.weights.layers[layer].w_o),
                )[:, 0],
            )
            for layer in layers
        ]
    )  # (layer, head, d_model)
    residuals = np.stack(
        [trace.point(points.resid(boundary))[position] for boundary in range(len(layers) + 1)]
    )  # (layer + 1, d_model)
    mlps = np.stack([trace.point(points.mlp_out(layer))[position] for layer in layers])
    b_o = [model.weights.layers[layer].b_o for layer in layers]
    return ResidualParts(
        position=position,
        embedding=residuals[0].astype(np.float64),
        heads=heads,
        mlps=mlps.astype(np.float64),
        residuals=residuals.astype(np.float64),
        biases=None if b_o[0] is None else np.stack(b_o).astype(np.float64),
    )


def _post_normed(model: DecoderModel, layer: int, writes: np.ndarray) -> np.ndarray:
    """The heads' writes `(head, d_model)` as the stream receives them: through the norm a
    family applies after attention (Gemma, OLMo 2), its scale held at what their sum gives, so
    the writes still add up to the layer's attn_out."""
    gain = getattr(model.weights.layers[layer], "post_attn_norm", None)
    if gain is None:
        return writes
    return writes * (gain / rms(writes.sum(axis=0), model.config.rms_norm_eps))


def decoder_lens(model: DecoderModel, parts: ResidualParts) -> LogitLens:
    """The logit lens at `parts.position`: every stage through the model's final norm and its
    head."""
    head = model.weights.unembedding
    return logit_lens(
        parts.residuals, model.final_norm, lambda normed: head_logits(model, normed, head, None)
    )


def decoder_attribution(
    model: DecoderModel, parts: ResidualParts, token: int, versus: int | None = None
) -> LogitAttribution:
    """The logit of `token` (minus that of `versus`) at `parts.position`, split by writer, the
    final norm's scale frozen (``model.final_norm``)."""
    head = model.weights.unembedding
    vocab = head.shape[0]
    for name, value in (("token", token), ("versus", versus)):
        if value is not None and not 0 <= check_int(value, f"the {name} id", minimum=0) < vocab:
            raise AttentionInputError(f"Token id {value} is past the vocabulary's {vocab} tokens.")
    direction = widen(head[[token]])[0].astype(np.float64)
    if versus is not None:
        direction = direction - widen(head[[versus]])[0]
    return direct_logit_attribution(
        parts.embedding, parts.heads, parts.mlps, model.final_norm, direction, biases=parts.biases
    )


def decoder_roles(model: DecoderModel, probe_ids: np.ndarray) -> tuple[np.ndarray, HeadRoles]:
    """The weights `(layer, head, 2L, 2L)` every head gives a probe (`(2L,)` ids, a period
    repeated twice) and their role scores."""
    weights = run_decoder(model, probe_ids, keep=("weights",)).attention_weights
    return weights, head_roles(weights, len(probe_ids) // 2)


def encoder_roles(model: BertModel, probe_ids: np.ndarray) -> tuple[np.ndarray, HeadRoles]:
    """The same for the encoder, the probe read between [CLS] and [SEP] as every text is:
    weights `(layer, head, 2L + 2, 2L + 2)`."""
    cls, sep = (model.tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]"))
    ids = np.concatenate([[cls], np.asarray(probe_ids, dtype=np.int64), [sep]])
    weights = run_bert_ids(model, ids).attention_weights
    return weights, head_roles(weights, len(probe_ids) // 2, start=1)


def repeated_half_loss(
    model: DecoderModel, probe_ids: np.ndarray, period: int, head_mask: np.ndarray | None = None
) -> float:
    """Mean loss of predicting tokens L+1 .. 2L-1 (the repeated half after its first token,
    which only the repetition makes predictable), with `head_mask` `(layer, head)` applied."""
    period = check_int(period, "the period", minimum=2)
    edits = None if head_mask is None else points.head_scaling(head_mask)
    trace = run_decoder(model, probe_ids, all_logits=True, edits=edits, keep=())
    losses = token_losses(trace.logits, probe_ids)  # losses[i] predicts token i + 1
    return float(losses[period : 2 * period - 1].mean())


def decoder_contributions(
    model: DecoderModel, trace: DecoderTrace, layer: int, query: int
) -> np.ndarray:
    """`(query + 1,)`: ‖Σ_h α_h,ij v_h,j W_O,hᵀ‖ of layer `layer` for the keys the query sees."""
    steps = trace.layers[layer]
    query = check_position(query, trace.input_ids.shape[0])
    # Grouped-query attention: every query head of a group reads its KV head's values.
    values = np.repeat(steps.v, model.config.group_size, axis=0)  # (head, n, d_head)
    seen = slice(0, query + 1)
    return norm_contributions(
        steps.weights[:, : query + 1, seen],
        values[:, seen],
        widen(model.weights.layers[layer].w_o),
        query,
    )


def encoder_contributions(model: BertModel, trace: BertTrace, layer: int, query: int) -> np.ndarray:
    """`(n,)`: the same for the encoder, every key visible."""
    attention = trace.layers[layer].attention
    query = check_position(query, len(trace.tokens))
    return norm_contributions(
        attention.weights, attention.v_heads, model.weights.layers[layer].attention.w_o, query
    )
