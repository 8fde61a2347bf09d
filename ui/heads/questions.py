"""The heads page's question: is the token attention favours the one whose hiding matters most?

Its id starts with `heads.`, as in a teacher's link (`?quiz=heads.agree`).
"""

from __future__ import annotations

from attention_core.lessons import quiz as questions
from ui.heads.data import Explanation
from ui.heads.figures import token_label
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, found: Explanation) -> None:
    tokens = [token_label(t) for t in found.tokens]
    ask(
        view,
        "heads",
        {
            "heads.agree": lambda: questions.attention_agrees_with_hiding(
                found.measures["attention"],
                found.measures["hiding"],
                tokens,
                f"{found.query + 1} · {tokens[found.query]}",
            )
        },
    )
