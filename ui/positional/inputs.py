"""The positional page's controls: the choices they offer, and values from a link made safe.

PageState has already fitted every value from a link into its widget's range; what is left
here is what the page itself knows: d_model must be even, a sentence has a few words, and a
slider whose range follows another control must keep its value.
"""

from __future__ import annotations

import streamlit as st

from ui.widgets.state import PageState

BASES = [2, 10, 100, 1000, 10000, 100000, 500000, 1000000]
MAX_WORDS = 8
DEFAULT_SENTENCE = "I love AI"


def keep(key: str) -> str:
    """Keep a widget's value when its range follows another control.

    Streamlit treats a slider whose min/max (or a multiselect whose options) changed as a new
    widget and restarts it at its default; stating the value through Session State before the
    widget is drawn carries it over (PageState has already fitted it into the new range).
    """
    st.session_state[key] = st.session_state[key]
    return key


def even_d_model_key(view: PageState) -> str:
    """Key of the d_model slider; an odd d_model from a link is rounded down, with a notice."""
    key = view.int_key("d_model", 64, lo=2, hi=1024)
    odd = view.value("d_model")
    if odd % 2:
        view.set("d_model", odd - 1)
        view.notices.append(
            f"The link's `d_model={odd}` was rounded to {odd - 1}: the encodings use (sin, cos) "
            "pairs, so d_model is even here."
        )
    return key


def sentence_words(sentence: str) -> tuple[tuple[str, ...], str | None]:
    """The words of the sentence (at most MAX_WORDS), and what to tell the learner, if anything."""
    words = sentence.split()
    if not words:
        return tuple(DEFAULT_SENTENCE.split()), (
            "The sentence is empty: type a few words separated by spaces."
        )
    if len(words) > MAX_WORDS:
        return tuple(words[:MAX_WORDS]), (
            f"Only the first {MAX_WORDS} words are used: attention tables stay readable."
        )
    return tuple(words), None
