"""ui.editors: reading a matrix out of what the learner typed."""

import math

import numpy as np
import pandas as pd
import pytest

from ui.editors import parse_matrix, resize_matrix


def _table(rows, labels=("a", "b")):
    frame = pd.DataFrame(rows, columns=[f"d{j + 1}" for j in range(len(rows[0]))])
    frame.insert(0, "token", list(labels))
    return frame


def test_valid_table_gives_the_matrix_and_the_labels():
    values, labels, error = parse_matrix(_table([[1, 2.5], ["3", "−4"]]), name="Q")
    assert error is None
    np.testing.assert_array_equal(values, [[1.0, 2.5], [3.0, -4.0]])
    assert labels == ("a", "b")


@pytest.mark.parametrize(
    ("cell", "said"),
    [
        (None, "row 2 (“b”), column d1 is empty"),
        (math.nan, "row 2 (“b”), column d1 is empty"),
        ("", "row 2 (“b”), column d1 is empty"),
        ("abc", "row 2 (“b”), column d1 holds “abc”, which is not a number"),
        ("nan", "row 2 (“b”), column d1 holds NaN"),
        (math.inf, "row 2 (“b”), column d1 is infinite"),
    ],
)
def test_a_bad_cell_is_named_by_row_token_and_column(cell, said):
    values, _, error = parse_matrix(_table([[1, 2], [cell, 4]]), name="K")
    assert values is None
    assert error.startswith("K has a cell that needs fixing")
    assert said in error


def test_many_bad_cells_are_counted_not_all_listed():
    rows = [[None] * 4, [None] * 4]
    _, _, error = parse_matrix(_table(rows), name="V")
    assert "8 cells" in error and "(and 5 more)" in error


def test_blank_token_names_fall_back_to_positions():
    _, labels, _ = parse_matrix(_table([[1], [2]], labels=("", None)), name="Q")
    assert labels == ("#1", "#2")


def test_empty_matrix_is_reported():
    frame = pd.DataFrame({"token": ["a"]})
    _, _, error = parse_matrix(frame, name="Q")
    assert error == "Q is empty: it needs at least one row and one column."


def test_resize_keeps_the_typed_corner_and_fills_the_rest():
    typed = np.array([[1.0, 2.0], [3.0, 4.0]])
    fill = np.full((3, 3), 9.0)
    np.testing.assert_array_equal(resize_matrix(typed, 3, 1, fill), [[1.0], [3.0], [9.0]])
