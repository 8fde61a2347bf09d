"""The pretrained page's controls: their defaults, the presets' callback, the query token kept
inside the text (with a notice for a link past its end), and the box comparing two heads."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from ui.models.minilm import PRESETS, PageTrace
from ui.widgets import compare
from ui.widgets.state import PageState, write_url_after_fragment

# Layer 4, head 2 links "it" to "animal" (0.68) in the default sentence; with "wide" instead of
# "tired" the same head moves weight towards "street". Positions count from 1, like the page.
DEFAULT_LAYER, DEFAULT_HEAD, DEFAULT_QUERY = 4, 2, 11


VIEWS = {
    "head": "Head view (lines)",
    "model": "Model view (all heads)",
    "layers": "Average per layer",
}


# The word a preset asks the query control to jump to, once the preset's text is tokenized.
FOCUS_KEY = "pretrained.focus"


LINK_CHECKED_KEY = "pretrained.link_checked"


def focus_position(tokens: Sequence[str], word: str) -> int | None:
    """Position (from 1) of the first token equal to `word`, if any."""
    for i, token in enumerate(tokens):
        if token == word:
            return i + 1
    return None


def use_preset(view: PageState, name: str) -> None:
    """A preset button's callback: its text, and (after tokenizing) a jump to its word."""
    _, text, word = PRESETS[name]
    view.set("text", text)
    st.session_state[FOCUS_KEY] = word


def fit_query_token(view: PageState, tokens: Sequence[str]) -> None:
    """Point the query control at a preset's word, and keep it inside the text: a token past
    the end becomes the last one (a link that asked for it gets a notice, once)."""
    if FOCUS_KEY in st.session_state:
        view.set("token", focus_position(tokens, st.session_state.pop(FOCUS_KEY)) or 1)
    n = len(tokens)
    if view.value("token") > n:
        if "token" in st.query_params and LINK_CHECKED_KEY not in st.session_state:
            view.notices.append(
                f"The link's `token={view.value('token')}` is past the end of this text ({n} "
                "tokens); the last token is shown instead."
            )
        view.set("token", n)
    st.session_state[LINK_CHECKED_KEY] = True


@st.fragment
def compare_heads(view: PageState, trace: PageTrace, layer: int, head: int) -> None:
    """Head (`layer`, `head`), from 0, the page's choice, as A; any other head of any layer as B."""
    box = compare.opened(view, label="Compare with another head or layer")
    if box is not None:
        with box:
            layers, heads = range(1, trace.num_layers + 1), range(1, trace.num_heads + 1)
            first, second = st.columns(2)
            layer_b = first.select_slider(
                "Layer B", list(layers), key=view.int_key("cmp_layer", 1, lo=1, hi=layers[-1])
            )
            head_b = second.select_slider(
                "Head B", list(heads), key=view.int_key("cmp_head", 1, lo=1, hi=heads[-1])
            )
            st.caption(f"A is the head chosen above: layer {layer + 1}, head {head + 1}.")
            compare.show(
                trace.weights[layer, head],
                trace.weights[layer_b - 1, head_b - 1],
                names=(f"layer {layer + 1} head {head + 1}", f"layer {layer_b} head {head_b}"),
                query_labels=trace.labels(),
                key_labels=trace.labels(),
                filename=f"bert-compare-l{layer + 1}-h{head + 1}-l{layer_b}-h{head_b}",
            )
    write_url_after_fragment(view)
