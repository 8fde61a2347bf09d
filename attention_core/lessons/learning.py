"""What the learning page says about a run, computed from its scores: when the induction head
formed, why one layer never makes one, and its predict-then-reveal questions.

Scores come as `(checkpoint, layer, head)` arrays over the run's `steps` `(checkpoint,)`: the
previous-token and prefix-matching scores of `training.run.evaluate`. Heads are named as
TransformerLens names them, layer.head, both from 0.
"""

from __future__ import annotations

import numpy as np

from ..training.formation import INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD, formations
from ..training.run import EVAL_EVERY
from .quiz import Question

__all__ = [
    "first_formed_question",
    "induction_layer_question",
    "one_layer_sentence",
    "phase_change_sentence",
]

# Two heads that pass their lines this close together form in one phase change: the scores are
# read every EVAL_EVERY steps, and the change itself takes about a hundred steps here.
TOGETHER_STEPS = 2 * EVAL_EVERY
NEITHER = "Neither forms in this run"
FIRST_OPTIONS = (
    "A previous-token head",
    "An induction head",
    f"Both together (within {TOGETHER_STEPS} steps)",
    NEITHER,
)


def _best(scores: np.ndarray) -> tuple[str, float]:
    layer, head = np.unravel_index(int(np.argmax(scores[-1])), scores.shape[1:])
    return f"{layer}.{head}", float(scores[-1, layer, head])


def phase_change_sentence(steps: object, previous: object, induction: object) -> str:
    """When the first induction head formed, and how long after the first previous-token head
    (the K-composition it reads), or that none has formed yet."""
    steps = np.asarray(steps)
    previous, induction = np.asarray(previous), np.asarray(induction)
    inductions = formations(steps, induction, INDUCTION_HEAD)
    previouses = formations(steps, previous, PREVIOUS_TOKEN_HEAD)
    if not inductions:
        name, score = _best(induction)
        return (
            f"No head has become an induction head by step {int(steps[-1]):,}: the best "
            f"prefix-matching score is head {name}'s {score:.2f}, and an induction head passes "
            f"{INDUCTION_HEAD}."
        )
    first = inductions[0]
    said = (
        f"At step {first.step:,} head {first.name} became an induction head (prefix matching "
        f"{first.score:.2f}, past {INDUCTION_HEAD})"
    )
    earlier = [f for f in previouses if f.layer < first.layer]
    if not earlier:
        return (
            said
            + ", before any head of an earlier layer passed "
            + (f"{PREVIOUS_TOKEN_HEAD} as a previous-token head.")
        )
    before = earlier[0]
    gap = first.step - before.step
    when = (
        "at the same step as" if gap == 0
        else f"{gap:,} steps after" if gap > 0
        else f"{-gap:,} steps before"
    )  # fmt: skip
    said = f"{said}, {when} head {before.name} became a previous-token head ({before.score:.2f})"
    if abs(gap) <= TOGETHER_STEPS:
        return f"{said}: the two form together, in one phase change."
    return said + "."


def one_layer_sentence(best: float, chance: float) -> str:
    """Why a model of one layer has no induction head, with its best prefix-matching score."""
    return (
        "With one layer, no head can become an induction head: to attend to the token after an "
        "earlier copy of the current token, a key must carry which token came before it, and "
        "only a head of an earlier layer can write that into its residual stream (a "
        f"previous-token head, read by K-composition). This model's best prefix-matching score "
        f"is {best:.2f}, against {chance:.2f} for attention spread evenly over the past."
    )


def induction_layer_question(
    n_layers: int, steps: object, induction: object, *, finished: bool
) -> Question:
    """Which layer will hold the induction head? Right: the layer of the best head at the end
    if it passes the line, else "no layer". Unanswered (pending) until the run has finished."""
    options = (*(f"Layer {layer}" for layer in range(n_layers)), "No layer: none forms")
    prompt = (
        f"This model has {n_layers} layer{'s' if n_layers > 1 else ''} of attention heads. "
        "Which layer will hold the induction head (a head that attends to the token after an "
        f"earlier copy of the current one, prefix-matching score past {INDUCTION_HEAD})?"
    )
    if not finished:
        return Question("learning.layer", prompt, options, frozenset(), "", pending=True)
    induction = np.asarray(induction)
    name, score = _best(induction)
    if score < INDUCTION_HEAD:
        why = f"No head passed {INDUCTION_HEAD}: the best is head {name} at {score:.2f}." + (
            " One layer cannot compose two heads." if n_layers == 1 else ""
        )
        return Question("learning.layer", prompt, options, frozenset({n_layers}), why)
    layer = int(name.split(".")[0])
    why = (
        f"Head {name} ends at {score:.2f}. Layer 0 cannot hold an induction head: its keys know "
        "only their own token and position, not the token before them, until a layer-0 "
        "previous-token head has written it into the stream that a later layer reads."
    )
    return Question("learning.layer", prompt, options, frozenset({layer}), why)


def first_formed_question(
    steps: object, previous: object, induction: object, *, finished: bool
) -> Question:
    """Which forms first, a previous-token head or an induction head? From the checkpoints at
    which each first passed its line (pending until the run has finished)."""
    prompt = (
        f"During training, which forms first: a previous-token head (score past "
        f"{PREVIOUS_TOKEN_HEAD}) or an induction head (prefix matching past {INDUCTION_HEAD})?"
    )
    if not finished:
        return Question("learning.first", prompt, FIRST_OPTIONS, frozenset(), "", pending=True)
    steps = np.asarray(steps)
    prev = formations(steps, np.asarray(previous), PREVIOUS_TOKEN_HEAD)
    ind = formations(steps, np.asarray(induction), INDUCTION_HEAD)
    if not prev and not ind:
        return Question(
            "learning.first", prompt, FIRST_OPTIONS, frozenset({3}),
            "No head passed its line in this run.",
        )  # fmt: skip
    found = {
        "previous-token": f"head {prev[0].name} at step {prev[0].step:,}" if prev else "none",
        "induction": f"head {ind[0].name} at step {ind[0].step:,}" if ind else "none",
    }
    why = (
        f"First previous-token head: {found['previous-token']}; first induction head: "
        f"{found['induction']}."
    )
    if prev and ind and abs(prev[0].step - ind[0].step) <= TOGETHER_STEPS:
        right = 2
        why += (
            " They form together, in one phase change: the induction head needs the "
            "previous-token head's output, and that output is worth writing only once an "
            "induction head reads it."
        )
    else:
        right = 0 if ind == [] or (prev and prev[0].step < ind[0].step) else 1
    return Question("learning.first", prompt, FIRST_OPTIONS, frozenset({right}), why)
