"""Take the numbers away and bring them back: download buttons and the uploader.

The files themselves are written and read by `ui.widgets.formats` (pure functions); these
helpers only put them behind `st.download_button`s and an `st.file_uploader`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import streamlit as st

from attention_core import AttentionInputError, AttentionSteps
from attention_core.lessons.presets import Example
from ui.widgets.formats import FORMATS, clean_settings, combine_upload, example_to_json, matrix_file
from ui.widgets.hand_made import HandMadeExample


def download_chooser(
    matrices: Mapping[str, tuple[np.ndarray, Sequence[str], Sequence[str], str]],
    *,
    key: str,
    label: str = "Download",
    row_title: str = "token",
) -> None:
    """One compact download row for several matrices: pick which, pick the format, download.

    `matrices` maps a title to (values, row labels, column labels, file stem). Three widgets
    however many matrices there are (each download button costs a rerun's time); the file is
    only produced when the button is pressed.
    """
    which_col, format_col, button_col = st.columns([3, 3, 2], vertical_alignment="bottom")
    which = which_col.selectbox(label, list(matrices), key=f"{key}.which")
    fmt = format_col.segmented_control(
        "Format", list(FORMATS), default="CSV", required=True, key=f"{key}.format"
    )
    values, row_labels, col_labels, stem = matrices[which]

    def produce() -> bytes:
        return matrix_file(
            values, fmt, row_labels=row_labels, col_labels=col_labels, row_title=row_title
        )

    button_col.download_button(
        "Download",
        produce,
        file_name=f"{stem}{FORMATS[fmt]}",
        mime={"CSV": "text/csv", "NumPy": "application/octet-stream"}.get(fmt, "text/x-tex"),
        key=f"{key}.button",
        on_click="ignore",
        icon=":material/download:",
    )


def download_example(
    example: Example,
    *,
    settings: Mapping[str, Any],
    steps: AttentionSteps | None,
    filename: str,
    key: str,
) -> None:
    """One button: the whole example as JSON (uploadable again)."""
    st.download_button(
        "Download the example (JSON)",
        example_to_json(example, settings=settings, steps=steps),
        file_name=f"{filename}.json",
        mime="application/json",
        key=key,
        on_click="ignore",
        icon=":material/download:",
    )


def upload_example(
    hand: HandMadeExample,
    *,
    key: str,
    label: str,
    choices: Mapping[str, Sequence[str]] | None = None,
    flags: Sequence[str] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> None:
    """A file uploader whose files replace the example on screen (see `combine_upload`).

    A JSON export also brings back the settings it was saved with, those `clean_settings`
    accepts (`choices`, `flags`, `ranges` name them as there; each becomes the value of the
    page's parameter of that name). What could not be loaded is said under the uploader.
    """
    error_key = f"{key}.error"

    def load() -> None:
        files = st.session_state.get(key) or []
        st.session_state.pop(error_key, None)
        if not files:
            return
        try:
            uploaded = combine_upload([(f.name, f.getvalue()) for f in files], hand.current())
        except AttentionInputError as error:
            st.session_state[error_key] = str(error)
            return
        hand.replace(uploaded.example)
        settings, refused = clean_settings(
            uploaded.settings, choices=choices, flags=flags, ranges=ranges
        )
        for name, value in settings.items():
            hand.view.set(name, value)
        if refused:
            st.session_state[error_key] = (
                "The example was loaded, but some of its settings were not: " + "; ".join(refused)
            )

    st.file_uploader(label, type=["json", "csv"], accept_multiple_files=True, key=key,
                     on_change=load, max_upload_size=1)  # fmt: skip
    if st.session_state.get(error_key):
        st.error(st.session_state[error_key], icon=":material/upload_file:")
