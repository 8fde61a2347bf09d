"""How many steps and scores it takes to connect n tokens: along an RNN's chain, or by attention.

rnn_steps = n − 1          (first token to last, one hop per token)
attention_steps = 1        (every pair is linked directly)
pairs = n (n − 1) / 2      (distinct pairs of tokens)
scores = n²                (every query against every key, itself included)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PathCounts:
    """What connecting `tokens` tokens takes each way (see the module's formulas)."""

    tokens: int
    rnn_steps: int
    attention_steps: int
    pairs: int
    scores: int


def path_counts(tokens: int) -> PathCounts:
    """The counts for a sentence of `tokens` ≥ 1 tokens."""
    return PathCounts(
        tokens=tokens,
        rnn_steps=tokens - 1,
        attention_steps=1,
        pairs=tokens * (tokens - 1) // 2,
        scores=tokens * tokens,
    )
