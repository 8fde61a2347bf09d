"""The multi-head page's question: which head looks at the previous token.

Their ids start with `mha.`, as teachers' links (`?quiz=mha...`) have always named them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attention_core.lessons import quiz as questions
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, steps, tokens: Sequence[str]) -> None:
    ask(
        view,
        "mha",
        {
            "mha.previous": lambda: questions.head_attends_to_previous(
                np.asarray(steps.attention.weights), tokens
            ),
        },
    )
