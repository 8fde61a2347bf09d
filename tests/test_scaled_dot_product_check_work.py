"""ui.scaled_dot_product.check_work: the marking of answers typed in "check my work".

Expected marks are worked by hand: 0.4011 typed as 0.40 is 0.0011 off, within ±0.005 (2 decimals)
and not within ±0.0005 (3 decimals).
"""

import numpy as np

from ui.scaled_dot_product.check_work import (
    _mark_colour,
    grade,
    marks_table,
    tolerance,
    unique_labels,
)
from ui.widgets.theme import RIGHT_ANSWER_STYLE, WRONG_ANSWER_STYLE


def test_grade_marks_right_wrong_and_blank_at_the_chosen_tolerance():
    correct = np.array([[0.4011, 0.4011, 0.1978]])
    typed = np.array([[0.40, 0.43, np.nan]])
    np.testing.assert_array_equal(grade(typed, correct, 2), [[1, 0, -1]])
    np.testing.assert_array_equal(grade(typed, correct, 3), [[0, 0, -1]])  # 0.40 is 0.0011 off
    np.testing.assert_array_equal(grade(typed, correct, 1), [[1, 1, -1]])
    # Exactly half a unit counts as right, a hair beyond it does not.
    assert grade([[0.405]], [[0.4]], 2)[0, 0] == 1
    assert grade([[0.4051]], [[0.4]], 2)[0, 0] == 0
    assert tolerance(2) == 0.005


def test_marks_table_text():
    typed = np.array([[0.40, 0.43, np.nan]])
    correct = np.array([[0.4011, 0.4011, 0.1978]])
    marks = grade(typed, correct, 2)
    hidden = marks_table(typed, correct, marks, row_labels=["the"], col_labels=["a", "b", "c"],
                         reveal=False, decimals=2)  # fmt: skip
    assert hidden.iloc[0].tolist() == ["✓ 0.4", "✗ 0.43", ""]
    shown = marks_table(typed, correct, marks, row_labels=["the"], col_labels=["a", "b", "c"],
                        reveal=True, decimals=2)  # fmt: skip
    assert shown.iloc[0].tolist() == ["✓ 0.4", "✗ 0.43 → 0.4011", "0.1978"]


def test_unique_labels():
    assert unique_labels(["the", "cat", "the"]) == ["the (1)", "cat", "the (3)"]
    assert unique_labels(["a", "b"]) == ["a", "b"]


def test_marked_cells_take_the_themes_colours():
    assert _mark_colour("✓ 0.4") == RIGHT_ANSWER_STYLE
    assert _mark_colour("✗ 0.43 → 0.4011") == WRONG_ANSWER_STYLE
    assert _mark_colour("0.1978") == "" and _mark_colour("") == ""
