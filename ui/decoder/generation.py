"""The decoder page's generation: the prompt's pass, then one cached decode step per token.

    Sampling                             how each token is drawn: greedy, or temperature,
                                         top-k, top-p and min-p with a seed
    continuation(model, ids, step, ...)  the prompt plus `step` generated tokens, each step one
                                         decode from the previous one, cached by the tokens it
                                         reads: any sampling that draws them reuses it
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

from attention_core.models.llama import LlamaCache, LlamaModel, run_llama
from attention_core.sampling import SamplingSteps, greedy_token, sample_token, sampling_steps
from server.lane import QUICK_RUNS
from ui.decoder.trace import SHOWN_STEPS, PageTrace, StepRow, from_pass, with_rows
from ui.models import smollm
from ui.widgets.byte_cache import MB, bounded_by_bytes, waiting_turn

DEFAULT_PROMPT = "The capital of France is"
MAX_TEXT_CHARS = 2_000
MAX_STEPS = 48  # generated tokens a page (or a link) may ask for


@dataclass(frozen=True)
class Sampling:
    """How the page draws each token: greedy at temperature 0, else from softmax(logits / T)
    after top-k (0: off), top-p (1: off) and min-p (0: off), seeded by `seed` and the step."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def as_used(self) -> Sampling:
        """The settings that change what is drawn: greedy takes the argmax, so the filters and
        the seed change nothing, and one cache entry serves every greedy link."""
        return Sampling() if self.greedy else self

    @property
    def filters(self) -> tuple[float, int, float, float]:
        """(T, k, p, min_p) as used: what the stages depend on (the seed only picks the draw)."""
        used = self.as_used()
        return (used.temperature, used.top_k, used.top_p, used.min_p)

    def steps(self, logits: np.ndarray) -> SamplingSteps:
        """Every stage of choosing from `logits` with these settings (T = 0: the argmax)."""
        return sampling_steps(logits, *self.filters)

    def draw(self, steps: SamplingSteps, rng: np.random.Generator) -> int:
        """The token these settings take from `steps`: the argmax, or a draw with `rng`."""
        return greedy_token(steps.logits) if self.greedy else sample_token(steps, rng)

    def choose(self, logits: np.ndarray, rng: np.random.Generator) -> int:
        """The token these settings take after `logits` (greedy builds no stages)."""
        return greedy_token(logits) if self.greedy else self.draw(self.steps(logits), rng)


def step_rng(seed: int, step: int) -> np.random.Generator:
    """One generator per generated token, seeded by (seed, step): a link replays the same draws,
    and the page can say which token the next step will draw before it is generated."""
    return np.random.default_rng([seed, step])


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
    model: LlamaModel, prompt_ids: tuple[int, ...], step: int, sampling: Sampling = Sampling()
) -> Continuation:
    """The prompt and `step` tokens chosen after it by `sampling` (greedy by default)."""
    return _continuation(prompt_ids, step, sampling.as_used(), id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(16 * MB, name="decoder.continuations", spinner="Generating…")
def _continuation(
    prompt_ids, step, sampling: Sampling, model_id, _model: LlamaModel
) -> Continuation:
    if step == 0:
        prompt = _prefill(prompt_ids, model_id, _model)
        return Continuation(prompt_ids, len(prompt_ids), prompt.cache, prompt.logits, False)
    before = _continuation(prompt_ids, step - 1, sampling, model_id, _model)
    if before.ended:
        return before
    token = sampling.choose(before.logits, step_rng(sampling.seed, step))
    ids = (*before.ids, token)
    decoded = _decoded(ids, model_id, _model, before.cache)
    rows = (*before.rows, decoded.row)
    if token == _model.eos_token_id:
        # Its row is shown; the cache and logits stay those before it: nothing follows it.
        return Continuation(ids, before.prompt_length, before.cache, before.logits, True, rows)
    return Continuation(ids, before.prompt_length, decoded.cache, decoded.logits, False, rows)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="decoder.prompts", spinner="Running the model on the prompt…")
def _prefill(prompt_ids: tuple[int, ...], model_id: int, _model: LlamaModel) -> Prefill:
    # One pass serves both generation (its cache) and the pictures (its steps).
    trace = run_llama(_model, np.asarray(prompt_ids), keep=SHOWN_STEPS)
    return Prefill(from_pass(_model, prompt_ids, trace), trace.cache, trace.next_token_logits)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="decoder.steps", spinner="Generating…")
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
@bounded_by_bytes(16 * MB, name="decoder.traces", spinner="Running the model on the tokens…")
def _trace(
    ids: tuple[int, ...], model_id: int, _model: LlamaModel, _state: Continuation | None
) -> PageTrace:
    # Keyed on the ids alone: however the trace was made, the figures find it by them.
    if _state is not None and _state.ids == ids:
        prompt = _prefill(ids[: _state.prompt_length], model_id, _model).trace
        return with_rows(_model, ids, prompt, _state.rows) if _state.rows else prompt
    return from_pass(_model, ids, run_llama(_model, np.asarray(ids), keep=SHOWN_STEPS))


def cache_bytes_per_token(cache: LlamaCache) -> int:
    """What one more token adds to the cache: a key and a value row per layer and KV head."""
    return cache.bytes_used // cache.length


def time_next_token(model: LlamaModel, state: Continuation) -> dict[str, float]:
    """Seconds to compute the greedy next token both ways: one step against the cache ("with")
    and the whole sequence again ("without"). Timed in the lane's turn, like every model run
    a viewer can ask for: a room pressing the button at once queues instead of holding every
    pass's steps side by side, and no timing shares the cores with another run of the model."""
    token = int(np.argmax(state.logits))
    with waiting_turn(QUICK_RUNS):
        start = time.perf_counter()
        run_llama(model, [token], state.cache)
        cached = time.perf_counter() - start
        start = time.perf_counter()
        run_llama(model, np.asarray([*state.ids, token]))
        without = time.perf_counter() - start
    return {"with": cached, "without": without}
