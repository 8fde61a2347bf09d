"""The decoder page's generation: the core's (attention_core.models.generation), cached.

    continuation(model, ids, step, sampling)  the prompt plus `step` generated tokens: a prefix
                                              of the generation the page keeps, made CHUNK
                                              tokens at a time by the core's ``extend``
    page_trace(model, ids, state)             weights, q/k before and after RoPE, sink shares:
                                              the prompt's pass plus each generated token's
                                              decode row (one full pass for other ids)
    time_next_token(model, state)             the next token with the KV cache and without it

The caches hold what the model computed, so they go with it when it is let go
(`smollm.let_go_with_model`). Nothing here chooses, decodes or stops: the core does.
"""

from __future__ import annotations

import time

import numpy as np

from attention_core.decoding import DecoderCache
from attention_core.models.decoder import DecoderModel
from attention_core.models.forward import run_decoder
from attention_core.models.generation import GREEDY, Generation, Sampling, extend, prefill
from server.lane import QUICK_RUNS
from ui.decoder.trace import PageTrace, StepRow, from_pass, shown_steps, with_rows
from ui.models import smollm
from ui.widgets.byte_cache import MB, bounded_by_bytes, waiting_turn

DEFAULT_PROMPT = "The capital of France is"
MAX_TEXT_CHARS = 2_000
MAX_STEPS = 48  # generated tokens a page (or a link) may ask for
# Tokens generated per call: the next few clicks of "Next token" are then prefixes, free.
CHUNK = 8


def continuation(
    model: DecoderModel, prompt_ids: tuple[int, ...], step: int, sampling: Sampling = GREEDY
) -> Generation:
    """The prompt and `step` tokens chosen after it by `sampling` (greedy by default)."""
    chunked = min(MAX_STEPS, -(-step // CHUNK) * CHUNK)
    return _generation(prompt_ids, chunked, sampling.as_used(), id(model), model).upto(step)


@smollm.let_go_with_model
@bounded_by_bytes(32 * MB, name="decoder.generations", spinner="Generating…")
def _generation(
    prompt_ids, count: int, sampling: Sampling, model_id: int, _model: DecoderModel
) -> Generation:
    # Each CHUNK continues the one before it, which this cache usually still holds; every viewer
    # of one link, and every greedy setting, shares the entries.
    keep = shown_steps(_model)
    if count == 0:
        return prefill(_model, prompt_ids, sampling, keep=keep)
    before = _generation(prompt_ids, max(0, count - CHUNK), sampling, model_id, _model)
    return extend(_model, before, count - len(before.steps), keep=keep)


def page_trace(
    model: DecoderModel, ids: tuple[int, ...], state: Generation | None = None
) -> PageTrace:
    """What the page shows of `ids`. Given the `state` that generated them, no new forward pass:
    the prompt's pass with each generated token's row from the decode step that read it (the
    same numbers to float32 rounding, tested). Otherwise one full forward pass."""
    return _trace(ids, id(model), model, state)


@smollm.let_go_with_model
@bounded_by_bytes(16 * MB, name="decoder.traces", spinner="Running the model on the tokens…")
def _trace(
    ids: tuple[int, ...], model_id: int, _model: DecoderModel, _state: Generation | None
) -> PageTrace:
    # Keyed on the ids alone: however the trace was made, the figures find it by them.
    if _state is not None and _state.ids == ids:
        prompt = from_pass(_model, _state.prompt_ids, _state.prompt_run)
        rows = tuple(StepRow.of(step.run) for step in _state.steps)
        return with_rows(_model, ids, prompt, rows) if rows else prompt
    return from_pass(_model, ids, run_decoder(_model, np.asarray(ids), keep=shown_steps(_model)))


def cache_bytes_per_token(cache: DecoderCache) -> int:
    """What one more token adds to the cache: a key and a value row per layer and KV head."""
    return cache.bytes_used // cache.length


def time_next_token(model: DecoderModel, state: Generation) -> dict[str, float]:
    """Seconds to compute the greedy next token both ways: one step against the cache ("with")
    and the whole sequence again ("without"). Timed in the lane's turn, like every model run
    a viewer can ask for: a room pressing the button at once queues instead of holding every
    pass's steps side by side, and no timing shares the cores with another run of the model."""
    token = int(np.argmax(state.logits))
    with waiting_turn(QUICK_RUNS):
        start = time.perf_counter()
        run_decoder(model, [token], state.cache)
        cached = time.perf_counter() - start
        start = time.perf_counter()
        run_decoder(model, np.asarray([*state.ids, token]))
        without = time.perf_counter() - start
    return {"with": cached, "without": without}
