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
(GQA). ``attn_only_split`` does the same for the learning page's attention-only model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core import score_parts
from attention_core.training.attn_only import AttnOnlyConfig, AttnOnlySteps, Params
from attention_core.validation import AttentionInputError, check_int

from . import points
from .bert import BertModel, BertTrace
from .gpt2 import GPT2Model
from .llama.files import widen
from .llama.forward import rope_tables
from .llama.model import LlamaModel
from .trace import DecoderTrace

__all__ = [
    "BIASES",
    "CONSTANT",
    "SPLIT_STEPS",
    "HeadSplit",
    "ScoreSplit",
    "Sources",
    "attn_only_split",
    "encoder_split",
    "head_name",
    "head_split",
    "mlp_name",
    "split_score",
    "stream_sources",
    "unsplittable",
]

# The name of the part no source carries: the norm's β through W, and the projection's bias.
CONSTANT = "bias of q and k"


# What a decoder's pass must keep of each layer for a split (``run_decoder(keep=SPLIT_STEPS)``).
SPLIT_STEPS = ("weights", "scores", "head_outputs", "ffn_output", "hidden")

# What the layers' fixed outputs add: the attention outputs' b_O (and, after a post-norm, every
# norm's β), one source.
BIASES = "output biases"


def head_name(layer: int, head: int) -> str:
    """A real model's head as its pages name it, layer and head counted from 1."""
    return f"layer {layer + 1} head {head + 1}"


def mlp_name(layer: int) -> str:
    return f"layer {layer + 1} MLP"


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
    weights       `(k_pos,)`           the model's attention weights of this query
    query_scale   float                the norm's scale r_i at the query, held
    key_scales    `(k_pos,)`           the norm's scale r_j at each key, held
    pairs         `(d_head/2, k_pos)`  the score over RoPE's pairs, fastest first (None: no
                                       rotation, positions came with the embeddings)
    content       `(k_pos,)`           the score without the rotation (None without RoPE)
    """

    names: tuple[str, ...]
    terms: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
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


@dataclass(frozen=True)
class HeadSplit:
    """Everything one head's split needs, computed once for every query of the pass.

    names     (C + 1,)      the sources, then CONSTANT
    queries   ``score_parts.HeadParts`` `(C + 1, n, d_head)` the head's q by source
    keys      ``score_parts.HeadParts`` `(C + 1, n, d_head)` its (KV head's) k by source
    scale     float         what q · k is multiplied by (1/√d_head, GPT-2's layer scaling)
    scales    `(n,)`        the norm's scale r_i at every position, held
    scores    `(n, n)`      the model's own scaled scores, before the mask
    weights   `(n, n)`      its attention weights
    """

    names: tuple[str, ...]
    queries: score_parts.HeadParts
    keys: score_parts.HeadParts
    scale: float
    scales: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    rotated: bool

    def at(self, query: int) -> ScoreSplit:
        """The split of position ``query``'s scores: `ScoreSplit`."""
        _check_below(query, "the query position", self.scores.shape[0])
        q = self.queries.parts[:, query]  # (C + 1, d_head)
        pairs = content = None
        if self.rotated:
            pairs = score_parts.frequency_terms(q.sum(axis=0), self.keys.total, self.scale)
            content = self.scale * (self.keys.unrotated @ self.queries.unrotated[query])
        return ScoreSplit(
            names=self.names,
            terms=score_parts.score_terms(q, self.keys.parts, self.scale),
            scores=self.scores[query],
            weights=self.weights[query],
            query_scale=float(self.scales[query]),
            key_scales=self.scales,
            pairs=pairs,
            content=content,
        )

    def key_sides(self) -> np.ndarray:
        """`(n, C + 1, n)` for every query i, what each source wrote at each key j added to
        s_ij, met by the whole query: ``at(i).key_side`` for all i at once."""
        return self.scale * np.einsum("id,bjd->ibj", self.queries.total, self.keys.parts)


def unsplittable(model: object) -> str:
    """Why ``model``'s scores cannot be split into its stream's sources here, in a sentence
    ("" when they can): the split holds one norm's scale between the stream and the head, and
    some families put more than that, or a cap, in the way."""
    if not isinstance(model, LlamaModel):
        return ""
    config = model.config
    pieces = []
    if config.qk_norm:
        pieces.append("a second norm on q and k (QK-norm)")
    if config.norms != "pre":
        pieces.append("a norm after each block, over what all its writers wrote together")
    if config.attn_softcap:
        pieces.append("a soft cap on the scores")
    if not pieces:
        return ""
    return (
        f"This model's attention has {' and '.join(pieces)}: each is a non-linear step between "
        "the stream's parts and the score, so the score no longer splits into one term per "
        "pair of parts. The split runs on Llama, Qwen2, Mistral, SmolLM3 and GPT-2 "
        "checkpoints; the decoder page shows this model's own attention choices step by step."
    )


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
        w_o = widen(weights.w_o).reshape(-1, *heads.shape[::2])  # (d_model, head, d_head)
        # Head h writes z_h W_O[:, h]ᵀ: its own slice of the output matrix.
        names += [head_name(earlier, h) for h in range(heads.shape[0])]
        parts += list(heads @ w_o.transpose(1, 2, 0))
        if weights.b_o is not None:
            biases = biases + weights.b_o
        names.append(mlp_name(earlier))
        parts.append(trace.point(points.mlp_out(earlier)))
    if any(model.weights.layers[earlier].b_o is not None for earlier in range(layer)):
        names.append(BIASES)
        parts.append(biases)
    return Sources(tuple(names), np.stack(parts))


def head_split(
    model: LlamaModel | GPT2Model, trace: DecoderTrace, layer: int, head: int
) -> HeadSplit:
    """Head ``head`` of layer ``layer``'s queries and keys split by the sources of the stream
    it read, in ``trace`` (a fresh prompt's pass): `HeadSplit`."""
    why = unsplittable(model)
    if why:
        raise AttentionInputError(why)
    sources = stream_sources(model, trace, layer)
    steps = trace.layers[layer]
    _check_below(head, "the head", steps.weights.shape[0])
    if trace.positions[0] != 0:
        raise AttentionInputError("A score is split on a fresh prompt's pass, not a cache's.")
    norm = _attention_norm(model, layer)
    stream = trace.point(points.resid(layer))
    scales = score_parts.held_scales(stream, norm.eps, centred=norm.centred)
    normed, constant = score_parts.normed_parts(
        sources.parts, scales, norm.gamma, norm.beta, centred=norm.centred
    )
    w_q, b_q, w_k, b_k = _head_projections(model, layer, head)
    rotation = _rotation(model, stream.shape[0], layer)
    return HeadSplit(
        names=(*sources.names, CONSTANT),
        queries=score_parts.head_parts(normed, constant, w_q, b_q, rotation),
        keys=score_parts.head_parts(normed, constant, w_k, b_k, rotation),
        scale=_scale(model, layer),
        scales=scales,
        scores=np.asarray(steps.scores[head]),
        weights=np.asarray(steps.weights[head]),
        rotated=rotation is not None,
    )


def split_score(
    model: LlamaModel | GPT2Model, trace: DecoderTrace, layer: int, head: int, query: int
) -> ScoreSplit:
    """Head ``head`` of layer ``layer``'s score from position ``query`` to every position,
    split by the sources of the stream it read: `ScoreSplit`."""
    return head_split(model, trace, layer, head).at(query)


def attn_only_split(
    config: AttnOnlyConfig, params: Params, steps: AttnOnlySteps, layer: int, head: int,
    sequence: int = 0,
) -> HeadSplit:  # fmt: skip
    """The same split for the learning page's attention-only model (``training.attn_only``),
    on sequence ``sequence`` of its pass ``steps``: no norm, so nothing is held, and no
    rotation (its positions are learned, added to the tokens). Its heads are named as the real
    models' are (``head_name``, from 1), not as TransformerLens names them (from 0)."""
    _check_below(layer, "the layer", config.n_layers)
    _check_below(head, "the head", config.n_heads)
    names = ["token embedding", "position embedding"]
    parts = [steps.embed[sequence], steps.pos_embed]
    for earlier in range(layer):
        z = steps.blocks[earlier].attention.output[sequence]  # (head, pos, d_head)
        names += [head_name(earlier, h) for h in range(config.n_heads)]
        parts += list(z @ params[f"blocks.{earlier}.attn.W_O"])  # W_O `(head, d_head, d_model)`
    if layer > 0:
        names.append(BIASES)
        parts.append(sum(params[f"blocks.{earlier}.attn.b_O"] for earlier in range(layer)))
    stacked = np.stack(np.broadcast_arrays(*parts))
    n = stacked.shape[1]
    normed, constant = score_parts.normed_parts(stacked, np.ones(n, dtype=stacked.dtype), None)
    attn = f"blocks.{layer}.attn"
    attention = steps.blocks[layer].attention
    return HeadSplit(
        names=(*names, CONSTANT),
        queries=score_parts.head_parts(
            normed, constant, params[f"{attn}.W_Q"][head].T, params[f"{attn}.b_Q"][head]
        ),
        keys=score_parts.head_parts(
            normed, constant, params[f"{attn}.W_K"][head].T, params[f"{attn}.b_K"][head]
        ),
        scale=config.d_head**-0.5,
        scales=np.ones(n),
        scores=np.asarray(attention.scaled[sequence, head]),
        weights=np.asarray(attention.weights[sequence, head]),
        rotated=False,
    )


def encoder_split(model: BertModel, trace: BertTrace, layer: int, head: int) -> HeadSplit:
    """The same split for a BERT-style encoder (MiniLM), whose norms come after each block
    (post-LN): the stream a layer reads is a LayerNorm's output, so every part passes through
    every norm on its way, each with its scale held: x → γ ⊙ r (x − mean x), and the norms' β
    and the output biases join one source, BIASES. Queries see every key (no mask)."""
    _check_below(layer, "the layer", len(trace.layers))
    _check_below(head, "the head", trace.num_heads)
    config, weights = model.config, model.weights
    eps, n = config.layer_norm_eps, trace.input_ids.shape[0]
    embeddings = weights.embeddings
    names = ["token embedding", "position embedding", "token type embedding", BIASES]
    parts = np.stack(np.broadcast_arrays(
        embeddings.word[trace.input_ids], embeddings.position[:n], embeddings.token_type[0],
        np.zeros(config.hidden_size, dtype=np.float32),
    ))  # fmt: skip

    def through(parts: np.ndarray, norm) -> np.ndarray:
        """Every part through a LayerNorm whose scale is held at its value on their sum."""
        scales = score_parts.held_scales(parts.sum(axis=0), eps, centred=True)
        normed, _ = score_parts.normed_parts(parts, scales, norm.weight, centred=True)
        normed[-1] += norm.bias  # β joins the biases, the last part
        return normed

    parts = through(parts, embeddings.layer_norm)
    for earlier in range(layer):
        block, steps = weights.layers[earlier], trace.layers[earlier]
        z = steps.attention.attention.output  # (head, n, d_head)
        w_o = block.attention.w_o.reshape(-1, *z.shape[::2])  # (d_model, head, d_head)
        writes = z @ w_o.transpose(1, 2, 0)  # (head, n, d_model)
        biases = parts[-1] + block.attention.b_o
        parts = through(np.concatenate([parts[:-1], writes, biases[None]]), block.attention_norm)
        names[-1:] = [*(head_name(earlier, h) for h in range(len(writes))), BIASES]
        ffn = steps.ffn_output[None]
        parts = through(np.concatenate([parts[:-1], ffn, parts[-1:]]), block.output_norm)
        names[-1:] = [mlp_name(earlier), BIASES]
    params = weights.layers[layer].attention
    dh = config.hidden_size // config.num_attention_heads
    rows = slice(head * dh, (head + 1) * dh)
    attention = trace.layers[layer].attention.attention
    return HeadSplit(
        names=(*names, CONSTANT),
        queries=score_parts.head_parts(parts, None, params.w_q[rows], params.b_q[rows]),
        keys=score_parts.head_parts(parts, None, params.w_k[rows], params.b_k[rows]),
        scale=attention.scale,
        scales=np.ones(n),
        scores=np.asarray(attention.scaled[head]),
        weights=np.asarray(attention.weights[head]),
        rotated=False,
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


def _rotation(
    model: LlamaModel | GPT2Model, n: int, layer: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """RoPE's (cos, sin) `(n, d_head)` for positions 0 .. n-1, as the pass built them for
    ``layer`` (None: GPT-2, or a NoPE layer, which rotates nothing)."""
    if isinstance(model, GPT2Model):
        return None
    base = model.config.rope_base(layer)
    if base is None:
        return None
    return rope_tables(model.config, 0, n, like=np.zeros(1, np.float32), base=base)


def _scale(model: LlamaModel | GPT2Model, layer: int) -> float:
    if isinstance(model, GPT2Model):
        return model.config.attention_scale(layer)
    return model.config.scale
