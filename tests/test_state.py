"""ui.state: matrices in links, and untrusted link values."""

import numpy as np
import pytest

from ui.widgets.state import MAX_PARAM_CHARS, decode_matrix, encode_matrix


def test_matrix_round_trips_through_the_link_exactly():
    matrix = np.array([[1.0, 0.0, -2.5], [1 / 3, 1e-9, 12345.678]])
    text = encode_matrix(matrix)
    assert text.startswith("1,0,-2.5;")
    np.testing.assert_array_equal(decode_matrix(text, max_rows=8, max_cols=8), matrix)


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("1,2;3", "different lengths"),
        ("1,x", "not a number"),
        ("1,nan", "NaN or infinity"),
        (";".join(["1"] * 9), "larger than 8×8"),
        ("1," * MAX_PARAM_CHARS, "too long"),
    ],
)
def test_bad_matrices_in_a_link_are_refused_with_a_reason(raw, said):
    with pytest.raises(ValueError, match=said):
        decode_matrix(raw, max_rows=8, max_cols=8)


def _linked_page():
    import streamlit as st

    from ui.widgets.state import PageState

    view = PageState("t")
    view.show_notices()
    view.int_key("n", 1, lo=1, hi=9)
    view.follow_link(["n"])
    st.markdown(f"n = {view.value('n')}")
    view.sync_url()


def test_a_link_followed_later_in_the_session_is_read_and_a_lagging_url_is_not():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_linked_page)
    at.query_params["n"] = "3"
    at.run()
    assert at.markdown[0].value == "n = 3"
    # The page changed n, and its URL has not caught up yet: the old URL is not a new link.
    at.session_state["t.n"] = 5
    at.run()
    assert at.markdown[0].value == "n = 5" and at.query_params["n"] == "5"
    # A link followed from another page brings a new value: it replaces the bound one.
    at.query_params["n"] = "7"
    at.run()
    assert at.markdown[0].value == "n = 7"
    at.query_params["n"] = "99"
    at.run()
    assert at.markdown[0].value == "n = 1"
    assert "The link's `n` was ignored: it must be between 1 and 9." in at.warning[0].value


def _stale_label_page():
    import streamlit as st

    from ui.heads import inputs
    from ui.widgets.state import PageState

    view = PageState("t")
    key = view.int_key("query", 0, lo=0, hi=9)
    if st.session_state.get("stale"):
        # What a select box hands a fragment's rerun (which binds nothing) when the label sent
        # by the browser is one its options, following the text, no longer hold.
        st.session_state[key] = "3 · cat"
    inputs.fit_position(view, "query", 2)
    query = st.selectbox(
        "Token", [0, 1, 2], key=key, format_func=inputs.token_choice_label(["a", "b"])
    )
    st.markdown(f"query = {query!r}, read back {view.value('query')!r}")


def test_a_label_the_options_no_longer_hold_reads_as_the_default_not_a_crash():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_stale_label_page)
    at.run()
    at.selectbox[0].set_value(2).run()
    assert at.markdown[0].value == "query = 2, read back 2"
    at.session_state["stale"] = True
    at.run()
    assert not at.exception
    assert at.markdown[0].value == "query = 0, read back 0"
