"""The "Why attention?" page's one control: how many tokens of its sentence to connect."""

from __future__ import annotations

import streamlit as st

from ui.widgets.state import PageState

SENTENCE = tuple("The cat sat on the mat because it was warm".split())


def choose_tokens(view: PageState) -> tuple[str, ...]:
    """The first n tokens of SENTENCE, n from the slider (`?n=`, 6 by default)."""
    length = st.slider(
        "Tokens in the sentence", 2, len(SENTENCE), key=view.int_key("n", 6, lo=2, hi=len(SENTENCE))
    )
    return SENTENCE[:length]
