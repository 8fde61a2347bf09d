"""The decoder page's generation: the prompt's pass, then one cached decode step per token.

    continuation(model, ids, step, ...)  the prompt plus `step` generated tokens, each step one
                                         decode from the previous one, cached by the tokens it
                                         reads: any sampling that draws them reuses it
    page_trace(model, ids, state)        weights, q/k before and after RoPE, sink shares: the
                                         prompt's pass plus each generated token's decode row
                                         (one full forward pass for any other sequence)

The buttons' callbacks live here, not in the page: a session keeps its widgets' callbacks, and a
function defined in the page would keep the page's model and arrays alive with it.
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
from ui.decoder.trace import PageTrace, StepRow, _page_trace, _with_rows
from ui.models import smollm
from ui.widgets.state import PageState

DEFAULT_PROMPT = "The capital of France is"
MAX_TEXT_CHARS = 2_000
MAX_STEPS = 48
TOP_K_SHOWN = 10
AUTOPLAY_SECONDS = 1.5


def restart(view: PageState) -> None:
    view.set("step", 0)


def next_step(view: PageState, room: int) -> None:
    view.set("step", min(view.value("step") + 1, room))


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


def continuation(
    model: LlamaModel,
    prompt_ids: tuple[int, ...],
    step: int,
    temperature: float,
    top_k: int,
    seed: int,
) -> Continuation:
    if temperature == 0:  # greedy takes the argmax: top-k and the seed change nothing
        top_k, seed = 0, 0
    return _continuation(prompt_ids, step, temperature, top_k, seed, id(model), model)


@dataclass(frozen=True, eq=False)
class Prefill:
    """The prompt's one forward pass: what the page shows of it, its cache and next logits."""

    trace: PageTrace
    cache: LlamaCache
    logits: np.ndarray


@smollm.let_go_with_model
@st.cache_resource(max_entries=4, show_spinner="Running the model on the prompt…")
def _prefill(prompt_ids: tuple[int, ...], model_id: int, _model: LlamaModel) -> Prefill:
    # One pass serves both generation (its cache) and the pictures (its steps).
    trace = run_llama(_model, np.asarray(prompt_ids))
    return Prefill(_page_trace(_model, prompt_ids, trace), trace.cache, trace.next_token_logits)


@dataclass(frozen=True, eq=False)
class Decoded:
    """One decode step: the last of `ids` read against the cache of the ones before it."""

    cache: LlamaCache
    logits: np.ndarray
    row: StepRow


@smollm.let_go_with_model
@st.cache_resource(max_entries=2 * MAX_STEPS, show_spinner="Generating…")
def _decoded(
    ids: tuple[int, ...], model_id: int, _model: LlamaModel, _cache: LlamaCache
) -> Decoded:
    # Keyed on the ids alone, not on how they were sampled: another temperature, top-k or seed
    # that draws the same tokens (and every viewer of one link) reuses the steps.
    trace = run_llama(_model, [ids[-1]], _cache)  # one query row against the cache
    return Decoded(trace.cache, trace.next_token_logits, StepRow.of(trace))


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


def top_k_table(model: LlamaModel, logits: np.ndarray, temperature: float, top_k: int):
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


def time_next_token(model: LlamaModel, state: Continuation, token: int) -> dict[str, float]:
    """Measure the next token both ways: one cached step vs the whole sequence again."""
    start = time.perf_counter()
    run_llama(model, [token], state.cache)
    cached = time.perf_counter() - start
    start = time.perf_counter()
    run_llama(model, np.asarray([*state.ids, token]))
    return {"with": cached, "without": time.perf_counter() - start}


_AUTOPLAY_RERUN = "decoder.autoplay_rerun"


def autoplay_tick(playing: bool, next_token) -> None:
    """One timer tick of the autoplay fragment: append a token, then rerun the page to show it.

    That page rerun runs the fragment again, which must not append a second token: the tick
    leaves a mark in the session that the next call consumes.
    """
    if st.session_state.pop(_AUTOPLAY_RERUN, False):
        return
    if playing:
        st.session_state[_AUTOPLAY_RERUN] = True
        next_token()
        st.rerun()


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
        return _with_rows(_model, ids, prompt, _state.rows) if _state.rows else prompt
    return _page_trace(_model, ids, run_llama(_model, np.asarray(ids)))
