"""The patching page's question, beside ``quiz`` (whose ``QUESTIONS`` lists its id): at which
layer boundary does the answer reach the last token?"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..validation import AttentionInputError
from .quiz import Question

__all__ = ["answer_reaches_last_token"]


def answer_reaches_last_token(last_shares: Sequence[float], bands: int = 5) -> Question:
    """Residual-stream patching at the last position: from which layer boundary does the clean
    stream there restore at least half of the clean logit difference? `last_shares` `(L + 1,)`
    the restored share at boundaries 0 (the embedding) .. L; the options are `bands` ranges of
    boundaries, and "never"."""
    shares = np.asarray(last_shares, dtype=np.float64)
    if shares.ndim != 1 or shares.size < bands:
        raise AttentionInputError(f"Give one share per layer boundary, {bands} or more.")
    edges = np.linspace(0, shares.size, bands + 1).round().astype(int)
    ranges = [
        f"{'the embedding' if lo == 0 else f'after layer {lo}'} to after layer {hi - 1}"
        for lo, hi in itertools.pairwise(edges)
    ]
    options = (*ranges, "Never: the last token's stream never carries half of it")
    arrived = np.flatnonzero(shares >= 0.5)
    prompt = (
        "Patch the clean residual stream into the corrupted run at the **last token**, one "
        "layer boundary at a time. From which boundary on does that restore at least half of "
        "the clean logit difference?"
    )
    if arrived.size == 0:
        return Question("patching.arrives", prompt, options, frozenset({bands}),
                        f"Never here: the most it restores is {shares.max():.0%}.")  # fmt: skip
    first = int(arrived[0])
    band = int(np.searchsorted(edges, first, side="right") - 1)
    where = "the embedding" if first == 0 else f"after layer {first}"
    before = f" (at the boundary before, {shares[first - 1]:.0%})" if first > 0 else ""
    return Question(
        "patching.arrives",
        prompt,
        options,
        frozenset({band}),
        f"From {where}: there the last token's stream restores {shares[first]:.0%}{before}. "
        "Before that the answer sits at the token where the prompts differ; attention heads "
        "move it to the last token, where the next token is read.",
    )
