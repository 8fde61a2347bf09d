"""The learning page's questions: which layer will hold the induction head, and which head forms
first. Asked before the run ends, answered once it has (`Question.pending` until then)."""

from __future__ import annotations

from attention_core.lessons import learning
from ui.learning.data import Curves
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, n_layers: int, curves: Curves, *, finished: bool) -> None:
    ask(
        view,
        "learning",
        {
            "learning.layer": lambda: learning.induction_layer_question(
                n_layers, curves.steps, curves.induction, finished=finished
            ),
            "learning.first": lambda: learning.first_formed_question(
                curves.steps, curves.previous, curves.induction, finished=finished
            ),
        },
    )
