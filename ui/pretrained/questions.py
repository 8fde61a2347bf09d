"""The pretrained-model page's question, about the heads of the chosen layer.

Their ids start with `bert.`, as teachers' links (`?quiz=bert...`) have always named them.
"""

from __future__ import annotations

from collections.abc import Sequence

from attention_core.lessons import quiz as questions
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, trace, layer: int, tokens: Sequence[str]) -> None:
    """The pretrained-model page: the heads of the chosen layer, scored once with the trace."""
    ask(
        view,
        "bert",
        {
            "bert.previous": lambda: questions.head_attends_to_previous(
                None, tokens, layer=layer, previous=trace.patterns.previous[layer]
            )
        },
    )
