"""What a head does, found by probes: sequences built so that one kind of head stands out.

Given self-attention weights `(..., head, q_pos, k_pos)` (rows are queries, each sums to 1) of a
probe sequence, every head gets one score per role, a number in [0, 1] (positions from 0,
`w[i, j]` the weight query i gives key j, `L` the period of a sequence repeated twice):

    previous    = mean over i = 1..n-1  of w[i, i-1]       the token just before
    first       = mean over i = 1..n-1  of w[i, 0]         the first token (an attention sink;
                                                           query 0 can only see itself)
    duplicate   = mean over i = L..2L-1 of w[i, i-L]       the same token, one period back
    induction   = mean over i = L..2L-1 of w[i, i-L+1]     the token that FOLLOWED the same
                                                           token one period back: "A B ... A ->
                                                           attend to B", what an induction head
                                                           does (Olsson et al. 2022)
    share(S)    = mean over i of Σ_{j ∈ S} w[i, j]         weight on a set of positions, e.g.
                                                           [CLS], [SEP] or punctuation (Clark
                                                           et al. 2019)

On a sequence of random tokens repeated twice, nothing but the repetition lets a head predict
where to look, so a high induction score is the signature of an induction head (the same probe
TransformerLens's head detectors use). `losses.token_losses` is the causal check's measure: an
induction head's job shows as the loss on the repeated half, low with the head and higher
without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .validation import AttentionInputError, as_float_array, as_pattern, check_int

__all__ = [
    "HeadRoles",
    "duplicate_token_scores",
    "first_token_scores",
    "head_roles",
    "induction_scores",
    "previous_token_scores",
    "repeated_tokens",
    "strongest_heads",
    "token_share",
]

# Roles scored on every probe sequence, in the order the page lists them.
ROLES = ("previous", "induction", "duplicate", "first")


def repeated_tokens(pool: Sequence[int], length: int, seed: int) -> np.ndarray:
    """`(2·length,)` ids: `length` tokens drawn from `pool` without replacement, then again.

    Seeded: one seed always gives the same sequence. Drawn without replacement so no token
    repeats inside a half: the only repetition is the one the probe is about.
    """
    pool = np.asarray(pool, dtype=np.int64)
    length = check_int(length, "the probe length", minimum=2)
    seed = check_int(seed, "the seed", minimum=0)
    if length > pool.size:
        raise AttentionInputError(
            f"A probe of {length} distinct tokens needs a pool of at least {length}, got "
            f"{pool.size}."
        )
    half = np.random.default_rng(seed).choice(pool, size=length, replace=False)
    return np.concatenate([half, half])


def _repeat(w: np.ndarray, period: int, start: int) -> tuple[int, np.ndarray]:
    """The period, and the second half's query positions `(L,)`: start + L .. start + 2L - 1."""
    period = check_int(period, "the period", minimum=1)
    start = check_int(start, "the probe's start", minimum=0)
    if w.shape[-1] < start + 2 * period:
        raise AttentionInputError(
            f"The weights cover {w.shape[-1]} tokens, but a sequence of period {period} "
            f"repeated twice from position {start} needs {start + 2 * period}."
        )
    return period, np.arange(start + period, start + 2 * period)


def previous_token_scores(weights: object) -> np.ndarray:
    """`(..., head)`: mean weight a query gives the key just before it (queries 1..n-1)."""
    w = as_pattern(weights)
    return np.diagonal(w, offset=-1, axis1=-2, axis2=-1).mean(axis=-1)


def first_token_scores(weights: object) -> np.ndarray:
    """`(..., head)`: mean weight queries 1..n-1 give key 0 (query 0 sees only itself)."""
    w = as_pattern(weights)
    return w[..., 1:, 0].mean(axis=-1)


def duplicate_token_scores(weights: object, period: int, start: int = 0) -> np.ndarray:
    """`(..., head)`: mean weight a second-half query gives its own token one period back.

    The probe's two halves sit at positions start .. start + 2L - 1 (an encoder's probe
    follows its [CLS]: start 1).
    """
    w = as_pattern(weights)
    period, queries = _repeat(w, period, start)
    return w[..., queries, queries - period].mean(axis=-1)


def induction_scores(weights: object, period: int, start: int = 0) -> np.ndarray:
    """`(..., head)`: mean weight a second-half query gives the token after its previous copy
    (positions as in `duplicate_token_scores`)."""
    w = as_pattern(weights)
    period, queries = _repeat(w, period, start)
    return w[..., queries, queries - period + 1].mean(axis=-1)


def token_share(weights: object, positions: Sequence[int]) -> np.ndarray:
    """`(..., head)`: mean over queries of the weight on the keys at `positions` (from 0)."""
    w = as_pattern(weights)
    n = w.shape[-1]
    keys = np.unique([check_int(p, "a position", minimum=0) for p in positions]).astype(int)
    if keys.size and keys[-1] >= n:
        raise AttentionInputError(f"Position {keys[-1]} is past the last of the {n} tokens.")
    return w[..., keys].sum(axis=-1).mean(axis=-1)


@dataclass(frozen=True, eq=False)
class HeadRoles:
    """Every head's score for each role on one repeated probe, `(layer, head)` each.

    previous, induction, duplicate, first   see the module's formulas
    period      the length of the repeated half
    start       where the probe begins in the sequence the heads read (0, or 1 after [CLS])
    """

    previous: np.ndarray
    induction: np.ndarray
    duplicate: np.ndarray
    first: np.ndarray
    period: int
    start: int = 0

    def score(self, role: str) -> np.ndarray:
        if role not in ROLES:
            raise AttentionInputError(f"{role!r} is not a role; choose one of {', '.join(ROLES)}.")
        return getattr(self, role)


def head_roles(weights: object, period: int, start: int = 0) -> HeadRoles:
    """The four role scores of every head of `weights` `(layer, head, n, n)` that read a probe
    of period L from position `start` (n ≥ start + 2L)."""
    w = as_pattern(weights)
    return HeadRoles(
        previous=previous_token_scores(w),
        induction=induction_scores(w, period, start),
        duplicate=duplicate_token_scores(w, period, start),
        first=first_token_scores(w),
        period=int(period),
        start=int(start),
    )


def strongest_heads(scores: object, count: int) -> list[tuple[int, int, float]]:
    """The `count` highest of `(layer, head)` scores as (layer, head, score), from 0, best first
    (ties: the earlier layer, then head)."""
    s = as_float_array(scores, "scores", min_ndim=2, max_ndim=2)
    count = check_int(count, "count", minimum=0)
    flat = s.ravel()
    # A stable sort of the negated scores keeps equal scores in layer-then-head order.
    order = np.argsort(-flat, kind="stable")[:count]
    return [(*divmod(int(i), s.shape[1]), float(flat[i])) for i in order]
