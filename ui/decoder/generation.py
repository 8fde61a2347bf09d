"""The decoder page's generation: the prompt's pass, then one cached decode step per token.

    continuation(model, ids, step, ...)  the prompt plus `step` generated tokens, each chosen
                                         by the core's generation step (``choose_next_token``,
                                         the same tokens as ``generate``) and decoded from the
                                         previous one, cached by the tokens it reads: any
                                         sampling that draws them reuses it
    page_trace(model, ids, state)        weights, q/k before and after RoPE, sink shares: the
                                         prompt's pass plus each generated token's decode row
                                         (one full forward pass for any other sequence)
    time_next_token(model, state)        the next token with the KV cache and without it

The caches hold what the model computed, so they go with it when it is let go
(`smollm.let_go_with_model`). Nothing here computes a formula: the numbers come from
attention_core.models.llama.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attention_core.decoding import DecoderCache
from attention_core.models.decoder import DecoderModel
from attention_core.models.forward import run_decoder
from attention_core.models.llama.generation import Sampling, choose_next_token
from server.lane import QUICK_RUNS
from ui.decoder.trace import PageTrace, StepRow, from_pass, shown_steps, with_rows
from ui.models import smollm
from ui.widgets.byte_cache import MB, bounded_by_bytes, waiting_turn

DEFAULT_PROMPT = "The capital of France is"
MAX_TEXT_CHARS = 2_000
MAX_STEPS = 48  # generated tokens a page (or a link) may ask for
GREEDY = Sampling()


@dataclass(frozen=True, eq=False)
class Continuation:
    """The prompt and `step` generated tokens; `cache` holds them all, `logits` predict the next.

    rows   one ``StepRow`` per generated token, from the decode step that read it
    ended  True once the model produced <|im_end|> (it is the last id; nothing follows it)
    """

    ids: tuple[int, ...]
    prompt_length: int
    cache: DecoderCache
    logits: np.ndarray
    ended: bool
    rows: tuple[StepRow, ...] = ()


@dataclass(frozen=True, eq=False)
class Prefill:
    """The prompt's one forward pass: what the page shows of it, its cache and next logits."""

    trace: PageTrace
    cache: DecoderCache
    logits: np.ndarray


@dataclass(frozen=True, eq=False)
class Decoded:
    """One decode step: the last of `ids` read against the cache of the ones before it."""

    cache: DecoderCache
    logits: np.ndarray
    row: StepRow


def continuation(
    model: DecoderModel, prompt_ids: tuple[int, ...], step: int, sampling: Sampling = GREEDY
) -> Continuation:
    """The prompt and `step` tokens chosen after it by `sampling` (greedy by default)."""
    return _continuation(prompt_ids, step, sampling.as_used(), id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(16 * MB, name="decoder.continuations", spinner="Generating…")
def _continuation(
    prompt_ids, step, sampling: Sampling, model_id, _model: DecoderModel
) -> Continuation:
    if step == 0:
        prompt = _prefill(prompt_ids, model_id, _model)
        return Continuation(prompt_ids, len(prompt_ids), prompt.cache, prompt.logits, False)
    before = _continuation(prompt_ids, step - 1, sampling, model_id, _model)
    if before.ended:
        return before
    token = choose_next_token(before.logits, sampling, step)  # as the core's `generate`
    ids = (*before.ids, token)
    decoded = _decoded(ids, model_id, _model, before.cache)
    rows = (*before.rows, decoded.row)
    if token == _model.eos_token_id:
        # Its row is shown; the cache and logits stay those before it: nothing follows it.
        return Continuation(ids, before.prompt_length, before.cache, before.logits, True, rows)
    return Continuation(ids, before.prompt_length, decoded.cache, decoded.logits, False, rows)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="decoder.prompts", spinner="Running the model on the prompt…")
def _prefill(prompt_ids: tuple[int, ...], model_id: int, _model: DecoderModel) -> Prefill:
    # One pass serves both generation (its cache) and the pictures (its steps).
    trace = run_decoder(_model, np.asarray(prompt_ids), keep=shown_steps(_model))
    return Prefill(from_pass(_model, prompt_ids, trace), trace.cache, trace.next_token_logits)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="decoder.steps", spinner="Generating…")
def _decoded(
    ids: tuple[int, ...], model_id: int, _model: DecoderModel, _cache: DecoderCache
) -> Decoded:
    # Keyed on the ids alone, not on how they were sampled: another temperature, top-k or seed
    # that draws the same tokens (and every viewer of one link) reuses the steps.
    trace = run_decoder(_model, [ids[-1]], _cache)  # one query row against the cache
    return Decoded(trace.cache, trace.next_token_logits, StepRow.of(trace))


def page_trace(
    model: DecoderModel, ids: tuple[int, ...], state: Continuation | None = None
) -> PageTrace:
    """What the page shows of `ids`. Given the `state` that generated them, no new forward pass:
    the prompt's pass with each generated token's row from the decode step that produced it
    (the same numbers to float32 rounding, tested). Otherwise one full forward pass."""
    return _trace(ids, id(model), model, state)


@smollm.let_go_with_model
@bounded_by_bytes(16 * MB, name="decoder.traces", spinner="Running the model on the tokens…")
def _trace(
    ids: tuple[int, ...], model_id: int, _model: DecoderModel, _state: Continuation | None
) -> PageTrace:
    # Keyed on the ids alone: however the trace was made, the figures find it by them.
    if _state is not None and _state.ids == ids:
        prompt = _prefill(ids[: _state.prompt_length], model_id, _model).trace
        return with_rows(_model, ids, prompt, _state.rows) if _state.rows else prompt
    return from_pass(_model, ids, run_decoder(_model, np.asarray(ids), keep=shown_steps(_model)))


def cache_bytes_per_token(cache: DecoderCache) -> int:
    """What one more token adds to the cache: a key and a value row per layer and KV head."""
    return cache.bytes_used // cache.length


def time_next_token(model: DecoderModel, state: Continuation) -> dict[str, float]:
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
