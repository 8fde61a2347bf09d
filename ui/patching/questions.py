"""The patching page's question: at which layer does the answer reach the last token?

Its id starts with `patching.`, as in a teacher's link (`?quiz=patching.arrives`).
"""

from __future__ import annotations

import numpy as np

from attention_core.lessons import patching_quiz as questions
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, last_shares: np.ndarray) -> None:
    ask(view, "patching",
        {"patching.arrives": lambda: questions.answer_reaches_last_token(last_shares)})  # fmt: skip
