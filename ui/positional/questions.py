"""The positional page's questions: reordering, and the nearest encodings.

Their ids start with `pe.`, as teachers' links (`?quiz=pe...`) have always named them.
"""

from __future__ import annotations

import numpy as np

from attention_core.lessons import quiz as questions
from attention_core.lessons.quiz import Question
from ui.positional.data import blindness
from ui.widgets.quiz import ask
from ui.widgets.state import PageState, stored


def ask_questions(
    view: PageState, sentence: tuple, d_model: int, base: float, positions: int
) -> None:
    """The positional page: `sentence` is (tokens, order kind, width, seed) of its first section,
    whose encoding is read here, so the question follows that section's own control."""

    def shuffle() -> Question:
        tokens, order_kind, width, seed = sentence
        encoding = stored(view, "family", "none")
        blind = blindness(tokens, order_kind, width, encoding, seed, 10000.0)
        return questions.reorder_changes_outputs(
            tokens,
            blind.permuted.tokens,
            blind.max_abs_difference,
            float(np.abs(blind.output).max()),
            encoding,
        )

    ask(
        view,
        "pe",
        {
            "pe.shuffle": shuffle,
            "pe.nearest": lambda: questions.nearest_position(d_model, base, min(8, positions - 1)),
        },
    )
