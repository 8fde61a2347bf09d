"""The learning page's questions: which layer will hold the induction head, and which head forms
first. Asked before the run ends, answered once it has (`Question.pending` until then)."""

from __future__ import annotations

from attention_core.lessons import learning
from ui.learning.data import Curves
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, n_layers: int, curves: Curves | None, *, finished: bool) -> None:
    """The questions, before the run's first checkpoint too (`curves` None: pending)."""
    if curves is None:
        steps = previous = induction = None
    else:
        steps, previous, induction = curves.steps, curves.previous, curves.induction
    ask(
        view,
        "learning",
        {
            "learning.layer": lambda: learning.induction_layer_question(
                n_layers, steps, induction, finished=finished and curves is not None
            ),
            "learning.first": lambda: learning.first_formed_question(
                steps, previous, induction, finished=finished and curves is not None
            ),
        },
    )
