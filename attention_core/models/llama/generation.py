"""Choosing the next token and generating text one cached decoding step at a time."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attention_core.sampling import greedy_token, sample_token, sampling_steps
from attention_core.validation import AttentionInputError

from .forward import MAX_CONTEXT_TOKENS, run_llama
from .model import LlamaModel
from .steps import LlamaCache

__all__ = [
    "Generation",
    "GenerationStep",
    "generate",
    "next_token_probabilities",
    "sample_next_token",
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


def sample_next_token(
    logits: np.ndarray,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
    rng: np.random.Generator | None = None,
) -> int:
    """Greedy (argmax) for temperature 0, else a draw from ``next_token_probabilities``."""
    if temperature == 0:
        return greedy_token(logits)
    steps = sampling_steps(logits, temperature, top_k or 0, top_p, min_p)
    return sample_token(steps, rng if rng is not None else np.random.default_rng(0))


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
    cache: LlamaCache
    stop_reason: str

    @property
    def token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]


def generate(
    model: LlamaModel,
    prompt_ids: object,
    *,
    max_new_tokens: int = 20,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
    stop_at_eos: bool = True,
) -> Generation:
    """Prefill the prompt once, then one token per step, each step reading the cache.

    Greedy when temperature is 0; otherwise sampled from softmax(logits / T) over the top_k
    logits with ``np.random.default_rng(seed)``, so a seed always gives the same text. Stops at
    ``<|im_end|>`` (with ``stop_at_eos``), after ``max_new_tokens``, or at MAX_CONTEXT_TOKENS.
    """
    rng = np.random.default_rng(seed)
    trace = run_llama(model, prompt_ids)
    logits, cache = trace.next_token_logits, trace.cache
    prompt = trace.input_ids
    steps: list[GenerationStep] = []
    reason = "max_new_tokens"
    while len(steps) < max_new_tokens:
        start = time.perf_counter()
        token = sample_next_token(logits, temperature=temperature, top_k=top_k, rng=rng)
        p = next_token_probabilities(logits, temperature or 1.0, top_k)[token]
        if stop_at_eos and token == model.eos_token_id:
            reason = "eos"
            break
        if cache.length >= MAX_CONTEXT_TOKENS:
            reason = "max_context"
            break
        # The new token's single query attends to the cached keys; only its k, v are appended.
        trace = run_llama(model, [token], cache)
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
