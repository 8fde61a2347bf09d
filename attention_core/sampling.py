"""Choosing the next token: temperature, top-k, top-p (nucleus) and min-p, each a stage over one
row of logits `(vocab,)` that returns its steps, composed in the order Hugging Face
``transformers``' ``generate`` applies them, and a seeded draw from what is left.

    temperature   z' = z / T                   T → 0: all mass on the argmax (greedy decoding)
    top-k         keep z_i ≥ z_(k), the k-th largest logit (a token tied with it stays)
    top-p         keep the smallest set of likeliest tokens whose mass reaches p: in order of
                  probability, token i stays while the mass before it, Σ_{j<i} p_(j), is < p
                  (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration")
    min-p         keep p_i ≥ min_p · max_j p_j (Nguyen et al. 2024, "Turning Up the Heat")

A stage sets the logits it removes to −inf, so the next stage's softmax renormalises over what
is left: p_after = p_before · kept / Σ_kept p_before. At its neutral setting (T = 1, k = 0,
p = 1, min_p = 0) a stage keeps every token. The order is transformers' (temperature, top-k,
top-p, min-p), and the kept sets are those of its ``TopKLogitsWarper``, ``TopPLogitsWarper`` and
``MinPLogitsWarper`` on the same logits (tests/test_sampling.py).

    sampling_steps(logits, T, k, p, min_p)   every stage in order -> SamplingSteps
    sample_token(steps, rng)                 a seeded draw from the last stage's distribution
    continuation_probability(p_1 … p_L)      Π p_t and Σ log p_t of a continuation

NumPy only: a decoder's logits are one NumPy row. Probabilities are float64 whatever the logits'
dtype, so a cumulative mass compared with p does not move with float32 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .softmax import stable_softmax
from .validation import AttentionInputError, as_float_array, check_int, check_real

__all__ = [
    "ContinuationProbability",
    "FilterSteps",
    "MinPSteps",
    "SamplingSteps",
    "TopPSteps",
    "apply_temperature",
    "continuation_probability",
    "greedy_token",
    "min_p_filter",
    "sample_token",
    "sampling_steps",
    "top_k_filter",
    "top_p_filter",
]


@dataclass(frozen=True, eq=False)
class FilterSteps:
    """One stage of choosing the next token among `vocab` tokens, in the order it happens.

    name       "temperature", "top-k", "top-p" or "min-p"
    setting    its parameter: T, k, p or min_p
    logits     `(vocab,)` the logits it was given (−inf: removed by an earlier stage)
    before     `(vocab,)` softmax(logits), the distribution it was given
    kept       `(vocab,)` bool, True = may still be drawn after it
    filtered   `(vocab,)` the logits it passes on: divided by T, or −inf where it removed a token
    after      `(vocab,)` softmax(filtered); for a filter, before · kept / kept_mass
    kept_mass  Σ before over kept: the share of the distribution it let through
    """

    name: str
    setting: float
    logits: np.ndarray
    before: np.ndarray
    kept: np.ndarray
    filtered: np.ndarray
    after: np.ndarray
    kept_mass: float

    @property
    def removed(self) -> np.ndarray:
        """`(vocab,)` bool: the tokens this stage took away (they could be drawn before it)."""
        return np.isfinite(self.logits) & ~self.kept

    @property
    def kept_count(self) -> int:
        return int(np.count_nonzero(self.kept))


@dataclass(frozen=True, eq=False)
class TopPSteps(FilterSteps):
    """Top-p's steps, with the line it reads: order `(vocab,)` token ids, likeliest first (ties:
    the lower id first, as greedy's); cumulative `(vocab,)` Σ before over order[: i + 1], which
    the nucleus follows until it reaches p."""

    order: np.ndarray
    cumulative: np.ndarray


@dataclass(frozen=True, eq=False)
class MinPSteps(FilterSteps):
    """Min-p's steps; `threshold` is the probability a token needs to stay."""

    @property
    def threshold(self) -> float:
        """min_p · max_j p_j: the bar rises with the top token's probability."""
        return self.setting * float(self.before.max())


@dataclass(frozen=True, eq=False)
class SamplingSteps:
    """Every stage of choosing the next token, in transformers' order: temperature, top-k,
    top-p, min-p. Each stage's `filtered` logits are the next one's `logits`."""

    temperature: FilterSteps
    top_k: FilterSteps
    top_p: TopPSteps
    min_p: MinPSteps

    @property
    def stages(self) -> tuple[FilterSteps, ...]:
        return (self.temperature, self.top_k, self.top_p, self.min_p)

    @property
    def logits(self) -> np.ndarray:
        """`(vocab,)` the logits it started from (float64)."""
        return self.temperature.logits

    @property
    def model_probabilities(self) -> np.ndarray:
        """`(vocab,)` softmax(logits) at T = 1: the model's own distribution, nothing removed."""
        return self.temperature.before

    @property
    def probabilities(self) -> np.ndarray:
        """`(vocab,)` the distribution a token is drawn from, after every stage."""
        return self.min_p.after

    @property
    def kept(self) -> np.ndarray:
        """`(vocab,)` bool: the tokens that may be drawn."""
        return self.min_p.kept

    @property
    def kept_mass(self) -> float:
        """The kept set's share of the tempered distribution (the product of the filters' kept
        masses: each filter's mass is a share of what the one before it kept)."""
        return float(self.temperature.after[self.kept].sum())


def greedy_token(logits: object) -> int:
    """Greedy decoding's choice: argmax_i z_i (the lowest id if several tie)."""
    return int(np.argmax(_checked_logits(logits)))


def apply_temperature(logits: object, temperature: float) -> FilterSteps:
    """p_after = softmax(z / T) `(vocab,)`. T < 1 sharpens the distribution (the likeliest
    tokens gain), T > 1 flattens it, T = 1 leaves it as the model made it; no token is removed.

    T = 0 is the limit T → 0⁺: every token but the argmax is removed (greedy decoding; the
    lowest id if several tie), so the steps show greedy as the coldest sampler.
    """
    z = _checked_logits(logits)
    t = check_real(temperature, "The temperature")
    if t < 0:
        raise AttentionInputError(
            f"The temperature must be 0 (greedy) or positive, got {t:g}: it divides the logits."
        )
    if t == 0:
        kept = np.arange(z.size) == greedy_token(z)
        return _steps(FilterSteps, "temperature", t, z, kept, np.where(kept, z, -np.inf))
    return _steps(FilterSteps, "temperature", t, z, np.isfinite(z), z / t)


def top_k_filter(logits: object, k: int) -> FilterSteps:
    """Keep the k largest logits: z_i ≥ z_(k), the k-th largest. A token tied with the k-th
    stays too (transformers' ``TopKLogitsWarper`` does the same); k = 0 or k ≥ vocab keeps all.
    """
    z = _checked_logits(logits)
    k = check_int(k, "top-k", minimum=0)
    kept = np.isfinite(z)
    if 0 < k < z.size:
        kth_largest = np.partition(z, -k)[-k]
        kept &= z >= kth_largest
    return _steps(FilterSteps, "top-k", k, z, kept)


def top_p_filter(logits: object, p: float) -> TopPSteps:
    """Keep the nucleus: the smallest set of likeliest tokens whose probability mass reaches p.

        order      tokens by z_i, likeliest first (ties: the lower id first)
        mass_i     Σ_{j before i in order} p_j
        kept_i     mass_i < p

    The likeliest token always stays (its mass_i is 0 < p); p = 1 keeps every token. This is
    transformers' ``TopPLogitsWarper`` read the other way: it sorts ascending and removes the
    tokens whose cumulative mass from the bottom is ≤ 1 − p, which is mass_i ≥ p. A token of
    probability 0 comes last, after the whole mass (≥ p): it never joins the nucleus.
    """
    z = _checked_logits(logits)
    p = check_real(p, "top-p")
    if not 0 < p <= 1:
        raise AttentionInputError(
            f"top-p must be in (0, 1], got {p:g}: it is the probability mass to keep "
            "(1 keeps every token)."
        )
    before = stable_softmax(z)
    # By logit, as transformers sorts: the same order as by probability, without the ties that
    # rounding makes among nearly equal probabilities (ties: the lower id first, like argmax).
    order = np.argsort(-z, kind="stable")
    cumulative = np.cumsum(before[order])
    kept = np.isfinite(z)
    if p < 1:
        # The mass of the likelier tokens, before each one: 0 for the top token.
        mass_before = np.concatenate(([0.0], cumulative[:-1]))
        kept[order] &= mass_before < p
    return _steps(TopPSteps, "top-p", p, z, kept, before=before, order=order, cumulative=cumulative)


def min_p_filter(logits: object, min_p: float) -> MinPSteps:
    """Keep the tokens with p_i ≥ min_p · max_j p_j; min_p = 0 keeps all, and the top token
    always stays. The bar is relative: when the model is sure (a large max) few tokens pass,
    when it hesitates many do, which a fixed top-k or top-p cannot follow."""
    z = _checked_logits(logits)
    min_p = check_real(min_p, "min-p")
    if not 0 <= min_p <= 1:
        raise AttentionInputError(
            f"min-p must be in [0, 1], got {min_p:g}: a token needs min-p times the top "
            "token's probability to stay (0 keeps every token)."
        )
    before = stable_softmax(z)
    kept = np.isfinite(z) & (before >= min_p * before.max())
    return _steps(MinPSteps, "min-p", min_p, z, kept, before=before)


def sampling_steps(
    logits: object,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
) -> SamplingSteps:
    """Every stage of choosing the next token from `logits` `(vocab,)`, in transformers' order:

        p = softmax(z / T)  ->  top-k  ->  top-p  ->  min-p  ->  draw from what is left

    Each stage reads the logits the one before it passed on, so top-p measures its mass in the
    distribution top-k left (renormalised), as ``generate`` does. T = 0 leaves the argmax alone.
    """
    scaled = apply_temperature(logits, temperature)
    by_k = top_k_filter(scaled.filtered, top_k)
    by_p = top_p_filter(by_k.filtered, top_p)
    return SamplingSteps(scaled, by_k, by_p, min_p_filter(by_p.filtered, min_p))


def sample_token(steps: SamplingSteps, rng: np.random.Generator) -> int:
    """A token id drawn from ``steps.probabilities`` with `rng`: the same generator state
    (``np.random.default_rng(seed)``) draws the same token."""
    p = steps.probabilities
    return int(rng.choice(p.size, p=p))


@dataclass(frozen=True, eq=False)
class ContinuationProbability:
    """How likely a continuation x_1 … x_L of a prefix is, by the chain rule.

    token_probabilities  `(L,)` p(x_t | prefix, x_<t), each from the distribution x_t came from
    log_probability      Σ_t log p(x_t | …): a sum, which does not underflow as a product does
    probability          Π_t p(x_t | …) = exp(log_probability)
    """

    token_probabilities: np.ndarray
    log_probability: float

    @property
    def probability(self) -> float:
        return float(np.exp(self.log_probability))


def continuation_probability(token_probabilities: object) -> ContinuationProbability:
    """log P(x_1 … x_L | prefix) = Σ_t log p(x_t | prefix, x_<t), from the L probabilities."""
    p = as_float_array(token_probabilities, "The token probabilities", min_ndim=1, max_ndim=1)
    p = p.astype(np.float64)
    if np.any((p < 0) | (p > 1)):
        raise AttentionInputError(
            f"The token probabilities must lie in [0, 1], got {p.min():g} to {p.max():g}."
        )
    with np.errstate(divide="ignore"):  # a token of probability 0 makes the whole text log 0
        return ContinuationProbability(p, float(np.log(p).sum()))


def _checked_logits(logits: object) -> np.ndarray:
    """float64 `(vocab,)` logits; −inf marks a token removed by an earlier stage."""
    z = as_float_array(logits, "The logits", min_ndim=1, max_ndim=1, allow_neg_inf=True)
    if not np.isfinite(z).any():
        raise AttentionInputError(
            "Every logit is −inf: no token is left to choose. Loosen the filters (a larger "
            "top-k or top-p, a smaller min-p)."
        )
    return z.astype(np.float64, copy=False)


def _steps(
    kind: type[FilterSteps],
    name: str,
    setting: float,
    logits: np.ndarray,
    kept: np.ndarray,
    filtered: np.ndarray | None = None,
    *,
    before: np.ndarray | None = None,
    **extra: np.ndarray,
) -> FilterSteps:
    """A stage's steps: removed tokens' logits set to −inf (unless `filtered` is given), and the
    distributions on either side of it."""
    before = stable_softmax(logits) if before is None else before
    if filtered is None:
        filtered = np.where(kept, logits, -np.inf)
    after = stable_softmax(filtered)
    kept_mass = float(before[kept].sum())
    return kind(name, float(setting), logits, before, kept, filtered, after, kept_mass, **extra)
