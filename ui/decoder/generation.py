"""The decoder page's generation: the prompt's pass, then one cached decode step per token.

    continuation(model, ids, step, ...)  the prompt plus `step` generated tokens, each step one
                                         decode from the previous one, cached by the tokens it
                                         reads: any sampling that draws them reuses it
    page_trace(model, ids, state)        weights, q/k before and after RoPE, sink shares: the
                                         prompt's pass plus each generated token's decode row
                                         (one full forward pass for any other sequence)
    top_k_table(model, logits, ...)      the likeliest next tokens, as the sampler sees them
    time_next_token(model, state)        the next token with the KV cache and without it

The caches hold what the model computed, so they go with it when it is let go
(`smollm.let_go_with_model`). Nothing here computes a formula: the numbers come from
attention_core.models.llama.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.models.llama import (
    LlamaCache,
    LlamaModel,
    next_token_probabilities,
    run_llama,
    sample_next_token,
)
from ui.decoder.trace import PageTrace, StepRow, from_pass, with_rows
from ui.models import smollm

DEFAULT_PROMPT = "The capital of France is"
MAX_TEXT_CHARS = 2_000
MAX_STEPS = 48  # generated tokens a page (or a link) may ask for
TOP_K_SHOWN = 10


@dataclass(frozen=True, eq=False)
class Continuation:
    """The prompt and `step` generated tokens; `cache` holds them all, `logits` predict the next.

    rows   one ``StepRow`` per generated token, from the decode step that read it
    ended  True once the model produced <|im_end|> (it is the last id; nothing follows it)
    """

    ids: tuple[int, ...]
    prompt_length: int
    cache: LlamaCache
    logits: np.ndarray
    ended: bool
    rows: tuple[StepRow, ...] = ()


@dataclass(frozen=True, eq=False)
class Prefill:
    """The prompt's one forward pass: what the page shows of it, its cache and next logits."""

    trace: PageTrace
    cache: LlamaCache
    logits: np.ndarray


@dataclass(frozen=True, eq=False)
class Decoded:
    """One decode step: the last of `ids` read against the cache of the ones before it."""

    cache: LlamaCache
    logits: np.ndarray
    row: StepRow


def continuation(
    model: LlamaModel,
    prompt_ids: tuple[int, ...],
    step: int,
    temperature: float,
    top_k: int,
    seed: int,
) -> Continuation:
    """The prompt and `step` tokens sampled after it at `temperature` (0: greedy), from the
    `top_k` likeliest (0: all), with draws seeded by `seed` and the step."""
    if temperature == 0:  # greedy takes the argmax: top-k and the seed change nothing
        top_k, seed = 0, 0
    return _continuation(prompt_ids, step, temperature, top_k, seed, id(model), model)


@smollm.let_go_with_model
@st.cache_resource(max_entries=2 * MAX_STEPS, show_spinner="Generating…")
def _continuation(
    prompt_ids, step, temperature, top_k, seed, model_id, _model: LlamaModel
) -> Continuation:
    if step == 0:
        prompt = _prefill(prompt_ids, model_id, _model)
        return Continuation(prompt_ids, len(prompt_ids), prompt.cache, prompt.logits, False)
    before = _continuation(prompt_ids, step - 1, temperature, top_k, seed, model_id, _model)
    if before.ended:
        return before
    # One generator per step, seeded by (seed, step): a link replays the same draws.
    rng = np.random.default_rng([seed, step])
    token = sample_next_token(before.logits, temperature=temperature, top_k=top_k, rng=rng)
    ids = (*before.ids, token)
    decoded = _decoded(ids, model_id, _model, before.cache)
    rows = (*before.rows, decoded.row)
    if token == _model.eos_token_id:
        # Its row is shown; the cache and logits stay those before it: nothing follows it.
        return Continuation(ids, before.prompt_length, before.cache, before.logits, True, rows)
    return Continuation(ids, before.prompt_length, decoded.cache, decoded.logits, False, rows)


@smollm.let_go_with_model
@st.cache_resource(max_entries=4, show_spinner="Running the model on the prompt…")
def _prefill(prompt_ids: tuple[int, ...], model_id: int, _model: LlamaModel) -> Prefill:
    # One pass serves both generation (its cache) and the pictures (its steps).
    trace = run_llama(_model, np.asarray(prompt_ids))
    return Prefill(from_pass(_model, prompt_ids, trace), trace.cache, trace.next_token_logits)


@smollm.let_go_with_model
@st.cache_resource(max_entries=2 * MAX_STEPS, show_spinner="Generating…")
def _decoded(
    ids: tuple[int, ...], model_id: int, _model: LlamaModel, _cache: LlamaCache
) -> Decoded:
    # Keyed on the ids alone, not on how they were sampled: another temperature, top-k or seed
    # that draws the same tokens (and every viewer of one link) reuses the steps.
    trace = run_llama(_model, [ids[-1]], _cache)  # one query row against the cache
    return Decoded(trace.cache, trace.next_token_logits, StepRow.of(trace))


def page_trace(
    model: LlamaModel, ids: tuple[int, ...], state: Continuation | None = None
) -> PageTrace:
    """What the page shows of `ids`. Given the `state` that generated them, no new forward pass:
    the prompt's pass with each generated token's row from the decode step that produced it
    (the same numbers to float32 rounding, tested). Otherwise one full forward pass."""
    return _trace(ids, id(model), model, state)


@smollm.let_go_with_model
@st.cache_resource(max_entries=4, show_spinner="Running the model on the tokens…")
def _trace(
    ids: tuple[int, ...], model_id: int, _model: LlamaModel, _state: Continuation | None
) -> PageTrace:
    # Keyed on the ids alone: however the trace was made, the figures find it by them.
    if _state is not None and _state.ids == ids:
        prompt = _prefill(ids[: _state.prompt_length], model_id, _model).trace
        return with_rows(_model, ids, prompt, _state.rows) if _state.rows else prompt
    return from_pass(_model, ids, run_llama(_model, np.asarray(ids)))


def top_k_table(
    model: LlamaModel, logits: np.ndarray, temperature: float, top_k: int
) -> pd.DataFrame:
    """The TOP_K_SHOWN most likely next tokens with their probabilities (T and top-k applied)."""
    p = next_token_probabilities(logits, temperature or 1.0, top_k or None)
    best = np.argsort(-p)[:TOP_K_SHOWN]
    return pd.DataFrame(
        {
            "token": [repr(model.token_text(i))[1:-1] for i in best],
            "id": best.astype(int),
            "probability": np.round(p[best], 4),
        }
    )


def cache_bytes_per_token(cache: LlamaCache) -> int:
    """What one more token adds to the cache: a key and a value row per layer and KV head."""
    return cache.bytes_used // cache.length


def time_next_token(model: LlamaModel, state: Continuation) -> dict[str, float]:
    """Seconds to compute the greedy next token both ways: one step against the cache ("with")
    and the whole sequence again ("without")."""
    token = int(np.argmax(state.logits))
    start = time.perf_counter()
    run_llama(model, [token], state.cache)
    cached = time.perf_counter() - start
    start = time.perf_counter()
    run_llama(model, np.asarray([*state.ids, token]))
    return {"with": cached, "without": time.perf_counter() - start}
