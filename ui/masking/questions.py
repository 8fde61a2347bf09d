"""The masking lab's questions, about query 2 under the mask built on the page.

Their ids start with `mask.`, as teachers' links (`?quiz=mask...`) have always named them.
"""

from __future__ import annotations

from collections.abc import Sequence

from attention_core.lessons import quiz as questions
from ui.widgets.quiz import ask
from ui.widgets.state import PageState


def ask_questions(view: PageState, lab, tokens: Sequence[str], mask_name: str) -> None:
    """The masking lab: query 2 under the mask built on the page."""
    ask(
        view,
        "mask",
        {
            "mask.row2": lambda: questions.visible_keys(lab.mask, 1, tokens, mask_name),
            "mask.sum": lambda: questions.row_weight_sum(lab.masked, 1, tokens),
        },
    )
