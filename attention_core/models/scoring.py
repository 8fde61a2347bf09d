"""A text read in one pass and scored: next-token losses, distributions compared, sink shares.

score_text           a text's losses, final stream and first-key weights (``TextScore``)
compare_next_tokens  several streams of one text read by the head together: losses, KL and
                     top-1 agreement against a reference (``NextTokenComparison``)
first_token_share    the weight queries give the first key (attention sinks)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.losses import kl_divergence, next_token_losses
from attention_core.validation import AttentionInputError, check_int

from .checkpoint import check_logits
from .decoder import DecoderModel
from .forward import read_decoder_text
from .llama.forward import head_logits

__all__ = [
    "NextTokenComparison",
    "TextScore",
    "compare_next_tokens",
    "first_token_share",
    "score_text",
]


@dataclass(frozen=True, eq=False)
class TextScore:
    """A text read by the decoder in one pass, only what scoring it needs kept.

    losses         `(n - 1,)` −log p(token i + 1 | what query i may see), in nats
    final          `(n, d_model)` the stream after the final RMSNorm (what the head reads)
    first_weights  `(layer, head, first)` the mean weight queries 1..n-1 give each of the
                   first `first` keys; summed over the last axis, the share on the first
                   tokens (attention sinks)
    """

    losses: np.ndarray
    final: np.ndarray
    first_weights: np.ndarray


# Rows of logits made at a time while scoring: 64 × 49152 float32 is 12.6 MB.
SCORE_ROWS = 64
# The bfloat16 head widened this many rows at a time while scoring (8192 × 576 float32, 18.9 MB):
# each product gives up the GIL and waits to take it back, and on a busy server that wait, not
# the arithmetic, is the cost, so fewer and larger products win (bench/bench_gil_wait.py).
SCORE_HEAD_ROWS = 8192


def score_text(
    model: DecoderModel,
    input_ids: object,
    *,
    attend: object = None,
    first: int = 1,
    kv_codec: object = None,
) -> TextScore:
    """Read a whole text (up to ``model.text_limit`` tokens) by any decoder family's pass and
    keep only its losses, its final stream and the weight each head gives the first ``first``
    keys: a layer's steps are let go as soon as the next layer has read its output, and the
    logits are made a few rows at a time.

    ``attend`` as in ``run_llama`` (`(n, n)`: which keys each query may see, on top of the
    causal mask). ``kv_codec(layer, k, v) -> (k, v)``, given, replaces each layer's new keys
    (after RoPE) and values `(kv_head, n, d_head)` before attention reads them: a quantized or
    pooled KV cache.
    """
    ids, final, first_weights = read_decoder_text(
        model, input_ids, attend=attend, first=first, kv_codec=kv_codec
    )
    losses = compare_next_tokens(model, ids, final, ()).losses[0]
    return TextScore(losses=losses, final=final, first_weights=first_weights)


@dataclass(frozen=True, eq=False)
class NextTokenComparison:
    """What the next-token distributions of several streams over one text of n tokens say,
    position by position: a reference (the full cache, say) and others (smaller caches), none
    for ``score_text``.

    losses        `(1 + other, n - 1)` −log p of the text's next tokens, the reference first
    kl            `(other, n)` KL(reference ‖ other), in nats
    top1_agrees   `(other, n)` whether the other's most likely next token is the reference's
    """

    losses: np.ndarray
    kl: np.ndarray
    top1_agrees: np.ndarray


def compare_next_tokens(
    model: DecoderModel,
    input_ids: object,
    reference: np.ndarray,
    others: tuple[np.ndarray, ...],
    *,
    rows: int | None = None,
) -> NextTokenComparison:
    """Compare the next-token distribution p = softmax(reference Eᵀ) with q = softmax(other Eᵀ)
    of each other stream, and score each stream on the text's next tokens.

    reference, others `(n, d_model)`: streams after the final RMSNorm (``read_text``) of the
    text `input_ids` `(n,)`. Every stream's logits are made together, `rows` positions of each
    at a time (by default as many as make SCORE_ROWS rows of logits, 12.6 MB): the bfloat16
    unembedding is widened SCORE_HEAD_ROWS rows at a time for each product, so one product of
    all the streams widens it once where a product per stream would widen it once each.
    """
    ids = np.asarray(input_ids)
    streams = [np.asarray(reference), *(np.asarray(other) for other in others)]
    n = ids.shape[0]
    if any(stream.shape != streams[0].shape for stream in streams) or streams[0].ndim != 2:
        raise AttentionInputError(
            "Every stream must be (n, d_model) of one shape, got "
            f"{', '.join(str(stream.shape) for stream in streams)}."
        )
    if streams[0].shape[0] != n:
        raise AttentionInputError(
            f"The streams have {streams[0].shape[0]} positions and the text {n} tokens."
        )
    if rows is None:
        rows = max(1, SCORE_ROWS // len(streams))
    rows = check_int(rows, "rows", minimum=1)
    head = model.weights.unembedding
    scratch = None
    if model.weights.storage != "float32":
        scratch = np.empty(min(SCORE_HEAD_ROWS, head.shape[0]) * head.shape[1], np.float32)
    losses = np.empty((len(streams), n - 1))
    kl, agrees = np.empty((len(others), n)), np.empty((len(others), n), dtype=bool)
    for start in range(0, n, rows):
        chunk = slice(start, min(start + rows, n))
        logits = head_logits(
            model, np.concatenate([stream[chunk] for stream in streams]), head, scratch
        )
        check_logits(logits)
        logits_p, *logits_q = np.split(logits, len(streams))  # each (rows, vocab)
        scored = slice(chunk.start, min(chunk.stop, n - 1))  # the last position has no next
        targets = ids[scored.start + 1 : scored.stop + 1]
        for stream, stream_logits in enumerate((logits_p, *logits_q)):
            losses[stream, scored] = next_token_losses(stream_logits[: targets.size], targets)
        for other, q in enumerate(logits_q):
            # The block's rows at once: a few calls into NumPy where a row each made thousands,
            # every one of them waiting for the GIL again on a busy server.
            kl[other, chunk] = kl_divergence(logits_p, q)
            # The most likely token is the largest logit: no softmax needed.
            agrees[other, chunk] = logits_p.argmax(axis=-1) == q.argmax(axis=-1)
    return NextTokenComparison(losses=losses, kl=kl, top1_agrees=agrees)


def first_token_share(weights: np.ndarray) -> np.ndarray:
    """Attention-sink share: the mean weight queries 1..n-1 give key 0, `(..., head)`.

    weights `(..., head, q_pos, k_pos)`. Query 0 is left out: causally it can only see itself,
    so its 1.0 says nothing. Many heads of trained decoders park most of their weight on the
    first token (Xiao et al. 2023, "attention sinks") when they have nothing better to do.
    """
    w = np.asarray(weights)
    if w.shape[-2] < 2:
        raise AttentionInputError("The sink share needs at least two tokens.")
    return w[..., 1:, 0].mean(axis=-1)
