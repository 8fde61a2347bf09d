"""The custom mask of the masking lab: a grid of checkboxes and its compact form in a link.

A heatmap cell cannot be clicked into a selection in Streamlit, so the custom mask is a grid of
checkboxes (a boolean `st.data_editor`): one row per query, one column per key. In the URL the
grid is one character per cell, rows separated by dots: `grid=100.110.111` is the 3-token causal
mask.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import AttentionInputError, causal_mask
from attention_core.lessons.mask_experiments import lab_mask
from ui.widgets.state import PageState

GRID_PARAM = "grid"
GRID_ROW_SEPARATOR = "."
MAX_GRID_SIDE = 8


def encode_grid(grid: np.ndarray) -> str:
    """`100.110.111` for the 3×3 causal mask: a 0/1 per cell, rows joined by dots."""
    return GRID_ROW_SEPARATOR.join("".join("1" if cell else "0" for cell in row) for row in grid)


def decode_grid(raw: str, *, max_side: int = MAX_GRID_SIDE) -> np.ndarray:
    """The boolean grid written by `encode_grid`; ValueError (saying why) for anything else."""
    if len(raw) > max_side * (max_side + 1):
        raise ValueError(f"it is longer than a {max_side}×{max_side} grid")
    rows = raw.split(GRID_ROW_SEPARATOR)
    if len(rows) > max_side or any(len(row) > max_side for row in rows):
        raise ValueError(f"it is larger than {max_side}×{max_side}")
    if any(set(row) - {"0", "1"} for row in rows):
        raise ValueError("it may only hold 0 and 1, with a dot between rows")
    if any(len(row) != len(rows) for row in rows):
        raise ValueError("it is not square (one row per query, one column per key)")
    return np.array([[cell == "1" for cell in row] for row in rows], dtype=bool)


def resize_grid(grid: np.ndarray, n: int) -> np.ndarray:
    """`grid` cut or grown to `(n, n)`; new cells follow the causal mask."""
    resized = causal_mask(n)
    keep = min(n, grid.shape[0])
    resized[:keep, :keep] = grid[:keep, :keep]
    return resized


def custom_grid_editor(
    view: PageState,
    labels: Sequence[str],
    *,
    presets: dict[str, np.ndarray],
) -> np.ndarray:
    """Draw the checkbox grid for `len(labels)` tokens and return it as an `(n, n)` bool mask.

    The grid lives in the page state (and the link) under `grid`; `presets` are buttons that
    refill the grid ("Causal", "All allowed", ...), each an `(n, n)` bool array.
    """
    n = len(labels)
    default = encode_grid(causal_mask(n))
    state_key = view.text_key(GRID_PARAM, default, max_chars=MAX_GRID_SIDE * (MAX_GRID_SIDE + 1))
    raw = st.session_state[state_key]
    try:
        grid = decode_grid(raw)
    except ValueError as error:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        view.notices.append(
            f"The link's `{GRID_PARAM}={shown}` was ignored: {error}. "
            "Showing the causal grid instead."
        )
        grid = causal_mask(n)
    if grid.shape != (n, n):
        grid = resize_grid(grid, n)

    base_key, version_key = f"{view.key(GRID_PARAM)}.base", f"{view.key(GRID_PARAM)}.version"
    version = st.session_state.get(version_key, 0)
    editor_key = f"{view.key(GRID_PARAM)}.editor.v{version}"
    labels = tuple(str(label) for label in labels)
    seeded = st.session_state.get(base_key)
    base = seeded[1] if seeded is not None and seeded[0] == labels else None

    st.caption("Fill the grid with:")
    buttons = st.columns(len(presets))
    chosen = None
    for column, (name, preset) in zip(buttons, presets.items(), strict=True):
        if column.button(name, key=f"{view.key(GRID_PARAM)}.fill.{name}", width="stretch"):
            chosen = np.asarray(preset, dtype=bool)
    # A fresh table is seeded from the stored grid whenever the old one cannot be trusted: a
    # preset was chosen, the tokens changed, or the editor's edits were dropped (page switch).
    stale = base is None or editor_key not in st.session_state
    if chosen is not None or stale:
        base = grid if chosen is None else chosen
        version += 1
        st.session_state[version_key] = version
        st.session_state[base_key] = (labels, base.copy())
        editor_key = f"{view.key(GRID_PARAM)}.editor.v{version}"

    names = [f"k{j + 1}" for j in range(n)]
    table = pd.DataFrame(base, columns=names)
    table.insert(0, "query", [f"{i + 1} {label}" for i, label in enumerate(labels)])
    edited = st.data_editor(
        table,
        key=editor_key,
        hide_index=True,
        num_rows="fixed",
        disabled=("query",),
        column_config={
            "query": st.column_config.TextColumn("query ↓  key →", width="small", pinned=True),
            **{
                name: st.column_config.CheckboxColumn(f"{j + 1} {labels[j]}", width="small")
                for j, name in enumerate(names)
            },
        },
    )
    grid = edited[names].eq(True).to_numpy()  # an emptied cell counts as blocked
    encoded = encode_grid(grid)
    if encoded != raw:
        view.set(GRID_PARAM, encoded)
    return grid


def custom_grid(
    view: PageState, tokens: Sequence[str], other_kinds: Sequence[str], **parameters: object
) -> np.ndarray:
    """The custom grid editor with its fill buttons: causal, all allowed, all blocked, and the
    other chosen kinds combined (`parameters` are `lab_mask`'s), when they make a mask."""
    n = len(tokens)
    presets = {
        "Causal": causal_mask(n),
        "All allowed": np.ones((n, n), bool),
        "All blocked": np.zeros((n, n), bool),
    }
    try:
        from_others = lab_mask(n, other_kinds, **parameters)
    except AttentionInputError:
        from_others = None
    if from_others is not None:
        presets["The other kinds"] = from_others
    return custom_grid_editor(view, tokens, presets=presets)
