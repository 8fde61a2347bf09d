"""Check my work: a learner types the weights and the output worked out by hand, and each cell
is marked right or wrong at the number of decimals chosen.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import AttentionSteps
from ui.widgets import small_screens
from ui.widgets.step_text import fixed, num
from ui.widgets.theme import RIGHT_ANSWER_STYLE, WRONG_ANSWER_STYLE

# Tolerances a learner can pick in "check my work": decimals -> half a unit in the last place.
CHECK_DECIMALS = (1, 2, 3, 4)


def tolerance(decimals: int) -> float:
    """Half a unit in the last place: 2 decimals -> 0.005 (0.4011 typed as 0.40 is right)."""
    return 0.5 * 10.0 ** (-int(decimals))


def grade(typed: np.ndarray, correct: np.ndarray, decimals: int) -> np.ndarray:
    """Marks per cell: 1 right, 0 wrong, −1 left blank (NaN).

    A typed value is right when |typed − correct| ≤ half a unit of the chosen decimal place.
    """
    typed = np.asarray(typed, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    # Exactly half a unit (0.405 typed for 0.4 at 2 decimals) counts as right, though binary
    # floats make that difference 0.0050000000000000044.
    right = np.abs(typed - correct) <= tolerance(decimals) * (1 + 1e-9) + 1e-12
    return np.where(np.isnan(typed), -1, right.astype(int))


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Labels made unique for table columns: a repeated token gets its position: the (5)."""
    counts = {label: list(labels).count(label) for label in labels}
    return [
        f"{label} ({j + 1})" if counts[label] > 1 else str(label) for j, label in enumerate(labels)
    ]


def marks_table(
    typed: np.ndarray,
    correct: np.ndarray,
    marks: np.ndarray,
    *,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    reveal: bool,
    decimals: int,
) -> pd.DataFrame:
    """The marked answers as text: "✓ 0.4", "✗ 0.43" (+ "→ 0.4011" when revealed), blanks."""
    cells = []
    for i in range(marks.shape[0]):
        line = []
        for j in range(marks.shape[1]):
            answer = fixed(correct[i, j], decimals + 2)
            if marks[i, j] == 1:
                line.append(f"✓ {num(typed[i, j], 6)}")
            elif marks[i, j] == 0:
                line.append(f"✗ {num(typed[i, j], 6)}" + (f" → {answer}" if reveal else ""))
            else:
                line.append(answer if reveal else "")
        cells.append(line)
    return pd.DataFrame(cells, index=unique_labels(row_labels), columns=unique_labels(col_labels))


def _mark_colour(text: str) -> str:
    """The CSS of a marked cell ("✓ 0.4", "✗ 0.43"); a blank or revealed cell keeps the table's."""
    if text.startswith("✓"):
        return RIGHT_ANSWER_STYLE
    if text.startswith("✗"):
        return WRONG_ANSWER_STYLE
    return ""


def _answer_editor(key: str, row_labels: Sequence[str], col_labels: Sequence[str]) -> np.ndarray:
    columns = [f"c{j + 1}" for j in range(len(col_labels))]
    blank = pd.DataFrame(np.full((len(row_labels), len(col_labels)), np.nan), columns=columns)
    blank.insert(0, "query", unique_labels(row_labels))
    options = dict(
        key=f"{key}.{len(row_labels)}x{len(col_labels)}",
        hide_index=True,
        num_rows="fixed",
        disabled=("query",),
        placeholder="—",
        column_config={
            column: st.column_config.NumberColumn(label, format="%.6g")
            for column, label in zip(columns, unique_labels(col_labels), strict=True)
        },
    )
    edited = st.data_editor(blank, **small_screens.pinned_first(blank, options))
    return edited[columns].to_numpy(dtype=np.float64, na_value=np.nan)


def check_my_work(
    steps: AttentionSteps,
    *,
    key: str,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
) -> None:
    """Tables where a learner types the weights and the output computed by hand.

    Each typed cell is marked right (green ✓) or wrong (red ✗) at the tolerance chosen
    (1 to 4 decimals); "Reveal the correct values" shows them. Blank cells are not marked.
    The tables keep what was typed while the example stays the same size.
    """
    st.session_state.setdefault(f"{key}.decimals", 2)
    left, right = st.columns([3, 2])
    decimals = left.select_slider(
        "Tolerance",
        options=CHECK_DECIMALS,
        format_func=lambda d: f"{d} decimal{'s' if d > 1 else ''} (±{tolerance(d):g})",
        key=f"{key}.decimals",
        help="A typed value is right when it is within half a unit of this decimal place.",
    )
    reveal = right.toggle("Reveal the correct values", key=f"{key}.reveal")
    weights = np.asarray(steps.weights, dtype=np.float64)
    output = np.asarray(steps.output, dtype=np.float64)
    tables = (
        ("weights", "Your weights (one row per query, one column per key)", weights, key_labels),
        (
            "output",
            "Your output (one row per query, one column per output dimension)",
            output,
            [f"d{c + 1}" for c in range(output.shape[1])],
        ),
    )
    for tab, (name, label, correct, col_labels) in zip(
        st.tabs(["Weights", "Output"]), tables, strict=True
    ):
        with tab:
            st.markdown(label)
            typed = _answer_editor(f"{key}.{name}", query_labels, col_labels)
            marks = grade(typed, correct, decimals)
            table = marks_table(
                typed, correct, marks, row_labels=query_labels, col_labels=col_labels,
                reveal=reveal, decimals=decimals,
            )  # fmt: skip
            right_count, attempted = int((marks == 1).sum()), int((marks >= 0).sum())
            if attempted or reveal:
                st.dataframe(table.style.map(_mark_colour), key=f"{key}.{name}.marks")
            if attempted:
                st.markdown(
                    f"**{right_count} of {attempted}** typed {name} right "
                    f"at ±{tolerance(decimals):g}"
                    + (" — all correct." if right_count == attempted else ".")
                )
            else:
                st.caption("Type your values in the table above; blank cells are not marked.")
