"""Reusable views of one attention computation, step by step.

For any 2-D `AttentionSteps` (one head: scores/weights `(q_pos, k_pos)`, output `(q_pos, d_v)`)
and the Q `(q_pos, d_k)`, K `(k_pos, d_k)`, V `(k_pos, d_v)` it was computed from:

    show_pipeline(steps, q=, k=, v=, query_labels=, key_labels=, key=, filename=)
        one panel per step (scores -> scaled -> masked -> weights -> output): a heatmap with the
        numbers in the cells, per-cell hover saying how the cell was computed, and CSV / .npy /
        LaTeX downloads. `upto` shows only the first steps (presenter stepping).
    explain_row(steps, row, q=, k=, v=, query_labels=, key_labels=)
        one query's whole calculation written out with st.latex: dot products, scaling, each
        exponential, their sum, each weight (4 decimals, with the row sum), the weighted sum of
        V rows that gives the output.
    check_my_work(steps, key=, query_labels=, key_labels=)
        the learner types weights and/or outputs computed by hand; each cell is marked right or
        wrong at a tolerance they choose, the correct values revealed on request.
    show_scaling_experiment(key=)
        "Why divide by √d_k?": Var(q·k) against d_k, and what the softmax does with and without
        the scale.

`scoring` is a key of `attention_core.SCORING_FUNCTIONS` ("scaled_dot", "dot", "cosine",
"additive"); it only changes how the scores are explained. Every number shown comes from
`steps` or `attention_core.lessons.presets.row_breakdown`; nothing here computes attention itself.
The pure helpers (`cell_hover`, `row_latex`, `grade`) can be tested without Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionSteps
from ui.widgets import heatmaps, render
from ui.widgets.exports import download_chooser
from ui.widgets.state import PageState, is_presenting
from ui.widgets.step_text import (
    STEP_NAMES,
    STEP_TITLES,
    breakdowns,
    cell_hover,
    fixed,
    markdown_text,
    row_latex,
    step_caption,
    subscript,
)

# -- number formatting ----------------------------------------------------------------------------


# -- per-cell hover -------------------------------------------------------------------------------


# -- the pipeline ---------------------------------------------------------------------------------


def show_pipeline(
    steps: AttentionSteps,
    *,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    key: str,
    filename: str,
    upto: int | None = None,
    scoring: str = "scaled_dot",
    downloads: bool = True,
) -> None:
    """Draw the steps of one 2-D attention computation, one panel per step.

    steps         2-D AttentionSteps (scores `(q_pos, k_pos)`, output `(q_pos, d_v)`)
    q, k, v       the inputs the steps were computed from, `(q_pos, d_k)`, `(k_pos, d_k)`,
                  `(k_pos, d_v)` (used for the "how it was computed" hover)
    query_labels  one token per query row; key_labels one per key row
    key           a unique widget-key prefix ("scaled_dot_product.pipeline", "multi_head.head3")
    filename      the stem of downloaded files and PNGs ("sdpa" -> "sdpa-weights.csv")
    upto          show only the first `upto` steps (1..5), e.g. when a presenter steps through
    scoring       a SCORING_FUNCTIONS key; changes how scores are explained
    downloads     whether to offer each step as CSV / .npy / LaTeX under the panels
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    query_labels, key_labels = tuple(query_labels), tuple(key_labels)
    count = len(STEP_NAMES) if upto is None else max(1, min(int(upto), len(STEP_NAMES)))
    names = STEP_NAMES[:count]
    # Two panels a line, also for presenters: each step stays next to the one it came from.
    per_line = 2
    for start in range(0, len(names), per_line):
        for column, name in zip(
            st.columns(per_line), names[start : start + per_line], strict=False
        ):
            with column:
                _panel(steps, name, q, k, v, query_labels, key_labels, key, filename, scoring)
    if downloads:
        download_chooser(
            {
                STEP_TITLES[name]: (
                    np.asarray(getattr(steps, name)),
                    list(query_labels),
                    [f"d{c + 1}" for c in range(v.shape[1])]
                    if name == "output"
                    else list(key_labels),
                    f"{filename}-{name}",
                )
                for name in names
            },
            key=f"{key}.download",
            label="Download a step",
            row_title="query",
        )


def _panel(
    steps: AttentionSteps,
    name: str,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    query_labels: tuple[str, ...],
    key_labels: tuple[str, ...],
    key: str,
    filename: str,
    scoring: str,
) -> None:
    # The title and the caption in one element: a panel is drawn for every step on every run.
    caption = step_caption(name, steps, d_k=q.shape[1], scoring=scoring)
    caption = caption.replace("[", "\\[").replace("]", "\\]")
    st.markdown(f"**{STEP_TITLES[name]}**  \n:small[:gray[{caption}]]")
    fig = render.cached(step_figure, steps, name, q, k, v, query_labels, key_labels, scoring)
    render.show(fig, filename=f"{filename}-{name}", key=f"{key}.{name}.chart")
    if name == "weights":
        sums = np.asarray(steps.weights).sum(axis=-1)
        st.caption(
            "Row sums: "
            + ", ".join(f"{label} {fixed(s)}" for label, s in zip(query_labels, sums, strict=True))
        )


def step_figure(
    steps: AttentionSteps,
    name: str,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    scoring: str,
) -> go.Figure:
    """The heatmap of one step, each cell's hover saying how it was computed.

    Drawn through `render.cached`: an edit usually changes only some steps, and the hover text
    is only written for the figures that are built.
    """
    values = np.asarray(getattr(steps, name), dtype=np.float64)
    output = name == "output"
    # Past the chart's own limit on hover text, the strings would only cost time.
    hover = None
    if values.size <= heatmaps.MAX_HOVER_TEXT_CELLS:
        rows = breakdowns(steps, q, k, v)
        hover = cell_hover(steps, name, q=q, k=k, v=v, scoring=scoring, rows=rows)
    return heatmaps.heatmap(
        values,
        row_labels=list(query_labels),
        col_labels=[f"d{c + 1}" for c in range(v.shape[1])] if output else list(key_labels),
        kind={"weights": "weights", "output": "values"}.get(name, "scores"),
        hover=hover,
        col_title="output dimension" if output else "key",
        decimals=4 if values.shape[1] <= 4 else 2,
    )


def presenter_steps(view: PageState) -> int | None:
    """In presenter mode, Back / a slider / Next reveal the pipeline one step at a time (the
    keys ← and → step too); how many steps to show, or None (all) for everyone else.
    """
    if not is_presenting():
        return None
    count = len(STEP_NAMES)
    stepper_key = view.int_key("upto", count, lo=1, hi=count)

    def move(delta: int) -> None:
        st.session_state[stepper_key] = min(max(st.session_state[stepper_key] + delta, 1), count)

    back, slider, forward = st.columns([2, 7, 2], vertical_alignment="bottom")
    back.button("Back", icon=":material/arrow_back:", on_click=move, args=(-1,),
                shortcut="Left", key=f"{view.page}.step_back")  # fmt: skip
    upto = slider.select_slider(
        "Show steps up to",
        options=list(range(1, count + 1)),
        format_func=lambda i: STEP_TITLES[STEP_NAMES[i - 1]],
        key=stepper_key,
    )
    forward.button("Next", icon=":material/arrow_forward:", on_click=move, args=(1,),
                   shortcut="Right", key=f"{view.page}.step_next")  # fmt: skip
    return upto


# -- one row written out --------------------------------------------------------------------------


def explain_row(
    steps: AttentionSteps,
    row: int,
    *,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    scoring: str = "scaled_dot",
) -> None:
    """Write out query `row`'s whole calculation with the current numbers (st.latex).

    Arguments as in `show_pipeline`; `row` counts from 0. The key labels name the keys in a
    short legend (k₁ = “the”, ...).
    """
    st.markdown(
        f"Query {row + 1} “{markdown_text(query_labels[row])}” against the keys "
        + ", ".join(
            f"k{subscript(j)} “{markdown_text(label)}”" for j, label in enumerate(key_labels)
        )
        + "."
    )
    for heading, latex in row_latex(steps, row, q=q, k=k, v=v, scoring=scoring):
        st.markdown(f"*{heading}*")
        st.latex(latex)


# -- check my work --------------------------------------------------------------------------------


# -- why √d_k -------------------------------------------------------------------------------------


# -- scaled and unscaled, compared ----------------------------------------------------------------
