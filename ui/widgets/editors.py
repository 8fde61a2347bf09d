"""The matrix editor: a keyed `st.data_editor` for a matrix whose rows are tokens.

What the learner typed is never thrown away: an empty cell, text, NaN or infinity is reported
next to the table, the table keeps the typed value, and the page keeps drawing the last valid
matrix (marked stale) until the input is fixed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.lessons.presets import Example
from ui.widgets import small_screens

MAX_REPORTED_PROBLEMS = 3


@dataclass(frozen=True)
class MatrixInput:
    """What an editor holds: the matrix to compute with and what to say about it.

    `values` is the valid matrix `(rows, cols)`, or the last valid one while the table holds a
    problem (`stale` is then True), or None if there never was a valid one.
    """

    values: np.ndarray | None
    labels: tuple[str, ...]
    error: str | None
    stale: bool


def editor_widget_key(session_state, key: str) -> str:
    """The key of the `st.data_editor` behind `matrix_editor(key, ...)` right now.

    It changes when the editor is reseeded (new preset, new size, reset), which is how the
    browser is told to drop the old edits. Tests use it to type into the editor.
    """
    return f"{key}.v{session_state.get(f'{key}.version', 0)}"


def matrix_editor(
    key: str,
    default: np.ndarray,
    *,
    labels: Sequence[str],
    name: str,
    column_prefix: str = "d",
    label_title: str = "token",
    editable_labels: bool = True,
    decimals: int = 4,
) -> MatrixInput:
    """Draw an editable matrix seeded with `default` `(rows, cols)`, one row per label.

    A new `default` (another preset or size) reseeds the table; otherwise the learner's edits
    stay. `name` ("Q") is how messages refer to the matrix.
    """
    default = np.asarray(default, dtype=np.float64)
    labels = [str(label) for label in labels]
    seed = (default.shape, default.tobytes(), tuple(labels))
    if st.session_state.get(f"{key}.seed") != seed:
        st.session_state[f"{key}.seed"] = seed
        _reseed(key)
        st.session_state[f"{key}.last_valid"] = (default, tuple(labels))

    if st.button("Reset", key=f"{key}.reset", help=f"Put {name} back to the example's values"):
        _reseed(key)

    table = pd.DataFrame(default, columns=_column_names(column_prefix, default.shape[1]))
    table.insert(0, label_title, labels)
    options = dict(
        key=editor_widget_key(st.session_state, key),
        hide_index=True,
        num_rows="fixed",
        width="stretch",
        disabled=() if editable_labels else (label_title,),
        column_config={
            label_title: st.column_config.TextColumn(label_title, width="small"),
            **{
                column: st.column_config.NumberColumn(column, format=f"%.{decimals}g")
                for column in table.columns[1:]
            },
        },
    )
    edited = st.data_editor(table, **small_screens.pinned_first(table, options))
    values, typed_labels, error = parse_matrix(edited, name=name, label_title=label_title)
    if error is None:
        st.session_state[f"{key}.last_valid"] = (values, typed_labels)
        return MatrixInput(values, typed_labels, None, stale=False)
    st.error(error, icon="✏️")
    last_values, last_labels = st.session_state[f"{key}.last_valid"]
    return MatrixInput(last_values, last_labels, error, stale=True)


def parse_matrix(
    table: pd.DataFrame, *, name: str, label_title: str = "token"
) -> tuple[np.ndarray | None, tuple[str, ...], str | None]:
    """Read a `(rows, cols)` float matrix out of an edited table, or say what is wrong with it.

    Every cell must be a finite number; the message names the first few cells that are not,
    by token and column, in the learner's words.
    """
    labels = (
        tuple(
            str(label) if _is_present(label) and str(label).strip() else f"#{row + 1}"
            for row, label in enumerate(table[label_title])
        )
        if label_title in table
        else tuple(f"#{row + 1}" for row in range(len(table)))
    )
    cells = table.drop(columns=[label_title], errors="ignore")
    if cells.shape[0] == 0 or cells.shape[1] == 0:
        return None, labels, f"{name} is empty: it needs at least one row and one column."
    values = np.empty(cells.shape, dtype=np.float64)
    problems = []
    for row in range(cells.shape[0]):
        for col, column in enumerate(cells.columns):
            raw = cells.iat[row, col]
            number, problem = _as_number(raw)
            values[row, col] = number
            if problem:
                problems.append(f"row {row + 1} (“{labels[row]}”), column {column} {problem}")
    if not problems:
        return values, labels, None
    shown = "; ".join(problems[:MAX_REPORTED_PROBLEMS])
    more = len(problems) - MAX_REPORTED_PROBLEMS
    tail = f" (and {more} more)" if more > 0 else ""
    noun = "a cell that needs" if len(problems) == 1 else f"{len(problems)} cells that need"
    return None, labels, f"{name} has {noun} fixing: {shown}{tail}. Type a finite number there."


def _reseed(key: str) -> None:
    st.session_state[f"{key}.version"] = st.session_state.get(f"{key}.version", 0) + 1


def _column_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{j + 1}" for j in range(count)]


def _is_present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _as_number(raw: object) -> tuple[float, str | None]:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return math.nan, "is empty"
    if isinstance(raw, bool):
        return math.nan, f"holds {raw}, which is not a number"
    try:
        number = float(str(raw).strip().replace("−", "-")) if isinstance(raw, str) else float(raw)
    except (TypeError, ValueError):
        return math.nan, f"holds “{str(raw)[:20]}”, which is not a number"
    if math.isnan(number):
        return number, "is empty" if not isinstance(raw, str) else "holds NaN"
    if math.isinf(number):
        return number, "is infinite"
    return number, None


def qkv_editors(prefix: str, example: Example, *, side_by_side: bool) -> tuple[Example, list[str]]:
    """Editors for Q, K and V seeded with `example`: what they hold, and which are stale.

    Q and K carry editable token names; V's rows are named by K's (row j of V is key j's value).
    Keys `"<prefix>.q"`, `"<prefix>.k"`, `"<prefix>.v"`. `side_by_side` puts the three tables in
    columns (narrow matrices on a wide screen), else one under the other.
    """
    columns = st.columns(3) if side_by_side else None
    inputs = {}
    for index, (name, role, matrix, labels) in enumerate(
        (
            ("Q", "queries", example.q, example.query_labels),
            ("K", "keys", example.k, example.key_labels),
            ("V", "values", example.v, example.key_labels),
        )
    ):
        with columns[index] if columns else st.container():
            st.markdown(f"**{name}** — {role}")
            inputs[name] = matrix_editor(
                f"{prefix}.{name.lower()}", matrix, labels=labels, name=name,
                editable_labels=name != "V",
            )  # fmt: skip
    shown = Example(
        q=inputs["Q"].values, k=inputs["K"].values, v=inputs["V"].values,
        query_labels=inputs["Q"].labels, key_labels=inputs["K"].labels, title=example.title,
    )  # fmt: skip
    return shown, [name for name, given in inputs.items() if given.stale]
