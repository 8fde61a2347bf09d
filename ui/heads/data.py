"""The heads page's computations, once per distinct input and shared by every viewer, each cache
bounded in bytes (ui.widgets.byte_cache).

    prompt_readout(model, ids, position)      the patterns of one forward pass over the prompt
                                              (one per prompt, whichever the position), the
                                              stream at `position` split by writer, the lens
    attribution(model, readout, token, vs)    a logit (difference) split by writer
    probe_roles(kind, seed, length)           every head's roles on a repeated random probe
    causal_check(seed, length, k)             the loss on the repeated half without the top-k
                                              induction heads, and without k random heads
    explanation(kind, text, layer, query)     four measures of where a token's vector comes from

Nothing here computes a formula: the numbers come from attention_core (models.readouts,
head_roles, logit_lens, token_attribution, probing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.head_roles import HeadRoles, repeated_tokens, strongest_heads
from attention_core.logit_lens import LogitAttribution, LogitLens
from attention_core.models import readouts
from attention_core.models.decoder import DecoderModel
from attention_core.models.forward import run_decoder
from attention_core.models.hiding import decoder_hiding_effects, encoder_hiding_effects
from attention_core.models.trace import DecoderTrace
from attention_core.probing import attention_rollout
from attention_core.token_attribution import rank_correlation
from server.kept_process import run_where_idle, run_where_kept
from server.lane import LONG_RUNS
from ui.models import minilm, page_model, smollm
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of

# The page's prompt is cut to this many tokens: a pass keeps every head's pattern, and a longer
# prompt would show nothing the lens needs that a shorter one does not.
MAX_PROMPT_TOKENS = 64
# The lens table lists this many likeliest tokens after each stage.
TOP_TOKENS = 3
# The causal check removes up to this many heads, one more per step.
MAX_ABLATED = 8
MEASURES = {
    "attention": "attention (heads averaged)",
    "rollout": "attention rollout",
    "norm": "‖α·v·W_O‖ (what the token adds)",
    "hiding": "effect of hiding the token",
}
MODELS = {"smollm2": smollm.MODEL_NAME, "minilm": minilm.MODEL_NAME}
# What the prompt's pass keeps of each layer: the patterns and values shown, and what the
# stream's split by writer reads (readouts.decoder_parts).
READ_STEPS = ("weights", "v", "head_outputs", "hidden", "ffn_output")


@dataclass(frozen=True, eq=False)
class PromptReadout:
    """What the page reads from one pass over the prompt.

    ids `(n,)`, tokens, weights `(layer, head, n, n)`, values `(layer, kv_head, n, d_head)`,
    next_logits `(vocab,)` at `position`, parts (the stream at `position` split by writer),
    lens (that stream read after every layer) and its TOP_TOKENS likeliest tokens by stage;
    digest (of the model and the inputs) stands for it in a figure's key.
    """

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    position: int
    weights: np.ndarray
    values: np.ndarray
    next_logits: np.ndarray
    parts: readouts.ResidualParts
    lens: LogitLens
    top_tokens: np.ndarray
    digest: str


def prompt_readout(model: DecoderModel, ids: tuple[int, ...], position: int) -> PromptReadout:
    return _prompt_readout(ids, position, id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(32 * MB, name="heads.prompt")  # 2.8 MB the default prompt, 30 MB at 64 tokens
def _prompt_pass(ids, model_id, _model: DecoderModel) -> DecoderTrace:
    # One pass per prompt, whichever token the stream is read at. No logits: the lens's last
    # stage is the model's own at the token read, and a 262k vocabulary (Gemma 3) would hold a
    # megabyte of them per token.
    return run_where_idle(run_decoder, _model, np.asarray(ids), keep=READ_STEPS)


@smollm.let_go_with_model
@bounded_by_bytes(16 * MB, name="heads.readout")
def _prompt_readout(ids, position, model_id, _model: DecoderModel) -> PromptReadout:
    trace = _prompt_pass(ids, model_id, _model)
    parts = readouts.decoder_parts(_model, trace, position)
    lens = readouts.decoder_lens(_model, parts)
    return PromptReadout(
        ids=ids,
        tokens=tuple(_model.token_text(i) for i in ids),
        position=position,
        weights=trace.attention_weights,
        values=np.stack([layer.v for layer in trace.layers]),
        next_logits=lens.logits[-1],
        parts=parts,
        lens=lens,
        top_tokens=lens.top(TOP_TOKENS),
        digest=digest_of(model_id, ids, position),
    )


def attribution(
    model: DecoderModel, readout: PromptReadout, token: int, versus: int | None
) -> LogitAttribution:
    return _attribution(readout.ids, readout.position, token, versus, id(model), model, readout)


@smollm.let_go_with_model
@bounded_by_bytes(4 * MB, name="heads.attribution")
def _attribution(ids, position, token, versus, model_id, _model, _readout) -> LogitAttribution:
    return readouts.decoder_attribution(_model, _readout.parts, token, versus)


@dataclass(frozen=True, eq=False)
class ProbeRoles:
    """A probe: `(2L,)` ids, the tokens the model read (the encoder's with [CLS] and [SEP]
    around them), the weights `(layer, head, n, n)` on them, and the roles found there;
    digest (of the model and the inputs) stands for it in a figure's key."""

    ids: np.ndarray
    tokens: tuple[str, ...]
    weights: np.ndarray
    roles: HeadRoles
    digest: str


def probe_roles(kind: str, seed: int, length: int) -> ProbeRoles:
    """Every head's roles on `length` random tokens repeated twice, for `kind` "minilm" or a
    decoder's name ("smollm2", a listed one: the model must be loaded)."""
    model = model_of(kind)
    return _probe_roles(kind, seed, length, id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="heads.roles", lane=LONG_RUNS)  # ~1.7 MB an entry
def _probe_roles(kind, seed, length, model_id, _model) -> ProbeRoles:
    if kind != "minilm":
        pool = readouts.decoder_probe_pool(_model.config.vocab_size)
        ids = repeated_tokens(pool, length, seed)
        weights, roles = run_where_kept(readouts.decoder_roles, _model, ids)
        tokens = tuple(_model.token_text(i) for i in ids)
    else:
        ids = repeated_tokens(readouts.ENCODER_PROBE_POOL, length, seed)
        weights, roles = readouts.encoder_roles(_model, ids)
        words = (_model.tokenizer.id_to_token(int(i)) for i in ids)
        tokens = ("[CLS]", *words, "[SEP]")
    digest = digest_of(kind, seed, length, model_id)
    return ProbeRoles(ids=ids, tokens=tokens, weights=weights, roles=roles, digest=digest)


@dataclass(frozen=True, eq=False)
class CausalCheck:
    """Loss on the repeated half (nats) with the top-k induction heads removed and with k
    random heads removed, `(MAX_ABLATED + 1,)` each for k = 0 .. MAX_ABLATED; digest (of the
    model and the inputs) stands for it in a figure's key."""

    ablated: np.ndarray
    random: np.ndarray
    heads: tuple[tuple[int, int], ...]
    digest: str


def causal_check(kind: str, seed: int, length: int) -> CausalCheck:
    """The causal check on decoder `kind` (a name ``page_model.named_decoder`` knows)."""
    model = model_of(kind)
    return _causal_check(kind, seed, length, id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(MB, name="heads.causal", lane=LONG_RUNS)
def _causal_check(kind, seed, length, model_id, _model: DecoderModel) -> CausalCheck:
    probe = _probe_roles(kind, seed, length, model_id, _model)
    layers, heads = probe.roles.induction.shape
    top = [(layer, head) for layer, head, _ in strongest_heads(probe.roles.induction, MAX_ABLATED)]
    # The random heads are drawn from those that are not among the top ones, seeded.
    others = [i for i in range(layers * heads) if divmod(i, heads) not in top]
    drawn = np.random.default_rng(seed).choice(others, size=MAX_ABLATED, replace=False)
    ablated, random = [], []
    for k in range(MAX_ABLATED + 1):
        drawn_heads = [divmod(int(i), heads) for i in drawn[:k]]
        for chosen, losses in ((top[:k], ablated), (drawn_heads, random)):
            mask = np.ones((layers, heads), dtype=np.float32)
            for layer, head in chosen:
                mask[layer, head] = 0.0
            losses.append(
                run_where_kept(readouts.repeated_half_loss, _model, probe.ids, length, mask)
            )
    digest = digest_of(seed, length, model_id)
    return CausalCheck(np.array(ablated), np.array(random), tuple(top), digest)


@dataclass(frozen=True, eq=False)
class Explanation:
    """Four measures `(k,)` over the keys the query sees, their tokens, and their rank
    correlations `(4, 4)` (Spearman's ρ), for one query of one layer; digest (of the model and
    the inputs) stands for it in a figure's key."""

    tokens: tuple[str, ...]
    query: int
    measures: dict[str, np.ndarray]
    correlations: np.ndarray
    digest: str


def explanation(kind: str, ids: tuple[int, ...], layer: int, query: int) -> Explanation:
    model = model_of(kind)
    return _explanation(kind, ids, layer, query, id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="heads.explanation", lane=LONG_RUNS)
def _explanation(kind, ids, layer, query, model_id, _model) -> Explanation:
    ids_array = np.asarray(ids, dtype=np.int64)
    if kind != "minilm":
        trace = run_where_kept(run_decoder, _model, ids_array, keep=("weights", "v"))
        weights = trace.attention_weights
        norms = readouts.decoder_contributions(_model, trace, layer, query)
        hiding = run_where_kept(decoder_hiding_effects, _model, ids_array, query)
        tokens = tuple(_model.token_text(i) for i in ids)
    else:
        from attention_core.models.bert import run_bert_ids

        trace = run_bert_ids(_model, ids_array)
        weights = trace.attention_weights
        norms = readouts.encoder_contributions(_model, trace, layer, query)
        hiding = encoder_hiding_effects(_model, ids_array, query)
        tokens = trace.tokens
    seen = slice(0, query + 1) if kind != "minilm" else slice(None)
    measures = {
        "attention": weights[layer, :, query, seen].mean(axis=0),
        "rollout": attention_rollout(weights[: layer + 1]).rollout[query, seen],
        "norm": norms,
        "hiding": hiding,
    }
    names = list(measures)
    correlations = np.array(
        [[rank_correlation(measures[a], measures[b]) for b in names] for a in names]
    )
    digest = digest_of(kind, ids, layer, query, model_id)
    return Explanation(tokens[seen], query, measures, correlations, digest)


def model_of(kind: str):
    """The model `kind` names: "minilm", or a decoder's name (``page_model.named_decoder``)."""
    return (minilm.load_model() if kind == "minilm" else page_model.named_decoder(kind)).model
