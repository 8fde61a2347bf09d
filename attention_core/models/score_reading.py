"""What "why a head attends there" reads of one head for one query, from a prompt's pass: the
split of its scores (``score_sources``) boiled down to arrays the size of a page.

    decoder_head_split(model, ids, layer, head)    a decoder's pass (Llama family, GPT-2) and
                                                   one head's split for every query
    encoder_head_split(model, ids, layer, head)    the same for a BERT-style encoder
    attn_only_head_split(config, params, tokens, …)  the same for the learning page's model
    read_head(split, query)                        what the page shows of it for one query: a
                                                   ``HeadReading``, a few hundred kilobytes

A split holds every source's part of every query and key (6 MB for SmolLM2's layer 19 at 64
tokens): a page keeps one per head, so a change of query or key costs a reading, not a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core import score_parts
from attention_core.training.attn_only import AttnOnlyConfig, Params, run_attn_only

from .bert import BertModel, run_bert_ids
from .forward import run_decoder
from .gpt2 import GPT2Model
from .llama.model import LlamaModel
from .score_sources import SPLIT_STEPS, HeadSplit, attn_only_split, encoder_split, head_split

__all__ = [
    "BANDS",
    "FOCUSED",
    "TOP_TERMS",
    "HeadReading",
    "attn_only_head_split",
    "decoder_head_split",
    "encoder_head_split",
    "read_head",
]

# RoPE's pairs are read in this many bands, fastest first; each key's largest terms are kept.
BANDS = 4
TOP_TERMS = 8
# A query whose largest weight on a key after the first reaches this attends there; below it, it
# spreads its weight or parks it on the first key, and says little of why the head attends.
FOCUSED = 0.3


@dataclass(frozen=True, eq=False)
class HeadReading:
    """One head's scores of every key, for one query, split by source; k_pos = n.

    names        (C,)              the sources (the last: the bias of q and k)
    query        int               the query's position
    scores       `(n,)`            the model's own scaled scores of this query
    summed       `(n,)`            the sum of every part: equals `scores` up to float rounding
    weights      `(n,)`            its attention weights
    visible      `(n,)` bool       the keys the query sees
    key_above    `(C, n)`          what each source wrote at each key added to its score, above
                                   the visible keys' average (``score_parts.above_average``)
    query_above  `(C, n)`          what each source wrote at the query added, the same way
    top_terms    `(n, TOP_TERMS, 2)` int and `top_values` `(n, TOP_TERMS)`: each key's largest
                                   query part × key part terms (sources by index), largest first
    bands        `(BANDS, n)`      the scores over RoPE's pairs in bands, fastest first, above
                                   the average (None: no rotation)
    content      `(n,)`            the scores without the rotation (None without RoPE)
    pattern_map  `(C, n)`          ``score_parts.source_map`` over the queries that attend
                                   (FOCUSED on a key after the first), and `pattern_queries`
                                   those queries
    positional   `(2, 2, n)`       token/position × token/position terms (query part first),
                                   for a model whose positions come with the embeddings (None
                                   for RoPE)
    query_scale  float             the norm's scale held at the query
    """

    names: tuple[str, ...]
    query: int
    scores: np.ndarray
    summed: np.ndarray
    weights: np.ndarray
    visible: np.ndarray
    key_above: np.ndarray
    query_above: np.ndarray
    top_terms: np.ndarray
    top_values: np.ndarray
    bands: np.ndarray | None
    content: np.ndarray | None
    pattern_map: np.ndarray
    pattern_queries: np.ndarray
    positional: np.ndarray | None
    query_scale: float

    @property
    def pattern_totals(self) -> np.ndarray:
        """`(C,)` each source's part of the whole pattern's map over every key but the first
        (a sink's weight says where a head parks, not where it looks)."""
        return self.pattern_map[:, 1:].sum(axis=1)

    @property
    def attended(self) -> int:
        """The key the query attends most after the first (where heads park spare weight), or
        the first when it sees no other."""
        if self.visible.sum() < 2:
            return 0
        return 1 + int(np.argmax(np.where(self.visible[1:], self.weights[1:], -1.0)))


def decoder_head_split(
    model: LlamaModel | GPT2Model, ids: object, layer: int, head: int
) -> HeadSplit:
    """Decoder ``model`` run on ``ids`` `(n,)`, and head ``head`` of layer ``layer`` (both from
    0) split for every query (``score_sources.head_split``)."""
    trace = run_decoder(model, np.asarray(ids), keep=SPLIT_STEPS)
    return head_split(model, trace, layer, head)


def encoder_head_split(model: BertModel, ids: object, layer: int, head: int) -> HeadSplit:
    """The same for an encoder (``score_sources.encoder_split``)."""
    return encoder_split(model, run_bert_ids(model, np.asarray(ids)), layer, head)


def attn_only_head_split(
    config: AttnOnlyConfig, params: Params, tokens: object, layer: int, head: int
) -> HeadSplit:
    """The same for the learning page's attention-only model on `tokens` `(n,)`."""
    steps = run_attn_only(config, params, np.asarray(tokens)[None])
    return attn_only_split(config, params, steps, layer, head)


def read_head(split: HeadSplit, query: int, *, causal: bool = True) -> HeadReading:
    """What the page shows of ``split`` for position ``query``: every key the query sees
    (``causal``: the keys up to it; else all)."""
    n = len(split.weights)
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    return _reading(split, query, visible)


def _reading(split: HeadSplit, query: int, visible: np.ndarray) -> HeadReading:
    n = len(visible)
    at = split.at(query)  # checks the query
    seen = visible[query]
    terms = at.terms  # (C, C, n)
    flat = terms.reshape(-1, n)
    order = np.argsort(-np.abs(flat), axis=0, kind="stable")[:TOP_TERMS].T  # (n, TOP_TERMS)
    top_terms = np.stack(np.unravel_index(order, terms.shape[:2]), axis=-1)
    # The queries that attend somewhere: past FOCUSED on one key after the first (where heads
    # park spare weight); the sharpest one where none is.
    after_first = split.weights[:, 1:]
    queries = np.flatnonzero(after_first.max(axis=1, initial=0.0) >= FOCUSED)
    if queries.size == 0:
        queries = score_parts.sharpest_queries(after_first, 1)
    bands = content = positional = None
    if at.pairs is not None:
        band_parts = score_parts.band_terms(at.pairs, min(BANDS, len(at.pairs)))
        bands = score_parts.above_average(band_parts, seen)
        content = at.content
    elif "position embedding" in split.names:
        picked = [split.names.index("token embedding"), split.names.index("position embedding")]
        positional = terms[np.ix_(picked, picked)]
    return HeadReading(
        names=split.names,
        query=query,
        scores=at.scores,
        summed=terms.sum(axis=(0, 1)),
        weights=at.weights,
        visible=seen,
        key_above=score_parts.above_average(at.key_side, seen),
        query_above=score_parts.above_average(at.query_side, seen),
        top_terms=top_terms,
        top_values=np.take_along_axis(flat, order.T, axis=0).T,
        bands=bands,
        content=content,
        pattern_map=score_parts.source_map(split.key_sides(), split.weights, visible, queries),
        pattern_queries=queries,
        positional=positional,
        query_scale=at.query_scale,
    )
