"""A real model run again with a token, a key or a head taken away, and what that changed.

The same forward pass twice, once as it is and once with one thing hidden; nothing is
approximated, so every difference is exactly after − before:

    ablate_token(model, text, i, mode)      an encoder with token i removed, hidden from every
                                            query, or replaced (an ``Ablation``)
    ablate_head(model, text, l, h)          the same with head h of layer l removed (its output
                                            zeroed before W_o: Michel et al. 2019)
    next_token_change(llm, ids, mode)       a decoder's next-token distribution before and after
                                            removing or hiding a token, or removing a head, with
                                            the KL divergence between the two
    decoder_hiding_effects(llm, ids, i)     KL of query i's next token as each key j ≤ i is
                                            hidden in turn (one pass per key)
    encoder_hiding_effects(model, ids, i)   1 − cos of query i's last hidden state as each key
                                            is hidden in turn

Hiding key j is one boolean mask over the keys, ``attend = keys != j``, which every layer of
either model applies to every query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from attention_core.losses import kl_divergence, log_softmax
from attention_core.probing import sentence_embedding
from attention_core.validation import AttentionInputError, check_position

from . import points
from .bert import BertModel, run_bert, run_bert_ids
from .decoder import DecoderModel
from .forward import run_decoder

__all__ = [
    "ABLATIONS",
    "DECODER_ABLATIONS",
    "Ablation",
    "NextTokenChange",
    "ablate_head",
    "ablate_token",
    "decoder_hiding_effects",
    "encoder_hiding_effects",
    "next_token_change",
    "remove_head_mask",
]


def without_key(n: int, key: int) -> np.ndarray:
    """`(n,)` boolean: every key may be attended to but ``key`` (True = may attend)."""
    return np.arange(n) != key


def _check_mode(mode: object, modes: tuple[str, ...]) -> None:
    if mode not in modes:
        raise AttentionInputError(f"mode must be one of {', '.join(modes)}, got {mode!r}.")


# -- an encoder without a token or a head -------------------------------------------------------

AblationMode = Literal["remove", "mask", "replace"]
ABLATIONS: tuple[str, ...] = ("remove", "mask", "replace")


@dataclass(frozen=True, eq=False)
class Ablation:
    """The model on a text, then on it with one token or one head ablated. `n` = tokens before.

    position             the ablated token (from 0), None when a head was removed
    mode                 one of ``ABLATIONS``, or "head"
    head                 (layer, head) of the removed head (from 0), None for a token
    tokens, tokens_after the model's tokens before and after (n, or n - 1 when removed)
    weights_before       `(layer, head, n, n)` attention of the original text
    weights_after        `(layer, head, n, n)` attention of the ablated text, aligned with the
                         original positions; a removed token's row and column are NaN
    difference           `(layer, head, n, n)` weights_after - weights_before (NaN where removed)
    embedding_before/after `(d_model,)` sentence embeddings (mean pooling over the tokens the
                         model can see, then L2-normalised)
    cosine               embedding_before · embedding_after (both unit length)
    token_change         `(n,)` 1 - cosine between each position's last hidden state before and
                         after (NaN for a removed token)
    """

    position: int | None
    mode: str
    tokens: tuple[str, ...]
    tokens_after: tuple[str, ...]
    weights_before: np.ndarray
    weights_after: np.ndarray
    difference: np.ndarray
    embedding_before: np.ndarray
    embedding_after: np.ndarray
    cosine: float
    token_change: np.ndarray
    head: tuple[int, int] | None = None


def ablate_token(
    model, text: str, position: int, mode: AblationMode = "remove", replacement: str = "[MASK]"
) -> Ablation:
    """Run ``model`` (a ``BertModel``) on ``text`` and on ``text`` with token ``position`` (from
    0, [CLS] included) ablated, and return both and their difference (see ``Ablation``).

        remove    ids without position p: n - 1 tokens, every later token one position earlier
        mask      the same ids; attend_p = False, so for every query in every layer
                  weight_{i,p} = 0 and the other weights renormalise; p is left out of the mean
        replace   ids with id_p = the id of ``replacement`` (one word piece, e.g. "[MASK]")

    Both passes are the plain ``run_bert_ids`` forward, so the difference is exactly
    after - before. Raises ``AttentionInputError`` for a bad position, mode or replacement.
    """
    _check_mode(mode, ABLATIONS)
    before = run_bert(model, text)
    n = len(before.tokens)
    if not 0 <= position < n:
        raise AttentionInputError(
            f"Token {position + 1} does not exist: this text has {n} tokens (1 to {n})."
        )
    ids = before.input_ids
    keep = np.ones(n, dtype=bool)
    if mode == "remove":
        # A text always has [CLS] and [SEP] around its words, so something always remains.
        keep[position] = False
        after = run_bert_ids(model, ids[keep])
    elif mode == "mask":
        keep[position] = False
        after = run_bert_ids(model, ids, attend=keep)
    else:
        new_ids = ids.copy()
        new_ids[position] = replacement_id(model, replacement)
        after = run_bert_ids(model, new_ids)
    present = keep if mode == "remove" else np.ones(n, dtype=bool)
    return _compare(before, after, present, keep, mode, position)


def remove_head_mask(num_layers: int, num_heads: int, layer: int, head: int) -> np.ndarray:
    """`(layer, head)` multipliers: 1 everywhere but 0 at (``layer``, ``head``), from 0."""
    if not (0 <= layer < num_layers and 0 <= head < num_heads):
        raise AttentionInputError(
            f"Layer {layer + 1}, head {head + 1} does not exist: the model has layers 1 to "
            f"{num_layers} and heads 1 to {num_heads}."
        )
    mask = np.ones((num_layers, num_heads))
    mask[layer, head] = 0.0
    return mask


def ablate_head(model, text: str, layer: int, head: int) -> Ablation:
    """Run ``model`` (a ``BertModel``) on ``text`` twice: as it is, and with head ``head`` of
    layer ``layer`` (both from 0) removed, and return both and their difference.

        head_l,h = softmax(q k_hᵀ / √d) v_h  is multiplied by 0 before W_o (Michel et al. 2019,
        "Are Sixteen Heads Really Better than One?"), so the layer's output lacks its share

    The removed head still computes its pattern, and nothing below its output changes: layers
    up to ``layer`` have the same weights in both runs (difference 0); later layers read a
    different residual stream. Raises ``AttentionInputError`` for a head that does not exist.
    """
    config = model.config
    mask = remove_head_mask(config.num_hidden_layers, config.num_attention_heads, layer, head)
    before = run_bert(model, text)
    after = run_bert_ids(model, before.input_ids, head_mask=mask)
    everything = np.ones(len(before.tokens), dtype=bool)
    return _compare(before, after, everything, everything, "head", None, (layer, head))


def _compare(
    before, after, present, pooled, mode: str, position: int | None, head=None
) -> Ablation:
    """The Ablation of two BertTraces. ``present`` `(n,)` boolean: the original positions that
    the ablated text still has (``after`` holds only those); ``pooled`` `(n,)`: the ones its
    sentence embedding averages (those the model could see)."""
    n = len(before.tokens)
    w_before = before.attention_weights.astype(np.float64)  # (layer, head, n, n)
    w_after = np.full_like(w_before, np.nan)
    kept = np.flatnonzero(present)
    w_after[:, :, kept[:, None], kept[None, :]] = after.attention_weights
    hidden_after = np.full((n, before.last_hidden_state.shape[1]), np.nan)
    hidden_after[kept] = after.last_hidden_state
    hidden_before = before.last_hidden_state.astype(np.float64)
    embedding_before = sentence_embedding(hidden_before)
    embedding_after = sentence_embedding(hidden_after, pooled)
    # How far each token's top vector turned: 0 unchanged, 1 orthogonal (NaN if removed).
    token_change = 1.0 - _row_cosines(hidden_before, hidden_after)
    return Ablation(
        tokens=before.tokens,
        tokens_after=after.tokens,
        position=position,
        mode=mode,
        weights_before=w_before,
        weights_after=w_after,
        difference=w_after - w_before,
        embedding_before=embedding_before,
        embedding_after=embedding_after,
        cosine=float(embedding_before @ embedding_after),
        token_change=token_change,
        head=head,
    )


def _row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`(n,)` cosine between row i of `a` and row i of `b`, both `(n, d)`."""
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def replacement_id(model, word: str) -> int:
    """The vocabulary id of ``word``, which must be a single word piece ("[MASK]", "dog")."""
    word = word.strip()
    token_id = model.tokenizer.token_to_id(word) if word else None
    if token_id is None and word:
        token_id = model.tokenizer.token_to_id(word.lower())
    if token_id is None:
        shown = word or "(nothing)"
        raise AttentionInputError(
            f"“{shown}” is not one word piece of the model's vocabulary: type one lower-case "
            "word such as “dog”, or [MASK]."
        )
    return int(token_id)


# -- the next token of a decoder ----------------------------------------------------------------

DECODER_ABLATIONS: tuple[str, ...] = ("remove", "mask", "head")


@dataclass(frozen=True, eq=False)
class NextTokenChange:
    """A decoder's next-token prediction before and after one ablation. `V` = vocabulary size.

    mode                  one of ``DECODER_ABLATIONS``
    position              the ablated token (from 0), None for a head
    head                  (layer, head) of the removed head (from 0), None for a token
    input_ids, input_ids_after   `(n,)` and `(n,)` or `(n - 1,)` (after a removal)
    logits_before/after   `(V,)` the logits that predict the token after the last position
    probs_before/after    `(V,)` softmax of those logits (temperature 1, no top-k)
    kl                    KL(before ‖ after) = Σ_v p_v (log p_v - log q_v), in nats
    """

    mode: str
    position: int | None
    head: tuple[int, int] | None
    input_ids: np.ndarray
    input_ids_after: np.ndarray
    logits_before: np.ndarray
    logits_after: np.ndarray
    probs_before: np.ndarray
    probs_after: np.ndarray
    kl: float

    @property
    def top_before(self) -> int:
        return int(np.argmax(self.probs_before))

    @property
    def top_after(self) -> int:
        return int(np.argmax(self.probs_after))


def next_token_change(
    model,
    input_ids: object,
    mode: str,
    *,
    position: int | None = None,
    layer: int | None = None,
    head: int | None = None,
) -> NextTokenChange:
    """Run ``model`` (a ``DecoderModel``) on ``input_ids`` `(n,)` twice, once as it is and once
    with one ablation, and compare the next-token distributions:

        remove    ids without position p: n - 1 tokens (later tokens move one position back)
        mask      the same ids; attend_p = False: no query of any layer may attend to token p
                  (p's own query still runs but nobody reads its result)
        head      head ``head`` of layer ``layer`` multiplied by 0 before W_o (all from 0):
                  an edit of the point layer.{l}.heads

    Both passes are plain forwards of the model's family (``run_decoder``). Raises
    ``AttentionInputError`` for a bad mode, position or head, or a text of one token (which
    cannot lose it). ``position`` is needed for a token, ``layer`` and ``head`` for a head.
    """
    _check_mode(mode, DECODER_ABLATIONS)
    ids = np.asarray(input_ids, dtype=np.int64)
    n = ids.shape[0]
    config = model.config
    ids_after, attend, edits, where = ids, None, None, None
    if mode == "head":
        if layer is None or head is None:
            raise AttentionInputError("Say which head to remove: give its layer and head.")
        mask = remove_head_mask(config.num_hidden_layers, config.num_attention_heads, layer, head)
        edits = points.head_scaling(mask)
        where = (layer, head)
    else:
        if position is None:
            raise AttentionInputError(f"Say which token to {mode}: give its position.")
        if not 0 <= position < n:
            raise AttentionInputError(
                f"Token {position + 1} does not exist: this text has {n} tokens (1 to {n})."
            )
        if n < 2:
            raise AttentionInputError(
                "A text of one token cannot lose it: nothing would be left to read."
            )
        keep = without_key(n, position)
        if mode == "remove":
            ids_after = ids[keep]
        else:
            attend = keep
    before = _next_token_logits(model, ids)
    after_logits = _next_token_logits(model, ids_after, attend=attend, edits=edits)
    return NextTokenChange(
        mode=mode,
        position=None if mode == "head" else position,
        head=where,
        input_ids=ids,
        input_ids_after=ids_after,
        logits_before=before,
        logits_after=after_logits,
        probs_before=np.exp(log_softmax(before)),
        probs_after=np.exp(log_softmax(after_logits)),
        kl=kl_divergence(before, after_logits),
    )


def _next_token_logits(
    model: DecoderModel,
    ids: np.ndarray,
    *,
    attend: np.ndarray | None = None,
    edits: dict[str, points.Edit] | None = None,
) -> np.ndarray:
    """`(V,)` float64: the logits after the last of ``ids``, with what ``attend`` hides and
    ``edits`` (named points -> replacements) changes."""
    trace = run_decoder(model, ids, attend=attend, edits=edits, keep=())
    return trace.next_token_logits.astype(np.float64)


# -- every key hidden in turn -------------------------------------------------------------------


def decoder_hiding_effects(model: DecoderModel, input_ids: np.ndarray, query: int) -> np.ndarray:
    """`(query + 1,)`: KL(before ‖ after) of the next-token distribution at `query` when key j
    is hidden from every query of every layer (one forward pass per key)."""
    ids = np.asarray(input_ids, dtype=np.int64)
    query = check_position(query, ids.shape[0])
    seen = ids[: query + 1]
    before = _next_token_logits(model, seen)
    return np.array(
        [
            kl_divergence(before, _next_token_logits(model, seen, attend=without_key(query + 1, j)))
            for j in range(query + 1)
        ]
    )


def encoder_hiding_effects(model: BertModel, input_ids: np.ndarray, query: int) -> np.ndarray:
    """`(n,)`: 1 − cos(h_i before, h_i after) of query i's last hidden state when key j is
    hidden from every query (one forward pass per key)."""
    ids = np.asarray(input_ids, dtype=np.int64)
    n = ids.shape[0]
    query = check_position(query, n)
    before = run_bert_ids(model, ids).last_hidden_state[query].astype(np.float64)
    effects = []
    for j in range(n):
        after = run_bert_ids(model, ids, attend=without_key(n, j)).last_hidden_state[query]
        cosine = before @ after / (np.linalg.norm(before) * np.linalg.norm(after))
        effects.append(1.0 - cosine)
    return np.array(effects)
