"""A real decoder's attention score split by what wrote the residual stream its head read
(``attention_core.score_parts`` holds the formulas; this module finds the sources in a trace).

The stream entering layer L, resid.L, is the sum of

    the token embedding, and the position embedding where the model has one (GPT-2)
    each head h of each earlier layer l:  z_{l,h} W_O[:, h]ᵀ   (its slice of the output matrix)
    each earlier layer's attention output bias b_O, where the model has one (GPT-2), together
    each earlier MLP's output

so ``stream_sources`` returns them in that order, as `(C, n, d_model)` summing to resid.L, and
``split_score`` carries them through layer L's norm (its scale held), W_q and W_k, the biases and
the rotation into one head's score for one query at every key.

The trace must keep every layer's head outputs and MLP outputs before L (``run_decoder`` with
the default ``keep``) and layer L's queries and keys; a Llama-family head reads its KV head
(GQA).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core import score_parts
from attention_core.positional import llama3_frequencies, rotary_tables
from attention_core.validation import AttentionInputError, check_int

from . import points
from .gpt2 import GPT2Model
from .llama.files import widen
from .llama.model import LlamaModel
from .trace import DecoderTrace

__all__ = ["CONSTANT", "ScoreSplit", "Sources", "split_score", "stream_sources"]

# The name of the part no source carries: the norm's β through W, and the projection's bias.
CONSTANT = "biases"


@dataclass(frozen=True)
class Sources:
    """What wrote the residual stream entering a layer: ``names`` (C,) and ``parts``
    `(C, n, d_model)`, summing to resid.L."""

    names: tuple[str, ...]
    parts: np.ndarray


@dataclass(frozen=True)
class ScoreSplit:
    """One head's score of every key, for one query, split by source.

    names         (C + 1,)             the sources, then CONSTANT
    terms         `(C + 1, C + 1, k_pos)` query part × key part: terms[a, b, j] is how much
                                       what a wrote at the query, meeting what b wrote at key j,
                                       added to the score
    scores        `(k_pos,)`           the model's own scaled scores of this query, before the
                                       mask: the terms' sum, up to float32 rounding
    query_scale   float                the norm's scale r_i at the query, held
    key_scales    `(k_pos,)`           the norm's scale r_j at each key, held
    pairs         `(d_head/2, k_pos)`  the score over RoPE's pairs, fastest first (None: no
                                       rotation, positions came with the embeddings)
    content       `(k_pos,)`           the score without the rotation (None without RoPE)
    """

    names: tuple[str, ...]
    terms: np.ndarray
    scores: np.ndarray
    query_scale: float
    key_scales: np.ndarray
    pairs: np.ndarray | None
    content: np.ndarray | None

    @property
    def key_side(self) -> np.ndarray:
        """`(C + 1, k_pos)` what each source wrote at the key added, met by the whole query."""
        return self.terms.sum(axis=0)

    @property
    def query_side(self) -> np.ndarray:
        """`(C + 1, k_pos)` what each source wrote at the query added, met by the whole key."""
        return self.terms.sum(axis=1)


def stream_sources(model: LlamaModel | GPT2Model, trace: DecoderTrace, layer: int) -> Sources:
    """The sources of resid.{layer} in ``trace`` (a fresh prompt's pass): `Sources`."""
    n_layers = len(trace.layers)
    _check_below(layer, "the layer", n_layers)
    names: list[str] = []
    parts: list[np.ndarray] = []
    if isinstance(model, GPT2Model):
        names += ["token embedding", "position embedding"]
        parts += [trace.token_embeddings, trace.position_embeddings]
    else:
        names.append("token embedding")
        parts.append(trace.embeddings)
    biases = np.zeros_like(trace.embeddings)
    for earlier in range(layer):
        weights = model.weights.layers[earlier]
        heads = trace.point(points.heads(earlier))  # (head, n, d_head)
        w_o = widen(weights.w_o)  # (d_model, head · d_head)
        d_head = heads.shape[-1]
        for h, z in enumerate(heads):
            names.append(f"head {earlier}.{h}")
            parts.append(z @ w_o[:, h * d_head : (h + 1) * d_head].T)
        if weights.b_o is not None:
            biases = biases + weights.b_o
        names.append(f"MLP {earlier}")
        parts.append(trace.point(points.mlp_out(earlier)))
    if any(model.weights.layers[earlier].b_o is not None for earlier in range(layer)):
        names.append("attention biases")
        parts.append(biases)
    return Sources(tuple(names), np.stack(parts))


def split_score(
    model: LlamaModel | GPT2Model, trace: DecoderTrace, layer: int, head: int, query: int
) -> ScoreSplit:
    """Head ``head`` of layer ``layer``'s score from position ``query`` to every position up to
    the last, split by the sources of the stream it read: `ScoreSplit`."""
    sources = stream_sources(model, trace, layer)
    steps = trace.layers[layer]
    n_heads = steps.q.shape[0]
    _check_below(head, "the head", n_heads)
    n = sources.parts.shape[1]
    _check_below(query, "the query position", n)
    if trace.positions[0] != 0:
        raise AttentionInputError("A score is split on a fresh prompt's pass, not a cache's.")
    stream = trace.point(points.resid(layer))
    norm = _attention_norm(model, layer)
    scales = score_parts.held_scales(stream, norm.eps, centred=norm.centred)
    normed, constant = score_parts.normed_parts(
        sources.parts, scales, norm.gamma, norm.beta, centred=norm.centred
    )
    w_q, b_q, w_k, b_k = _head_projections(model, layer, head)
    rotation = _rotation(model, n)
    at_query = None if rotation is None else tuple(t[query : query + 1] for t in rotation)
    q = score_parts.head_parts(normed[:, query : query + 1], constant, w_q, b_q, at_query)
    k = score_parts.head_parts(normed, constant, w_k, b_k, rotation)
    scale = _scale(model, layer)
    terms = score_parts.score_terms(q.parts[:, 0], k.parts, scale)
    pairs = content = None
    if rotation is not None:
        pairs = score_parts.frequency_terms(q.total[0], k.total, scale)
        content = scale * (k.unrotated.sum(axis=0) @ q.unrotated.sum(axis=0)[0])
    return ScoreSplit(
        names=(*sources.names, CONSTANT),
        terms=terms,
        scores=np.asarray(steps.scores[head, query]),
        query_scale=float(scales[query]),
        key_scales=scales,
        pairs=pairs,
        content=content,
    )


def _check_below(value: object, name: str, count: int) -> int:
    index = check_int(value, name, minimum=0)
    if index >= count:
        raise AttentionInputError(f"{name} must be below {count}, got {index}.")
    return index


@dataclass(frozen=True)
class _Norm:
    gamma: np.ndarray
    beta: np.ndarray | None
    eps: float
    centred: bool


def _attention_norm(model: LlamaModel | GPT2Model, layer: int) -> _Norm:
    weights = model.weights.layers[layer]
    if isinstance(model, GPT2Model):
        return _Norm(weights.ln_1_weight, weights.ln_1_bias, model.config.layer_norm_epsilon, True)
    return _Norm(widen(weights.attn_norm), None, model.config.rms_norm_eps, False)


def _head_projections(model: LlamaModel | GPT2Model, layer: int, head: int):
    """W_q `(d_head, d_model)`, b_q, W_k, b_k of a query head and the key head it reads."""
    weights = model.weights.layers[layer]
    config = model.config
    if isinstance(model, GPT2Model):
        d, dh = config.n_embd, config.head_dim
        q_rows = slice(head * dh, (head + 1) * dh)
        k_rows = slice(d + head * dh, d + (head + 1) * dh)
        return (weights.w_qkv[q_rows], weights.b_qkv[q_rows],
                weights.w_qkv[k_rows], weights.b_qkv[k_rows])  # fmt: skip
    dh, h_heads = config.head_dim, config.num_attention_heads
    kv_head = head // config.group_size
    q_rows = slice(head * dh, (head + 1) * dh)
    k_rows = slice(h_heads * dh + kv_head * dh, h_heads * dh + (kv_head + 1) * dh)
    b = weights.b_qkv
    return (widen(weights.w_qkv[q_rows]), None if b is None else b[q_rows],
            widen(weights.w_qkv[k_rows]), None if b is None else b[k_rows])  # fmt: skip


def _rotation(model: LlamaModel | GPT2Model, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """RoPE's (cos, sin) `(n, d_head)` for positions 0 .. n-1, as the pass built them."""
    if isinstance(model, GPT2Model):
        return None
    config = model.config
    frequencies = (
        None
        if config.rope_llama3 is None
        else llama3_frequencies(config.head_dim, config.rope_theta, *config.rope_llama3)
    )
    like = np.zeros(1, np.float32)
    return rotary_tables(
        np.arange(n, dtype=np.float64), config.head_dim, config.rope_theta, like=like,
        frequencies=frequencies,
    )  # fmt: skip


def _scale(model: LlamaModel | GPT2Model, layer: int) -> float:
    if isinstance(model, GPT2Model):
        return model.config.attention_scale(layer)
    return model.config.head_dim**-0.5
