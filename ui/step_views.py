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

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError, AttentionSteps, attention_entropy
from attention_core.lessons.presets import (
    RowBreakdown,
    attention_for,
    fit_example,
    row_breakdown,
    sharp_flat_pair,
)
from attention_core.lessons.scaling import scaling_experiment
from ui import charts, compare
from ui.exports import download_chooser
from ui.state import PageState, is_presenting, write_url_after_fragment

STEP_NAMES = ("scores", "scaled", "masked", "weights", "output")
STEP_TITLES = {
    "scores": "1 · Scores",
    "scaled": "2 · Scaled",
    "masked": "3 · Masked",
    "weights": "4 · Weights (softmax)",
    "output": "5 · Output",
}
SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
# A sum with more terms than this is written with its first and last terms only (a real
# model's d_k = 64 would not fit in a tooltip).
MAX_WRITTEN_TERMS = 8
MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|$<>~")
# Tolerances a learner can pick in "check my work": decimals -> half a unit in the last place.
CHECK_DECIMALS = (1, 2, 3, 4)


# -- number formatting ----------------------------------------------------------------------------


def num(x: float, decimals: int = 4) -> str:
    """Short text for a number: at most `decimals` decimals, trailing zeros dropped, −∞ kept."""
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        return "0"
    return text.replace("-", "−")


def fixed(x: float, decimals: int = 4) -> str:
    """A number with exactly `decimals` decimals (weights: 0.4011), −0 shown as 0."""
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text.replace("-", "−")


def _factor(x: float) -> str:
    """A factor in a product: negative numbers in parentheses, 1×(−2)."""
    text = num(x)
    return f"({text})" if text.startswith("−") else text


def join_terms(terms: Iterable[Any], *, dots: str = "…", write: Callable[[Any], str] = str) -> str:
    """`a + b + c`, or `a + b + c + … + z` when there are more than MAX_WRITTEN_TERMS.

    `write` turns each kept term into text; terms that are elided are never written, which
    matters for a real model's 32-wide heads.
    """
    terms = list(terms)
    if len(terms) > MAX_WRITTEN_TERMS:
        return " + ".join([*map(write, terms[:3]), dots, write(terms[-1])])
    return " + ".join(map(write, terms))


def _sub(i: int) -> str:
    return str(i + 1).translate(SUBSCRIPTS)


def _tex(x: float, decimals: int = 4) -> str:
    """A number for LaTeX: trailing zeros dropped, -\\infty for −∞, large ones in ×10^n."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-4):
        mantissa, exponent = f"{x:.4e}".split("e")
        return rf"{mantissa}\times 10^{{{int(exponent)}}}"
    return num(x, decimals).replace("−", "-")


def _tex_factor(x: float) -> str:
    text = _tex(x)
    return f"({text})" if text.startswith("-") else text


def scale_text(scale: float, d_k: int) -> str:
    """How the scale reads: "1/√2" when it is 1/√d_k, else its value."""
    if math.isclose(scale, 1.0 / math.sqrt(d_k), rel_tol=1e-12):
        return f"1/√{d_k}"
    return num(scale)


# -- per-cell hover -------------------------------------------------------------------------------


def _breakdowns(steps: AttentionSteps, q, k, v) -> list[RowBreakdown]:
    return [row_breakdown(steps, i, q=q, k=k, v=v) for i in range(np.asarray(q).shape[0])]


def cell_hover(
    steps: AttentionSteps,
    step: str,
    *,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scoring: str = "scaled_dot",
    rows: Sequence[RowBreakdown] | None = None,
) -> list[list[str]]:
    """One line per cell of `step` saying how it was computed, e.g. `q₁·k₂ = 1×1 + 0×0 = 1`.

    `step` is one of STEP_NAMES; the result has the step's shape (`(q_pos, d_v)` for "output").
    Pass `rows` (from `row_breakdown`) to reuse breakdowns already computed.
    """
    rows = list(rows) if rows is not None else _breakdowns(steps, q, k, v)
    d_k = np.asarray(q).shape[1]
    text = []
    for i, b in enumerate(rows):
        line = []
        width = b.weighted.shape[1] if step == "output" else b.scores.shape[0]
        for j in range(width):
            line.append(_hover_one(b, step, i, j, d_k, scoring))
        text.append(line)
    return text


def _hover_one(b: RowBreakdown, step: str, i: int, j: int, d_k: int, scoring: str) -> str:
    qi, kj = f"q{_sub(i)}", f"k{_sub(j)}"
    if step == "scores":
        if scoring == "additive":
            return f"vᵀ tanh(W_q {qi} + W_k {kj}) = {num(b.scores[j])} (a small tanh network)"
        products = join_terms(
            zip(b.query, b.keys[j], strict=True), write=lambda t: f"{_factor(t[0])}×{_factor(t[1])}"
        )
        dot = f"{qi}·{kj} = {products} = {num(b.dots[j])}"
        if scoring == "cosine":
            return (
                f"cos({qi}, {kj}) = {qi}·{kj} / (‖{qi}‖ ‖{kj}‖) = {num(b.dots[j])} / "
                f"({num(b.q_norm)} × {num(b.k_norms[j])}) = {num(b.scores[j])}"
            )
        return dot
    if step == "scaled":
        return (
            f"score × scale = {num(b.scores[j])} × {scale_text(b.scale, d_k)} = {num(b.scaled[j])}"
        )
    if step == "masked":
        if not b.allowed[j]:
            return f"the mask blocks {kj} for {qi}: −∞, so its weight will be 0"
        return f"{kj} is visible to {qi}: unchanged, {num(b.scaled[j])}"
    if step == "weights":
        if not b.allowed[j]:
            return "masked: e^(−∞) = 0, so the weight is 0"
        shifted = f" − {num(b.shift)}" if b.shift else ""
        return (
            f"e^({num(b.scaled[j])}{shifted}) / Σ = {num(b.exps[j])} / {num(b.total)} = "
            f"{fixed(b.weights[j])}"
        )
    terms = join_terms(
        [(w, x) for w, x, ok in zip(b.weights, b.values[:, j], b.allowed, strict=True) if ok],
        write=lambda t: f"{fixed(t[0])}×{_factor(t[1])}",
    )
    return f"Σⱼ w{_sub(i)}ⱼ·vⱼ[{j + 1}] = {terms or '0'} = {num(b.output[j])}"


# -- the pipeline ---------------------------------------------------------------------------------


def step_caption(step: str, steps: AttentionSteps, *, d_k: int, scoring: str) -> str:
    """One sentence under each panel: what this step does, in the current setting."""
    if step == "scores":
        return {
            "additive": "Each query-key pair goes through a small tanh network: "
            "sᵢⱼ = vᵀ tanh(W_q qᵢ + W_k kⱼ).",
            "cosine": "Each query is compared with each key by the cosine of their angle "
            "(lengths ignored), in [−1, 1].",
        }.get(scoring, "Each query is compared with each key: sᵢⱼ = qᵢ·kⱼ = QKᵀ.")
    if step == "scaled":
        if scoring == "additive":
            return "Additive scores are not scaled (scale 1): the learned v sets how sharp."
        if math.isclose(steps.scale, 1.0):
            return "Scale 1: the scores go to the softmax as they are (no √d_k)."
        if scoring == "scaled_dot" and math.isclose(steps.scale, 1 / math.sqrt(d_k)):
            return (
                f"Divided by √d_k = √{d_k} = {num(math.sqrt(d_k))}, so the scores keep a spread "
                "near 1 whatever d_k is and the softmax does not saturate."
            )
        return f"Every score is multiplied by {num(steps.scale)} (the temperature and scale)."
    if step == "masked":
        if not np.isneginf(np.asarray(steps.masked)).any():
            return "No mask: every key is visible, so this is the same as the scaled scores."
        return "Blocked pairs become −∞ (grey): e^(−∞) = 0, so they get exactly zero weight."
    if step == "weights":
        return "Softmax along each row (over the keys): positive weights that sum to 1."
    return "Each output row is the weighted average of the value rows: oᵢ = Σⱼ wᵢⱼ vⱼ."


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
    key           a unique widget-key prefix ("sdpa.pipeline", "mha.head3")
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
    fig = charts.cached(step_figure, steps, name, q, k, v, query_labels, key_labels, scoring)
    charts.show(fig, filename=f"{filename}-{name}", key=f"{key}.{name}.chart")
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

    Drawn through `charts.cached`: an edit usually changes only some steps, and the hover text
    is only written for the figures that are built.
    """
    values = np.asarray(getattr(steps, name), dtype=np.float64)
    output = name == "output"
    # Past the chart's own limit on hover text, the strings would only cost time.
    hover = None
    if values.size <= charts.MAX_HOVER_TEXT_CELLS:
        rows = _breakdowns(steps, q, k, v)
        hover = cell_hover(steps, name, q=q, k=k, v=v, scoring=scoring, rows=rows)
    return charts.heatmap(
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


def row_latex(
    steps: AttentionSteps,
    row: int,
    *,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scoring: str = "scaled_dot",
) -> list[tuple[str, str]]:
    """Query `row`'s calculation as (heading, LaTeX) pairs, in the order it happens.

    Weights are given to 4 decimals and followed by their row sum.
    """
    b = row_breakdown(steps, row, q=q, k=k, v=v)
    i = row + 1
    d_k = np.asarray(q).shape[1]
    keys = range(b.scores.shape[0])
    parts: list[tuple[str, str]] = []

    lines = []
    for j in keys:
        if scoring == "additive":
            rhs = rf"v^\top \tanh(W_q q_{{{i}}} + W_k k_{{{j + 1}}}) = {_tex(b.scores[j])}"
        else:
            products = join_terms(
                zip(b.query, b.keys[j], strict=True),
                dots=r"\cdots",
                write=lambda t: rf"{_tex_factor(t[0])}\times{_tex_factor(t[1])}",
            )
            rhs = rf"q_{{{i}}}\cdot k_{{{j + 1}}} = {products} = {_tex(b.dots[j])}"
            if scoring == "cosine":
                rhs = (
                    rf"\frac{{q_{{{i}}}\cdot k_{{{j + 1}}}}}{{\lVert q_{{{i}}}\rVert\,"
                    rf"\lVert k_{{{j + 1}}}\rVert}} = \frac{{{_tex(b.dots[j])}}}"
                    rf"{{{_tex(b.q_norm)}\times{_tex(b.k_norms[j])}}} = {_tex(b.scores[j])}"
                    rf"\quad ({rhs})"
                )
        lines.append(rf"s_{{{i},{j + 1}}} &= {rhs}")
    parts.append(("Scores: compare the query with every key", _aligned(lines)))

    if math.isclose(b.scale, 1 / math.sqrt(d_k), rel_tol=1e-12):
        factor = rf"\frac{{1}}{{\sqrt{{{d_k}}}}}"
    else:
        factor = _tex(b.scale)
    lines = []
    for j in keys:
        value = rf"{_tex_factor(b.scores[j])}\times {factor} = {_tex(b.scaled[j])}"
        if not b.allowed[j]:
            value += r" \;\to\; -\infty \quad\text{(masked)}"
        lines.append(rf"\tilde s_{{{i},{j + 1}}} &= {value}")
    parts.append(("Scale (and mask)", _aligned(lines)))

    lines = []
    shift = rf" - {_tex_factor(b.shift)}" if b.shift else ""
    for j in keys:
        exponent = rf"{_tex(b.scaled[j])}{shift}" if b.allowed[j] else r"-\infty"
        lines.append(rf"e^{{{exponent}}} &= {_tex(b.exps[j])}")
    heading = "Exponentials"
    if b.shift:
        heading += (
            f" (the largest score, {num(b.shift)}, is subtracted first so e^x stays printable; "
            "it cancels in the ratio, the weights do not change)"
        )
    parts.append((heading, _aligned(lines)))

    terms = join_terms(
        [e for e, ok in zip(b.exps, b.allowed, strict=True) if ok], dots=r"\cdots", write=_tex
    )
    parts.append(("Their sum", rf"Z = {terms or '0'} = {_tex(b.total)}"))

    if b.total == 0:
        parts.append(("Weights", r"\text{every key is masked: all weights and the output are } 0"))
        return parts
    lines = [
        rf"w_{{{i},{j + 1}}} &= \frac{{{_tex(b.exps[j])}}}{{{_tex(b.total)}}} = "
        rf"{fixed(b.weights[j]).replace('−', '-')}"
        for j in keys
    ]
    lines.append(rf"\textstyle\sum_j w_{{{i},j}} &= {fixed(float(b.weights.sum()))}")
    parts.append(("Weights (4 decimals) and their row sum", _aligned(lines)))

    lines = []
    for j in keys:
        if not b.allowed[j]:
            continue
        lead = r"o_{" + str(i) + "} &= " if not lines else r" &\;+ "
        lines.append(
            rf"{lead}{fixed(b.weights[j]).replace('−', '-')}\times{_tex_vector(b.values[j])}"
            rf" = {_tex_vector(b.weighted[j])}"
        )
    lines.append(rf" &= {_tex_vector(b.output)}")
    parts.append(("Output: the weighted sum of the value rows", _aligned(lines)))
    return parts


def _markdown_text(text: str) -> str:
    """A token shown as typed: Markdown and LaTeX markers are escaped."""
    return "".join("\\" + c if c in MARKDOWN_SPECIALS else c for c in str(text))


def _aligned(lines: list[str]) -> str:
    return r"\begin{aligned}" + r" \\ ".join(lines) + r"\end{aligned}"


def _tex_vector(values: np.ndarray) -> str:
    if len(values) > MAX_WRITTEN_TERMS:
        entries = [*map(_tex, values[:3]), r"\ldots", _tex(values[-1])]
    else:
        entries = [_tex(x) for x in values]
    return r"[" + r",\ ".join(entries) + r"]"


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
        f"Query {row + 1} “{_markdown_text(query_labels[row])}” against the keys "
        + ", ".join(f"k{_sub(j)} “{_markdown_text(label)}”" for j, label in enumerate(key_labels))
        + "."
    )
    for heading, latex in row_latex(steps, row, q=q, k=k, v=v, scoring=scoring):
        st.markdown(f"*{heading}*")
        st.latex(latex)


# -- check my work --------------------------------------------------------------------------------


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
    if text.startswith("✓"):
        return "background-color: #c7e9c0; color: #00441b"
    if text.startswith("✗"):
        return "background-color: #fcbba1; color: #67000d"
    return ""


def _answer_editor(key: str, row_labels: Sequence[str], col_labels: Sequence[str]) -> np.ndarray:
    columns = [f"c{j + 1}" for j in range(len(col_labels))]
    blank = pd.DataFrame(np.full((len(row_labels), len(col_labels)), np.nan), columns=columns)
    blank.insert(0, "query", unique_labels(row_labels))
    edited = st.data_editor(
        blank,
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


def show_sharp_vs_flat(
    sizes: tuple[int, int, int, int], *, scoring: str, tau: float, causal: bool, key: str
) -> None:
    """The same keys against queries 20× longer: weights side by side, their peak and entropy.

    `sizes` (n_q, n_k, d_k, d_v) fit the pair to the page's example; the settings are the page's.
    """
    st.subheader("Sharp vs flat: the same keys, queries 20× longer")
    pair = [fit_example(e, *sizes) for e in sharp_flat_pair()]
    pair_steps = [attention_for(e.q, e.k, e.v, scoring=scoring, temperature=tau, causal=causal)
                  for e in pair]  # fmt: skip
    charts.show(
        charts.cached(
            charts.heatmap_grid,
            np.stack([s.weights for s in pair_steps]),
            titles=("flat (queries × 0.5)", "sharp (queries × 10)"),
            row_labels=pair[0].query_labels,
            col_labels=pair[0].key_labels,
            columns=2,
        ),
        filename=f"{key}-sharp-vs-flat",
        key=f"{key}.sharp_flat",
    )
    for column, label, s in zip(st.columns(2), ("Flat", "Sharp"), pair_steps, strict=True):
        column.metric(f"{label}: mean largest weight", f"{s.weights.max(axis=-1).mean():.4f}")
        column.metric(f"{label}: mean entropy (nats)", f"{attention_entropy(s.weights).mean():.4f}")
    st.caption(
        "Large scores push the softmax towards one-hot: almost all weight on one key, entropy "
        "near 0, and (see below) almost no gradient. Small scores give a nearly even spread."
    )


# -- why √d_k -------------------------------------------------------------------------------------

SCALING_D_K = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@st.cache_data(show_spinner=False, max_entries=8)
def scaling_results(num_keys: int = 16, num_samples: int = 2000, seed: int = 0):
    """`attention_core.scaling_experiment` over SCALING_D_K, cached (it takes ~0.2 s)."""
    return scaling_experiment(SCALING_D_K, num_samples=num_samples, num_keys=num_keys, seed=seed)


def scaling_figure(field: str, num_keys: int, seed: int) -> go.Figure:
    """One figure of the √d_k experiment: "variance", or a SCALING_PANELS field."""
    result = scaling_results(num_keys=num_keys, seed=seed)
    d_k = np.asarray(result.d_k)
    if field == "variance":
        return charts.line_plot(
            d_k,
            {
                "measured Var(q·k)": result.dot_variance,
                "y = d_k": d_k.astype(np.float64),
                "measured Var(q·k / √d_k)": result.scaled_dot_variance,
            },
            x_title="d_k (width of q and k)",
            y_title="variance of the score",
            title="Var(q·k) grows like d_k; dividing by √d_k keeps it at 1",
            log_x=True,
            log_y=True,
            dashed=("y = d_k",),
            markers=True,
        )
    label, note = {field: (label, note) for field, label, note in SCALING_PANELS}[field]
    return charts.line_plot(
        d_k,
        {
            "without scaling": getattr(result, f"{field}_unscaled"),
            "with 1/√d_k": getattr(result, f"{field}_scaled"),
        },
        x_title="d_k",
        y_title=label,
        title=note.format(num_keys=num_keys, log_keys=math.log(num_keys)),
        log_x=True,
        markers=True,
    )


SCALING_PANELS = (
    ("max_weight", "largest weight in a row", "1 = all weight on one key"),
    ("entropy", "entropy of a row (nats)", "uniform = log {num_keys} = {log_keys:.2f}"),
    ("gradient_norm", "softmax gradient size ‖J‖", "0 = no gradient reaches the scores"),
)


@st.fragment
def why_scale(view: PageState, *, key: str) -> None:
    """The "Why divide by √d_k?" expander; its experiment is drawn once opened (links can)."""
    why = st.expander("Why divide by √d_k?", icon=":material/functions:",
                      key=view.bool_key("why", False), on_change="rerun")  # fmt: skip
    if why.open:
        with why:
            show_scaling_experiment(key=key)
    write_url_after_fragment(view)


def show_scaling_experiment(*, key: str, num_keys: int = 16, seed: int = 0) -> None:
    """Why divide by √d_k: measured Var(q·k) against d_k with the line y = d_k, and the softmax
    over `num_keys` random keys (max weight, entropy, gradient size) with and without scaling.
    """
    st.markdown(
        "If the entries of q and k are independent with mean 0 and variance 1, then "
        "q·k = Σᵢ qᵢkᵢ is a sum of d_k terms of variance 1, so its variance is d_k. Wide "
        "heads give large scores, and the softmax of large scores is nearly one-hot, "
        "which passes almost no gradient back. Measured here over random vectors:"
    )
    result = scaling_results(num_keys=num_keys, seed=seed)
    charts.show(
        charts.cached(scaling_figure, "variance", num_keys, seed),
        filename="why-sqrt-dk-variance",
        key=f"{key}.variance",
    )
    for column, (field, _, _) in zip(st.columns(3), SCALING_PANELS, strict=True):
        with column:
            charts.show(
                charts.cached(scaling_figure, field, num_keys, seed),
                filename=f"why-sqrt-dk-{field.replace('_', '-')}",
                key=f"{key}.{field}",
            )
    d_k = np.asarray(result.d_k)
    last = len(d_k) - 1
    st.caption(
        f"{result.num_samples:,} random queries against {num_keys} keys, entries N(0, 1). At "
        f"d_k = {d_k[last]}: Var(q·k) = {result.dot_variance[last]:.1f}, and the largest weight "
        f"is {result.max_weight_unscaled[last]:.3f} without scaling against "
        f"{result.max_weight_scaled[last]:.3f} with it."
    )


# -- scaled and unscaled, compared ----------------------------------------------------------------


@st.fragment
def compare_scaling(
    view: PageState, example: Any, scoring: str, temperature: float, causal: bool
) -> None:
    """`example`'s weights with the dot product divided by √d_k (A) and not (B), at the page's
    temperature and mask; `scoring` is the page's choice, which must be the dot product."""
    box = compare.opened(view, label="Compare: scaled and unscaled")
    if box is not None:
        with box:
            if scoring != "dot_product":
                st.info("Only the dot product is divided by √d_k: choose it as the scoring "
                        "function to compare.", icon=":material/info:")  # fmt: skip
            else:
                try:
                    a, b = (
                        attention_for(example.q, example.k, example.v, scoring=name,
                                      temperature=temperature, causal=causal).weights
                        for name in ("scaled_dot", "dot")
                    )  # fmt: skip
                except AttentionInputError as error:
                    st.error(str(error), icon=":material/error:")
                else:
                    d_k = example.q.shape[1]
                    compare.show(a, b, names=(f"divided by √{d_k}", "not scaled"),
                                 query_labels=example.query_labels, key_labels=example.key_labels,
                                 filename="sdpa-scaling-compare")  # fmt: skip
    write_url_after_fragment(view)
