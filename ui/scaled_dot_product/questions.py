"""The scaled dot-product page's questions, asked about its last query.

Their ids start with `sdpa.`, as teachers' links (`?quiz=sdpa...`) have always named them.
"""

from __future__ import annotations

from attention_core.lessons import quiz as questions
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, steps, example, *, causal: bool) -> None:
    """The scaled dot-product page: asked about its last query, which (causal or not) sees
    every key, so its question is never answered by the mask alone."""
    row = len(example.query_labels) - 1
    ask(
        view,
        "sdpa",
        {
            "sdpa.winner": lambda: questions.winning_key(
                steps, row, example.query_labels, example.key_labels
            ),
            "sdpa.noscale": lambda: questions.weights_without_scale(
                example.q, example.k, row, example.query_labels, causal=causal
            ),
        },
    )
