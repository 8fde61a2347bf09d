"""What the small model reads: random segments repeated, where only an earlier copy tells what
comes next.

A sequence of n_ctx tokens is a segment of `period` distinct random tokens, repeated until the
sequence is full (`np.resize`): `A B C D A B C D A B …`. The first copy cannot be predicted
(every token is new); from the second copy on, a token is the one that followed the same token
one period back, which an induction head can read (Olsson et al. 2022). Training periods vary
from sequence to sequence, so no single offset can be learned by heart: the model has to find
the earlier copy.

    training_batch(rng, ...)     (batch, n_ctx) ids and each row's period, none held out
    held_out(seed, ...)          HeldOut: rows of period n_ctx // 2 (two copies), and one short
                                 example to draw, none of them ever trained on
    seen_before(periods, n_ctx)  which predictions are of a first-seen token, which of a repeat

Predictions are counted from 0 as the losses are: prediction i is made at position i, of the
token at i + 1. It is of a first-seen token when i + 1 < period, and of a predictable repeat
when i + 1 > period (the token at `period` starts the second copy, but the token before it has
never been followed by anything yet: neither).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validation import AttentionInputError, check_int

__all__ = [
    "MIN_PERIOD",
    "HeldOut",
    "check_sizes",
    "held_out",
    "period_range",
    "seen_before",
    "training_batch",
]

# Training periods start at a quarter of the context (and never under MIN_PERIOD): shorter ones
# teach heads to look a fixed few tokens back, and the induction head forms late or not at all
# (the default model, periods from 2: no head past 0.15 by step 1,500; from n_ctx // 4: 0.85 at
# step 500).
MIN_PERIOD = 2
# The example whose patterns the page draws is as long as the step-by-step editor's tables.
EXAMPLE_TOKENS = 16


def check_sizes(n_ctx: int, vocab: int) -> tuple[int, int]:
    """(n_ctx, vocab), refused with a sentence when no repeated sequence fits them."""
    n_ctx = check_int(n_ctx, "The context", minimum=1)
    vocab = check_int(vocab, "The vocabulary", minimum=1)
    if n_ctx < 4:
        raise AttentionInputError(
            f"A context of {n_ctx} tokens is too short: a segment of at least 2 tokens and its "
            "copy need 4 positions. Choose a context of 4 or more."
        )
    if vocab < n_ctx // 2:
        raise AttentionInputError(
            f"A vocabulary of {vocab} tokens is too small for a context of {n_ctx}: a segment "
            f"fills half of it with {n_ctx // 2} different tokens. Choose a vocabulary of at "
            f"least {n_ctx // 2}, or a shorter context."
        )
    return n_ctx, vocab


def _segment_rows(
    rng: np.random.Generator, periods: np.ndarray, n_ctx: int, vocab: int
) -> np.ndarray:
    """One row per period: `period` distinct tokens drawn at random, repeated to n_ctx."""
    # Distinct within a segment, so the only way to predict a token is its earlier copy.
    order = np.argsort(rng.random((periods.size, vocab)), axis=1)  # a permutation per row
    rows = np.empty((periods.size, n_ctx), dtype=np.int64)
    for row, period in enumerate(periods):
        rows[row] = np.resize(order[row, :period], n_ctx)
    return rows


@dataclass(frozen=True, eq=False)
class HeldOut:
    """Sequences kept out of training, to score the model on: each a segment of `period` =
    n_ctx // 2 tokens followed by its copy (and its first token again for an odd context); and
    one shorter example to draw, a segment of half its length and its copy.

    tokens   `(count, n_ctx)`
    period   int
    example  `(min(n_ctx, EXAMPLE_TOKENS),)`, its period half its length
    """

    tokens: np.ndarray
    period: int
    example: np.ndarray

    @property
    def example_period(self) -> int:
        return self.example.size // 2

    @property
    def segments(self) -> frozenset[tuple[int, ...]]:
        """The held-out segments, which a training batch never draws."""
        rows = [row[: self.period] for row in self.tokens]
        return frozenset(
            tuple(map(int, row)) for row in [*rows, self.example[: self.example_period]]
        )


def held_out(seed: int, count: int, n_ctx: int, vocab: int) -> HeldOut:
    """`count` held-out sequences, the same for a seed (drawn from their own stream, apart from
    the training batches')."""
    n_ctx, vocab = check_sizes(n_ctx, vocab)
    count = check_int(count, "The number of held-out sequences", minimum=1)
    rng = np.random.default_rng([check_int(seed, "The seed", minimum=0), 2])
    period = n_ctx // 2
    rows = _segment_rows(rng, np.full(count, period), n_ctx, vocab)
    length = min(n_ctx, EXAMPLE_TOKENS)
    example = _segment_rows(rng, np.array([length // 2]), length, vocab)[0]
    return HeldOut(rows, period, example)


def period_range(n_ctx: int) -> tuple[int, int]:
    """The shortest and the longest period a training sequence of n_ctx tokens has."""
    return max(MIN_PERIOD, n_ctx // 4), n_ctx // 2


def training_batch(
    rng: np.random.Generator,
    batch: int,
    n_ctx: int,
    vocab: int,
    exclude: frozenset[tuple[int, ...]] = frozenset(),
) -> tuple[np.ndarray, np.ndarray]:
    """`(batch, n_ctx)` token ids and each row's period `(batch,)`, drawn uniformly from
    n_ctx // 4 .. n_ctx // 2 (at least MIN_PERIOD); no row's segment is one of `exclude` (a
    held-out set's)."""
    n_ctx, vocab = check_sizes(n_ctx, vocab)
    shortest, longest = period_range(n_ctx)
    periods = rng.integers(shortest, longest + 1, size=batch)
    rows = _segment_rows(rng, periods, n_ctx, vocab)
    for row in range(batch):
        # Rare (a held-out segment among vocab!/(vocab - period)! of its length), but a
        # sequence scored as unseen must not have been trained on.
        while tuple(map(int, rows[row, : periods[row]])) in exclude:
            rows[row] = _segment_rows(rng, np.array([periods[row]]), n_ctx, vocab)[0]
    return rows, periods


def seen_before(periods: object, n_ctx: int) -> tuple[np.ndarray, np.ndarray]:
    """Two `(rows, n_ctx - 1)` masks over the predictions of sequences with these periods:
    (the next token is seen for the first time, it repeats what followed its earlier copy)."""
    periods = np.asarray(periods)[:, None]
    target = np.arange(1, n_ctx)[None, :]  # prediction i is of the token at i + 1
    return target < periods, target > periods
