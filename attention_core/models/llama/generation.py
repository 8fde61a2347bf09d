"""Choosing the next token and generating text one cached decoding step at a time.

Sampling            how each token is chosen: greedy, or temperature, top-k, top-p and
                    min-p with a seed
choose_next_token   one generation step's choice, drawn with ``step_rng(seed, step)``:
                    ``generate`` and the decoder page both choose here, so one seed and one
                    setting write one text everywhere
generate            prefill the prompt, then one token per step against the cache
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attention_core.decoding import DecoderCache
from attention_core.sampling import SamplingSteps, greedy_token, sample_token, sampling_steps
from attention_core.validation import AttentionInputError

from ..decoder import DecoderModel
from ..forward import run_decoder

__all__ = [
    "Generation",
    "GenerationStep",
    "Sampling",
    "choose_next_token",
    "generate",
    "next_token_probabilities",
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


def step_rng(seed: int, step: int) -> np.random.Generator:
    """One generator per generated token, seeded by (seed, step): a link replays the same draws,
    and the page can say which token the next step will draw before it is generated."""
    return np.random.default_rng([seed, step])


def choose_next_token(logits: np.ndarray, sampling: Sampling, step: int) -> int:
    """The token generation step `step` (1 for the first generated token) takes after `logits`
    `(vocab,)`: the argmax when greedy, else a draw with ``step_rng(sampling.seed, step)``."""
    return sampling.choose(logits, step_rng(sampling.seed, step))


@dataclass(frozen=True, eq=False)
class GenerationStep:
    """One generated token: its id and text, its probability, the cache after it was read."""

    token_id: int
    token: str
    probability: float
    cache_length: int
    cache_bytes: int
    seconds: float


@dataclass(frozen=True, eq=False)
class Generation:
    """prompt ids, the generated steps in order, the final cache, and why generation stopped."""

    prompt_ids: np.ndarray
    steps: tuple[GenerationStep, ...]
    cache: DecoderCache
    stop_reason: str

    @property
    def token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]


def generate(
    model: DecoderModel,
    prompt_ids: object,
    *,
    max_new_tokens: int = 20,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
    seed: int = 0,
    stop_at_eos: bool = True,
) -> Generation:
    """Prefill the prompt once, then one token per step, each step reading the cache.

    Greedy when temperature is 0; otherwise sampled from softmax(logits / T) after top-k, top-p
    and min-p, step s drawing with ``step_rng(seed, s)`` (``choose_next_token``), so a seed always
    gives the same text, the decoder page's text. Stops at the model's end token (with
    ``stop_at_eos``; SmolLM2's ``<|im_end|>``), after ``max_new_tokens``, or at the model's
    ``context_limit``. Any decoder family, each by its own pass (``run_decoder``).
    """
    sampling = Sampling(temperature, top_k or 0, top_p, min_p, seed)
    trace = run_decoder(model, prompt_ids)
    logits, cache = trace.next_token_logits, trace.cache
    prompt = trace.input_ids
    steps: list[GenerationStep] = []
    reason = "max_new_tokens"
    while len(steps) < max_new_tokens:
        start = time.perf_counter()
        token = choose_next_token(logits, sampling, len(steps) + 1)
        p = next_token_probabilities(logits, temperature or 1.0, top_k, top_p, min_p)[token]
        if stop_at_eos and token == model.eos_token_id:
            reason = "eos"
            break
        if cache.length >= model.context_limit:
            reason = "max_context"
            break
        # The new token's single query attends to the cached keys; only its k, v are appended.
        trace = run_decoder(model, [token], cache)
        logits, cache = trace.next_token_logits, trace.cache
        steps.append(
            GenerationStep(
                token_id=token,
                token=model.token_text(token),
                probability=float(p),
                cache_length=cache.length,
                cache_bytes=cache.bytes_used,
                seconds=time.perf_counter() - start,
            )
        )
    return Generation(prompt, tuple(steps), cache, reason)
