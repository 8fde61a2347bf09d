"""The decoder page's generation controls: the step buttons' callbacks and the autoplay tick.

They live here, not in the page: a session keeps its widgets' callbacks, and a function defined
in the page would keep the page's model and arrays alive with it.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui.widgets.state import PageState

AUTOPLAY_SECONDS = 1.5  # between two tokens while Autoplay is on
# Set by a tick that appended a token, consumed by the page rerun it started.
_AUTOPLAY_RERUN = "decoder.autoplay_rerun"


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
