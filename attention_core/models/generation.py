"""Generation for every decoder family: choose the next token, read it against the cache, stop.

Sampling            how each token is chosen: greedy, or temperature, top-k, top-p and min-p
                    with a seed
step_rng            the generator of one generation step, seeded by (seed, step): every caller
                    draws step s with the same one, so one seed writes one text everywhere
choose_next_token   one step's choice after the logits (``draw_next_token``: from its stages)
prefill             the prompt's pass: a ``Generation`` with nothing generated yet
generate            prefill, then ``extend``
extend              the loop: one token per step, each read against the cache, until the end
                    token, the count asked for or the model's last position

A ``Generation`` keeps each step's pass, so any shorter generation of the same prompt and
settings is a prefix of it (``upto``), with its own cache and next-token logits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from attention_core.decoding import DecoderCache
from attention_core.sampling import SamplingSteps, greedy_token, sample_token, sampling_steps
from attention_core.validation import AttentionInputError, check_int

from .decoder import DecoderModel
from .forward import run_decoder
from .trace import DecoderTrace

__all__ = [
    "GREEDY",
    "Generation",
    "GenerationStep",
    "Sampling",
    "choose_next_token",
    "draw_next_token",
    "extend",
    "generate",
    "next_token_probabilities",
    "prefill",
    "step_rng",
]


def next_token_probabilities(
    logits: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
) -> np.ndarray:
    """p = softmax(logits / T) over the tokens top-k, top-p and min-p keep (others get 0),
    `(vocab,)`: the last stage of ``sampling.sampling_steps``.

    T → 0 approaches greedy decoding (all mass on the argmax); T > 1 flattens the distribution.
    top_k None or 0, top_p 1 and min_p 0 keep every token.
    """
    if not temperature > 0:
        raise AttentionInputError("The temperature must be positive (use greedy for T = 0).")
    return sampling_steps(logits, temperature, top_k or 0, top_p, min_p).probabilities


@dataclass(frozen=True)
class Sampling:
    """How each token is drawn: greedy at temperature 0, else from softmax(logits / T) after
    top-k (0: off), top-p (1: off) and min-p (0: off), seeded by `seed` and the step."""

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


GREEDY = Sampling()


def step_rng(seed: int, step: int) -> np.random.Generator:
    """One generator per generated token, seeded by (seed, step): a link replays the same draws,
    and the page can say which token the next step will draw before it is generated."""
    return np.random.default_rng([seed, step])


def choose_next_token(logits: np.ndarray, sampling: Sampling, step: int) -> int:
    """The token generation step `step` (1 for the first generated token) takes after `logits`
    `(vocab,)`: the argmax when greedy, else a draw with ``step_rng(sampling.seed, step)``."""
    return sampling.choose(logits, step_rng(sampling.seed, step))


def draw_next_token(steps: SamplingSteps, sampling: Sampling, step: int) -> int:
    """``choose_next_token`` from the stages `steps` of `sampling`, already built."""
    return sampling.draw(steps, step_rng(sampling.seed, step))


@dataclass(frozen=True, eq=False)
class GenerationStep:
    """One generated token and the decode pass that read it.

    model_probability  p(token) under the model's own distribution (T = 1, nothing removed)
    probability        p(token) as the sampler drew it (1 for greedy, which takes the argmax)
    run                the pass of this one query against the cache: its kept steps, the cache
                       after it and the logits of the token after it
    """

    token_id: int
    token: str
    model_probability: float
    probability: float
    run: DecoderTrace
    seconds: float

    @property
    def cache_length(self) -> int:
        return self.run.cache.length

    @property
    def cache_bytes(self) -> int:
        return self.run.cache.bytes_used


@dataclass(frozen=True, eq=False)
class Generation:
    """A prompt's pass and the tokens generated after it, one step each.

    stop_reason  "eos" (the model wrote its end token, the last step), "max_context" (the
                 model reads no further position) or "max_new_tokens" (the count asked for:
                 ``extend`` can go on)
    """

    prompt_ids: tuple[int, ...]
    prompt_run: DecoderTrace
    steps: tuple[GenerationStep, ...]
    sampling: Sampling
    stop_reason: str = "max_new_tokens"

    @property
    def token_ids(self) -> list[int]:
        """The generated tokens (the end token included, when the model wrote it)."""
        return [s.token_id for s in self.steps]

    @property
    def ids(self) -> tuple[int, ...]:
        """The prompt and the generated tokens."""
        return (*self.prompt_ids, *self.token_ids)

    @property
    def prompt_length(self) -> int:
        return len(self.prompt_ids)

    @property
    def last_run(self) -> DecoderTrace:
        """The pass that read the last token: the prompt's, or the last step's."""
        return self.steps[-1].run if self.steps else self.prompt_run

    @property
    def cache(self) -> DecoderCache:
        """The KV cache of every token read so far."""
        return self.last_run.cache

    @property
    def logits(self) -> np.ndarray:
        """`(vocab,)` the logits of the token after the last one."""
        return self.last_run.next_token_logits

    @property
    def next_step(self) -> int:
        """The step that will append the next token (1 for the first generated one)."""
        return len(self.steps) + 1

    def next_token(self, steps: SamplingSteps | None = None) -> int:
        """The token the next step takes: the one ``extend`` appends. `steps`, given, are the
        stages of ``self.sampling`` on ``self.logits``, already built."""
        if steps is None:
            return choose_next_token(self.logits, self.sampling, self.next_step)
        return draw_next_token(steps, self.sampling, self.next_step)

    @property
    def ended(self) -> bool:
        """True once the model wrote its end token: nothing follows it."""
        return self.stop_reason == "eos"

    def without_kept_steps(self) -> Generation:
        """This generation with every pass's kept layer steps let go, what extending it reads
        (each cache and each step's logits) kept: for a caller that has taken what it shows."""

        def light(run: DecoderTrace) -> DecoderTrace:
            return replace(run, layers=())

        steps = tuple(replace(step, run=light(step.run)) for step in self.steps)
        return replace(self, prompt_run=light(self.prompt_run), steps=steps)

    def upto(self, count: int) -> Generation:
        """The generation of the first `count` tokens: what ``generate`` would have returned if
        asked for `count` (the same draws, since step s is seeded by s)."""
        count = check_int(count, "count", minimum=0)
        if count >= len(self.steps):
            return self
        return replace(self, steps=self.steps[:count], stop_reason="max_new_tokens")


def prefill(
    model: DecoderModel,
    prompt_ids: object,
    sampling: Sampling = GREEDY,
    *,
    keep: Sequence[str] | None = (),
) -> Generation:
    """The prompt `(n,)` read in one pass keeping ``keep`` of each layer (None: every step):
    a generation that has generated nothing yet, with `sampling` for the steps to come."""
    run = run_decoder(model, prompt_ids, keep=keep)
    ids = tuple(int(i) for i in np.asarray(run.input_ids))
    return Generation(ids, run, (), sampling.as_used())


def generate(
    model: DecoderModel,
    prompt_ids: object,
    sampling: Sampling = GREEDY,
    *,
    max_new_tokens: int = 20,
    stop_at_eos: bool = True,
    keep: Sequence[str] | None = (),
) -> Generation:
    """Prefill the prompt once, then one token per step, each step reading the cache
    (``extend``). Greedy by default; a seed always gives the same text, the decoder page's.
    Any decoder family, each by its own pass (``run_decoder``)."""
    start = prefill(model, prompt_ids, sampling, keep=keep)
    return extend(model, start, max_new_tokens, stop_at_eos=stop_at_eos, keep=keep)


def extend(
    model: DecoderModel,
    generation: Generation,
    max_new_tokens: int,
    *,
    first_token: int | None = None,
    stop_at_eos: bool = True,
    keep: Sequence[str] | None = (),
) -> Generation:
    """`generation` with up to `max_new_tokens` more tokens, each chosen by its sampling
    (step s draws with ``step_rng(seed, s)``; `first_token`, given, is taken instead of the
    first choice: a fork) and read by one query against the cache.

    Stops after the model's end token (with ``stop_at_eos``: it is read and kept, the last
    step), after `max_new_tokens`, or when the cache holds ``model.context_limit`` positions
    ("max_context": no token is read). A generation that has already ended or filled the
    model's context is returned as it is.
    """
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0)
    if generation.stop_reason != "max_new_tokens":
        return generation
    sampling, steps, reason = generation.sampling, list(generation.steps), "max_new_tokens"
    run, forced = generation.last_run, None if first_token is None else int(first_token)
    for _ in range(max_new_tokens):
        if run.cache.length >= model.context_limit:
            reason = "max_context"
            break
        start = time.perf_counter()
        # The stages are built once: the draw reads them, and so do the step's probabilities.
        drawn = sampling.steps(run.next_token_logits)
        token = draw_next_token(drawn, sampling, len(steps) + 1) if forced is None else forced
        forced = None
        # The new token's single query attends to the cached keys; only its k, v are appended.
        run = run_decoder(model, [token], run.cache, keep=keep)
        steps.append(
            GenerationStep(
                token_id=token,
                token=model.token_text(token),
                model_probability=float(drawn.model_probabilities[token]),
                probability=float(drawn.probabilities[token]),
                run=run,
                seconds=time.perf_counter() - start,
            )
        )
        if stop_at_eos and token == model.eos_token_id:
            reason = "eos"
            break
    # Every step's cache becomes a view of the last one's rows: a buffer outgrown on the way
    # is then let go, where each step's own cache would hold it.
    cache = run.cache
    steps = [replace(s, run=replace(s.run, cache=cache.prefix(s.cache_length))) for s in steps]
    return replace(generation, steps=tuple(steps), stop_reason=reason)
