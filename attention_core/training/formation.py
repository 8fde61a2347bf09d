"""When a head takes on its role during training: the first checkpoint its score passes a line.

A head is called a previous-token head once its previous-token score reaches PREVIOUS_TOKEN_HEAD,
and an induction head once its prefix-matching score reaches INDUCTION_HEAD. Both lines sit
several times above what attention spread evenly over the past scores (`chance_scores`): for
32 positions and a period of 16, 0.09 and 0.05.

    formations(steps, scores, line)   every head's first step at or above the line, in order
    chance_scores(n_ctx, period)      (previous, induction) of uniform causal attention
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validation import AttentionInputError

__all__ = ["INDUCTION_HEAD", "PREVIOUS_TOKEN_HEAD", "Formation", "chance_scores", "formations"]

# The prefix-matching line of the browser lab the page is compared with; three to four times a
# previous-token head's chance score, which its strongest head reaches at the phase change
# while another layer-0 head often shares the work (each ends near 0.45 at 32 positions).
INDUCTION_HEAD = 0.4
PREVIOUS_TOKEN_HEAD = 0.3


@dataclass(frozen=True)
class Formation:
    """Head (layer, head), from 0, first reached `score` ≥ its line at `step`."""

    layer: int
    head: int
    step: int
    score: float

    @property
    def name(self) -> str:
        """TransformerLens's way of naming a head: layer.head, both from 0."""
        return f"{self.layer}.{self.head}"


def formations(steps: object, scores: object, line: float) -> list[Formation]:
    """Every head whose score reaches `line`, at the first of `steps` `(checkpoint,)` it does,
    earliest first (ties: the higher score, then layer and head). `scores` `(checkpoint, layer,
    head)`."""
    steps = np.asarray(steps)
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 3 or scores.shape[0] != steps.shape[0]:
        raise AttentionInputError(
            f"scores must be (checkpoint, layer, head) with one row per step, got "
            f"{scores.shape} for {steps.shape[0]} steps."
        )
    reached = scores >= line
    found = []
    for layer, head in zip(*np.nonzero(reached.any(axis=0)), strict=True):
        first = int(np.argmax(reached[:, layer, head]))
        found.append(
            Formation(int(layer), int(head), int(steps[first]), float(scores[first, layer, head]))
        )
    return sorted(found, key=lambda f: (f.step, -f.score, f.layer, f.head))


def chance_scores(n_ctx: int, period: int) -> tuple[float, float]:
    """The previous-token and prefix-matching scores of a head that spreads each query's weight
    evenly over itself and every earlier key (w[i, j] = 1/(i + 1)), on sequences of n_ctx tokens
    of this period: what a score must beat to mean anything."""
    uniform = 1.0 / np.arange(1, n_ctx + 1)  # the weight query i gives each key it sees
    previous = float(uniform[1:].mean())
    induction = float(uniform[period : 2 * period].mean())
    return previous, induction
