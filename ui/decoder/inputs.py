"""The decoder page's generation controls: how each token is chosen (temperature, top-k, top-p,
min-p, seed), the step buttons' callbacks and the autoplay tick.

They live here, not in the page: a session keeps its widgets' callbacks, and a function defined
in the page would keep the page's model and arrays alive with it.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from attention_core.models.generation import Sampling
from ui.widgets.state import PageState

AUTOPLAY_SECONDS = 1.5  # between two tokens while Autoplay is on
MAX_TEMPERATURE, MAX_TOP_K, MAX_SEED = 2.0, 200, 2**31 - 1
# top-p must stay above 0 (the mass to keep) and min-p below 1 (a bar under the top token's p).
MIN_TOP_P, MAX_MIN_P = 0.01, 0.99
# Set by a tick that appended a token, consumed by the page rerun it started.
_AUTOPLAY_RERUN = "decoder.autoplay_rerun"


def bind_sampling(view: PageState) -> None:
    """Bind the sampling controls to the link (`temperature`, `top_k`, `top_p`, `min_p`, `seed`)
    before anything can stop the page, so a link keeps them even when the model is missing."""
    view.float_key("temperature", 0.0, lo=0.0, hi=MAX_TEMPERATURE)
    view.int_key("top_k", 0, lo=0, hi=MAX_TOP_K)
    view.float_key("top_p", 1.0, lo=MIN_TOP_P, hi=1.0)
    view.float_key("min_p", 0.0, lo=0.0, hi=MAX_MIN_P)
    view.int_key("seed", 0, lo=0, hi=MAX_SEED)


def sampling_controls(view: PageState) -> Sampling:
    """The row of sampling controls, in the order the filters run; returns their settings."""
    temp_col, top_k_col, top_p_col, min_p_col, seed_col = st.columns(5)
    temperature = temp_col.slider(
        "Temperature (0 = greedy)", 0.0, MAX_TEMPERATURE, step=0.1, key=view.key("temperature")
    )
    top_k = top_k_col.number_input("Top-k (0 = all tokens)", 0, MAX_TOP_K, key=view.key("top_k"))
    top_p = top_p_col.slider(
        "Top-p (1 = off)", MIN_TOP_P, 1.0, step=0.01, key=view.key("top_p"),
        help="Keep the fewest likeliest tokens whose probabilities add up to at least p.",
    )  # fmt: skip
    min_p = min_p_col.slider(
        "Min-p (0 = off)", 0.0, MAX_MIN_P, step=0.01, key=view.key("min_p"),
        help="Keep the tokens at least min-p times as likely as the likeliest one.",
    )  # fmt: skip
    seed = seed_col.number_input(
        "Seed", 0, MAX_SEED, key=view.key("seed"), disabled=temperature == 0
    )
    return Sampling(temperature, int(top_k), top_p, min_p, int(seed))


def restart(view: PageState) -> None:
    """Back to the prompt alone (a new prompt, chat mode or Start again)."""
    view.set("step", 0)


def next_step(view: PageState, room: int) -> None:
    """One more generated token, never more than the `room` left."""
    view.set("step", min(view.value("step") + 1, room))


def autoplay_tick(playing: bool, next_token: Callable[[], None]) -> None:
    """One timer tick of the autoplay fragment: append a token, then rerun the page to show it.

    That page rerun runs the fragment again, which must not append a second token: the tick
    leaves a mark in the session that the next call consumes.
    """
    if st.session_state.pop(_AUTOPLAY_RERUN, False):
        return
    if playing:
        st.session_state[_AUTOPLAY_RERUN] = True
        next_token()
        st.rerun()
