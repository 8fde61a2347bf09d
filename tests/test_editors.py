"""ui.editors: reading a matrix out of what the learner typed."""

import math

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from ui.widgets.editors import editor_widget_key, parse_matrix


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


def test_a_boolean_cell_is_not_a_number():
    _, _, error = parse_matrix(_table([[1, True], [3, 4]]), name="Q")
    assert "row 1 (“a”), column d2 holds True, which is not a number" in error


def _editor_script():
    """A page with one matrix editor; what it returns is written out for the test to read."""
    import numpy as np
    import streamlit as st

    from ui.widgets.editors import matrix_editor

    size = st.session_state.get("size", 2)
    default = np.arange(size * 2, dtype=float).reshape(size, 2)  # [[0, 1], [2, 3], ...]
    result = matrix_editor("ed", default, labels=["a", "b", "c"][:size], name="Q")
    st.session_state["result"] = result


def _type(at, edits):
    at.session_state[editor_widget_key(at.session_state, "ed")] = {
        "edited_rows": edits, "added_rows": [], "deleted_rows": [],
    }  # fmt: skip
    at.run()
    return at.session_state["result"]


def test_the_editor_keeps_the_last_valid_matrix_while_a_cell_is_wrong():
    at = AppTest.from_function(_editor_script).run()
    first = at.session_state["result"]
    np.testing.assert_array_equal(first.values, [[0, 1], [2, 3]])
    assert first.labels == ("a", "b") and first.error is None and not first.stale

    typed = _type(at, {1: {"d1": 7.5}})
    np.testing.assert_array_equal(typed.values, [[0, 1], [7.5, 3]])
    assert not typed.stale

    broken = _type(at, {1: {"d1": 7.5}, 0: {"d2": None}})
    assert broken.stale and "row 1 (“a”), column d2 is empty" in broken.error
    np.testing.assert_array_equal(broken.values, [[0, 1], [7.5, 3]])  # the last valid one
    assert [e.value for e in at.error] == [broken.error]  # and the page says what is wrong


def test_reset_and_a_new_default_reseed_the_table():
    at = AppTest.from_function(_editor_script).run()
    _type(at, {0: {"d1": 5.0}})
    at.button(key="ed.reset").click().run()
    np.testing.assert_array_equal(at.session_state["result"].values, [[0, 1], [2, 3]])
    _type(at, {0: {"d1": 5.0}})
    at.session_state["size"] = 3  # the page asks for another shape: the edits are dropped
    at.run()
    result = at.session_state["result"]
    np.testing.assert_array_equal(result.values, [[0, 1], [2, 3], [4, 5]])
    assert result.labels == ("a", "b", "c")
