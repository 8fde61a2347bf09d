"""The decoder page's generation: the core's (attention_core.models.generation), cached.

    continuation(model, ids, step, sampling)  the prompt plus `step` generated tokens: the
                                              core's generation and what the figures draw of
                                              it (a ``PageTrace``), a prefix of what the page
                                              keeps: the core's ``extend`` makes it CHUNK
                                              tokens at a time, each chunk's trace grown by
                                              the rows of its decode steps
    time_next_token(model, state)             the next token with the KV cache and without it

The cache holds what the model computed, so it goes with the model when that is let go
(`smollm.let_go_with_model`). Nothing here chooses, decodes or stops: the core does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from attention_core.decoding import DecoderCache
from attention_core.models.decoder import DecoderModel
from attention_core.models.forward import run_decoder
from attention_core.models.generation import GREEDY, Generation, Sampling, extend, prefill
from server.kept_process import run_where_idle
from server.lane import QUICK_RUNS
from ui.decoder.trace import PageTrace, StepRow, first_tokens, from_pass, shown_steps, with_rows
from ui.models import smollm
from ui.widgets.byte_cache import MB, bounded_by_bytes, waiting_turn

DEFAULT_PROMPT = "The capital of France is"
MAX_TEXT_CHARS = 2_000
MAX_STEPS = 48  # generated tokens a page (or a link) may ask for
# Tokens generated per call: the next few clicks of "Next token" are then prefixes, free.
CHUNK = 8


@dataclass(frozen=True, eq=False)
class Continued:
    """A chunk the page keeps: the core's generation (its cache, its next logits, why it
    stopped) and `shown`, what the figures draw of its tokens."""

    state: Generation
    shown: PageTrace


def continuation(
    model: DecoderModel, prompt_ids: tuple[int, ...], step: int, sampling: Sampling = GREEDY
) -> tuple[Generation, PageTrace]:
    """The prompt and `step` tokens chosen after it by `sampling` (greedy by default), and what
    the figures draw of them with no new forward pass: the prompt's pass and each generated
    token's decode row, views of the chunk the page keeps (one full pass gives the same numbers
    to float32 rounding, tested)."""
    chunked = min(MAX_STEPS, -(-step // CHUNK) * CHUNK)
    kept = _generation(prompt_ids, chunked, sampling.as_used(), id(model), model)
    state = kept.state.upto(step)
    return state, first_tokens(model, kept.shown, state.ids)


@smollm.let_go_with_model
@bounded_by_bytes(48 * MB, name="decoder.generations", spinner="Generating…")
def _generation(
    prompt_ids, count: int, sampling: Sampling, model_id: int, _model: DecoderModel
) -> Continued:
    # Each CHUNK continues the one before it, which this cache usually still holds; every viewer
    # of one link, and every greedy setting, shares the entries.
    if count == 0 and sampling != GREEDY:
        # The prompt's pass is the same whatever chooses the tokens after it: one per prompt.
        read = _generation(prompt_ids, 0, GREEDY, model_id, _model)
        return Continued(replace(read.state, sampling=sampling), read.shown)
    keep = shown_steps(_model)
    if count == 0:
        start = run_where_idle(prefill, _model, prompt_ids, sampling, keep=keep)
        shown = from_pass(_model, start.ids, start.prompt_run)
        return Continued(start.without_kept_steps(), shown)
    before = _generation(prompt_ids, max(0, count - CHUNK), sampling, model_id, _model)
    grown = run_where_idle(extend, _model, before.state, count - len(before.state.steps), keep=keep)
    rows = tuple(StepRow.of(step.run) for step in grown.steps[len(before.state.steps) :])
    if not rows:  # it had ended, or reached the model's last position
        return Continued(grown, before.shown)
    # The trace holds what the page shows of the steps: the steps themselves need not stay.
    shown = with_rows(_model, grown.ids, before.shown, rows)
    return Continued(grown.without_kept_steps(), shown)


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
