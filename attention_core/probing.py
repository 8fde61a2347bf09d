"""Probing trained models: attention rollout, a joint query-key map, token and head ablation.

Standard ways to read many heads at once or to test an idea against a real model, each a pure
NumPy function that returns its steps:

    attention_rollout(weights)          Abnar & Zuidema (2020): heads averaged, the residual
                                        added as 0.5·I, layers multiplied from the first upward
    joint_query_key_projection(q, k)    AttentionViz (Yeh et al. 2023): one head's queries and
                                        keys in one 2-D PCA picture
    ablate_token(model, text, i, mode)  the model run twice, with and without token i (removed,
                                        hidden from every query, or replaced), and what changed
    ablate_head(model, text, l, h)      the same with head h of layer l removed (its output
                                        zeroed before W_o: Michel et al. 2019)
    next_token_change(llm, ids, mode)   a decoder's next-token distribution before and after
                                        removing or hiding a token, or removing a head, with
                                        the KL divergence between the two

Shapes follow the package: patterns `(layer, head, q_pos, k_pos)`, q and k `(pos, d_head)`.
Attention flow (the max-flow variant of rollout in the same paper) is not computed: it solves a
max-flow problem per pair of tokens, which costs far more than the page's budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from attention_core.softmax import log_sum_exp
from attention_core.validation import AttentionInputError

__all__ = [
    "ABLATIONS",
    "DECODER_ABLATIONS",
    "Ablation",
    "NextTokenChange",
    "QueryKeyProjection",
    "Rollout",
    "ablate_head",
    "ablate_token",
    "attention_rollout",
    "joint_query_key_projection",
    "kl_divergence",
    "next_token_change",
    "remove_head_mask",
    "sentence_embedding",
]


# -- attention rollout --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Rollout:
    """Attention rollout's steps, in order. `n` = number of tokens, `L` = number of layers.

    head_mean      `(L, n, n)`  Ā_l, each layer's weights averaged over its heads
    with_residual  `(L, n, n)`  A'_l = renormalised rows of (1 - r)·Ā_l + r·I
    cumulative     `(L, n, n)`  R_l = A'_l · A'_{l-1} ⋯ A'_1, the rollout up to layer l
    rollout        `(n, n)`     R_L: row i says how much of position i's top-layer vector can be
                                traced back, through attention and residuals, to input token j
    """

    head_mean: np.ndarray
    with_residual: np.ndarray
    cumulative: np.ndarray

    @property
    def rollout(self) -> np.ndarray:
        return self.cumulative[-1]


def attention_rollout(weights: object, residual: float = 0.5) -> Rollout:
    """Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

        Ā_l  = mean over heads of A_{l,h}                                    (n, n) per layer
        A'_l = rownorm((1 - r)·Ā_l + r·I)            r = ``residual``, 0.5 in the paper
        R_1  = A'_1,    R_l = A'_l · R_{l-1}         so R_L = A'_L ⋯ A'_2 A'_1

    ``weights`` `(layer, head, q_pos, k_pos)`, softmax rows (a square pattern per head: self-
    attention). Layers are ordered from the input upward, as ``BertTrace.attention_weights``.
    ``residual`` in [0, 1]: the share a token keeps of itself through the skip connection.
    """
    a = np.asarray(weights, dtype=np.float64)
    if a.ndim != 4 or a.shape[-1] != a.shape[-2] or a.shape[-1] == 0:
        raise AttentionInputError(
            f"Rollout needs self-attention weights shaped (layer, head, n, n), got {a.shape}."
        )
    if not 0.0 <= residual <= 1.0:
        raise AttentionInputError(f"residual must be between 0 and 1, got {residual}.")
    n = a.shape[-1]
    # Heads of one layer act in parallel on the same input, so the paper simply averages them.
    head_mean = a.mean(axis=1)  # (layer, n, n)
    # The skip connection passes each token's own vector up unchanged: the identity, mixed in.
    mixed = (1.0 - residual) * head_mean + residual * np.eye(n)
    with_residual = mixed / mixed.sum(axis=-1, keepdims=True)
    # Layer l reads the mixture that layers 1..l-1 already made, so the maps compose by
    # multiplication, newest on the left.
    cumulative = np.empty_like(with_residual)
    cumulative[0] = with_residual[0]
    for layer in range(1, a.shape[0]):
        cumulative[layer] = with_residual[layer] @ cumulative[layer - 1]
    return Rollout(head_mean=head_mean, with_residual=with_residual, cumulative=cumulative)


# -- the joint query-key map --------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class QueryKeyProjection:
    """One head's queries and keys in one 2-D PCA picture. `n` = tokens, `d` = d_head.

    scale              s: queries were multiplied by s and keys divided by s
    shift              `(d,)`  added to every (scaled) key so the key mean is the query mean
    queries, keys      `(n, d)` the rows that were projected (scaled and shifted)
    mean               `(d,)`  mean of the stacked 2n rows, subtracted before the PCA
    components         `(2, d)` the first two principal directions (rows, unit length)
    query_xy, key_xy   `(n, 2)` coordinates in the picture
    explained          `(2,)`   share of the stacked rows' variance along each direction
    """

    scale: float
    shift: np.ndarray
    queries: np.ndarray
    keys: np.ndarray
    mean: np.ndarray
    components: np.ndarray
    query_xy: np.ndarray
    key_xy: np.ndarray
    explained: np.ndarray


def joint_query_key_projection(q: object, k: object) -> QueryKeyProjection:
    """Queries and keys of one head projected together to 2-D, the way AttentionViz does.

    Two changes first, neither of which moves any attention weight:

        s   = sqrt(mean‖k_j‖ / mean‖q_i‖);  q ← s·q,  k ← k / s     q·k is unchanged
        k   ← k + (mean(q) - mean(k))                               q·(k + c) = q·k + q·c: the
                                                                    same for every key of a
                                                                    row, so softmax ignores it
    Then PCA of the stacked rows X = [q; k] `(2n, d)`, with our own SVD:

        X - mean(X) = U S Vᵀ,   coordinates = (X - mean(X)) V[:, :2],
        explained variance share = S² / Σ S²

    Without the changes queries and keys often sit in two far-apart clouds and the picture only
    shows that gap; with them, a query lies near the keys it attends to. (AttentionViz scales to
    equal mean norms and translates keys; here the norms are balanced first, then the keys are
    moved, so the two means coincide exactly.) Each direction's sign is fixed so that its
    largest entry is positive (as scikit-learn's ``svd_flip``), so the picture does not flip
    between runs. ``q`` and ``k`` `(n, d)` for the same n tokens.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if q.ndim != 2 or k.ndim != 2 or q.shape[1] != k.shape[1] or q.shape[0] == 0:
        raise AttentionInputError(
            f"q and k must be (tokens, d_head) matrices of the same width, got {q.shape} and "
            f"{k.shape}."
        )
    if q.shape[1] < 2 or q.shape[0] + k.shape[0] < 3:
        raise AttentionInputError("A 2-D map needs d_head ≥ 2 and at least 3 rows in all.")
    q_norm = np.linalg.norm(q, axis=1).mean()
    k_norm = np.linalg.norm(k, axis=1).mean()
    scale = float(np.sqrt(k_norm / q_norm)) if q_norm > 0 and k_norm > 0 else 1.0
    queries = q * scale
    keys = k / scale
    shift = queries.mean(axis=0) - keys.mean(axis=0)  # (d,)
    keys = keys + shift
    stacked = np.concatenate([queries, keys])  # (2n, d)
    mean = stacked.mean(axis=0)
    _, s, vt = np.linalg.svd(stacked - mean, full_matrices=False)
    components = vt[:2]  # (2, d)
    biggest = np.argmax(np.abs(components), axis=1)
    components = components * np.sign(components[np.arange(2), biggest])[:, None]
    xy = (stacked - mean) @ components.T  # (2n, 2)
    variance = s**2
    explained = variance[:2] / variance.sum() if variance.sum() > 0 else np.zeros(2)
    n = q.shape[0]
    return QueryKeyProjection(
        scale=scale,
        shift=shift,
        queries=queries,
        keys=keys,
        mean=mean,
        components=components,
        query_xy=xy[:n],
        key_xy=xy[n:],
        explained=explained,
    )


# -- token ablation -----------------------------------------------------------------------------

AblationMode = Literal["remove", "mask", "replace"]
ABLATIONS: dict[str, str] = {
    "remove": "remove it (the text without it: later tokens move up one position)",
    "mask": "hide it (every query's weight on it set to 0, as a padding mask does)",
    "replace": "replace it (another word piece at the same position)",
}


def sentence_embedding(hidden: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """The sentence vector of sentence-transformers' all-MiniLM-L6-v2: mean pooling, then L2.

        e = Σ_i keep_i · h_i / Σ_i keep_i,    embedding = e / ‖e‖

    ``hidden`` `(n, d_model)` the last layer's output, ``keep`` `(n,)` boolean (the tokens the
    attention mask lets in; all of them when None). Returns `(d_model,)`.
    """
    hidden = np.asarray(hidden, dtype=np.float64)
    keep = np.ones(hidden.shape[0], dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    pooled = hidden[keep].mean(axis=0)
    return pooled / np.linalg.norm(pooled)


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
    from attention_core.models.bert import run_bert, run_bert_ids

    if mode not in ABLATIONS:
        raise AttentionInputError(f"mode must be one of {', '.join(ABLATIONS)}, got {mode!r}.")
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
    from attention_core.models.bert import run_bert, run_bert_ids

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

DECODER_ABLATIONS: dict[str, str] = {
    "remove": "remove a token (the text without it)",
    "mask": "hide a token (no query may attend to it)",
    "head": "remove a head (its output zeroed before W_o)",
}


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


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax(x) over the last axis: exact even where softmax underflows to 0."""
    return logits - log_sum_exp(logits)[..., None]


def kl_divergence(logits_p: object, logits_q: object) -> float | np.ndarray:
    """KL(p ‖ q) = Σ_v p_v (log p_v - log q_v) for p = softmax(logits_p), q = softmax(logits_q),
    in nats: 0 when the two distributions agree, growing as q misses p's mass.

    Both `(V,)`, a float; or both `(rows, V)`, one KL per row `(rows,)` (a text's positions at
    once, as ``llama.compare_next_tokens`` reads them)."""
    log_p = _log_softmax(np.asarray(logits_p, dtype=np.float64))
    log_q = _log_softmax(np.asarray(logits_q, dtype=np.float64))
    if log_p.shape != log_q.shape or log_p.ndim not in (1, 2):
        raise AttentionInputError(
            "Both logits must be (vocab,) or (rows, vocab), of one shape, got "
            f"{log_p.shape} and {log_q.shape}."
        )
    kl = np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)
    return float(kl) if log_p.ndim == 1 else kl


def next_token_change(
    model,
    input_ids: object,
    mode: str,
    *,
    position: int | None = None,
    layer: int | None = None,
    head: int | None = None,
) -> NextTokenChange:
    """Run ``model`` (a ``LlamaModel``) on ``input_ids`` `(n,)` twice, once as it is and once
    with one ablation, and compare the next-token distributions:

        remove    ids without position p: n - 1 tokens (later tokens move one position back)
        mask      the same ids; attend_p = False: no query of any layer may attend to token p
                  (p's own query still runs but nobody reads its result)
        head      head ``head`` of layer ``layer`` multiplied by 0 before W_o (all from 0)

    Both passes are plain ``run_llama`` forwards. Raises ``AttentionInputError`` for a bad mode,
    position or head, or a text of one token (which cannot lose it). ``position`` is needed for
    a token, ``layer`` and ``head`` for a head.
    """
    from attention_core.models.llama.forward import run_llama

    if mode not in DECODER_ABLATIONS:
        raise AttentionInputError(
            f"mode must be one of {', '.join(DECODER_ABLATIONS)}, got {mode!r}."
        )
    ids = np.asarray(input_ids, dtype=np.int64)
    n = ids.shape[0]
    config = model.config
    ids_after, attend, mask, where = ids, None, None, None
    if mode == "head":
        if layer is None or head is None:
            raise AttentionInputError("Say which head to remove: give its layer and head.")
        mask = remove_head_mask(config.num_hidden_layers, config.num_attention_heads, layer, head)
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
        keep = np.arange(n) != position
        if mode == "remove":
            ids_after = ids[keep]
        else:
            attend = keep
    before = run_llama(model, ids, keep=()).next_token_logits.astype(np.float64)
    after = run_llama(model, ids_after, attend=attend, head_mask=mask, keep=())
    after_logits = after.next_token_logits.astype(np.float64)
    return NextTokenChange(
        mode=mode,
        position=None if mode == "head" else position,
        head=where,
        input_ids=ids,
        input_ids_after=ids_after,
        logits_before=before,
        logits_after=after_logits,
        probs_before=np.exp(_log_softmax(before)),
        probs_after=np.exp(_log_softmax(after_logits)),
        kl=kl_divergence(before, after_logits),
    )
