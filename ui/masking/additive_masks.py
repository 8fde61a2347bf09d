"""“Why −∞ and not −1e9?”: one query's scores plus an additive mask, with −∞ or a large
negative fill (−1e9, BERT's −1e4, the float16 minimum), every step in the chosen precision, and
the weight that leaks onto the blocked keys as the scores grow.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core.lessons.mask_experiments import (
    FLOAT16_MIN,
    additive_mask_softmax,
    leak_curve,
)
from ui.masking.example import PAD
from ui.widgets import lines, render
from ui.widgets.state import PageState, write_url_after_fragment

LEAK_KEYS = ("the", "cat", PAD, PAD)
LEAK_SCORES = np.array([-1.0, -0.5, 1.0, 0.5])
LEAK_ALLOWED = np.array([True, True, False, False])
FILLS = {
    "−∞": -np.inf,
    "−1e9": -1e9,
    "−1e4 (original BERT)": -1e4,
    "float16 min (−65504)": FLOAT16_MIN,
}
SCALES = ("1", "10", "100", "1e3", "1e4", "3e4", "6e4", "1e5", "1e6", "1e8", "1e9", "1e10")
LEAK_DTYPES = ("float16", "float32", "float64")


@st.fragment
def minus_infinity_versus_a_fill(view: PageState) -> None:
    """The leak demo: one query's scores plus an additive mask, for every fill, in one dtype."""
    controls = st.columns(3)
    dtype = controls[0].segmented_control(
        "Precision", LEAK_DTYPES, key=view.choice_key("leak_dtype", "float16", LEAK_DTYPES)
    )
    dtype = dtype or "float16"
    scale = controls[1].select_slider(
        "Score scale", SCALES, key=view.choice_key("scale", "1e4", SCALES)
    )
    all_blocked = controls[2].toggle(
        "Block every key (a padding query)", key=view.bool_key("all_blocked", False)
    )
    allowed = np.zeros(4, bool) if all_blocked else LEAK_ALLOWED
    rows = {
        name: additive_mask_softmax(
            LEAK_SCORES, allowed, fill=fill, dtype=dtype, scale=float(scale)
        )
        for name, fill in FILLS.items()
    }
    key_columns = [
        f"{j + 1} {key}" + ("" if allowed[j] else " (blocked)") for j, key in enumerate(LEAK_KEYS)
    ]
    fill_index = pd.Index(list(rows), name="fill")
    st.markdown(f"**Scores plus mask, s + m, computed in {dtype}**")
    st.dataframe(
        pd.DataFrame(
            [[float(row.stored_fill)] + [float(x) for x in row.biased] for row in rows.values()],
            index=fill_index,
            columns=[f"fill in {dtype}", *key_columns],
        ).style.format("{:.6g}"),
        width="stretch",
    )
    st.markdown(f"**Weights, softmax(s + m) in {dtype}**")
    st.dataframe(
        pd.DataFrame(
            [
                [float(x) for x in row.weights] + [float(row.leaked), float(row.weight_sum)]
                for row in rows.values()
            ],
            index=fill_index,
            columns=[*key_columns, "weight on blocked keys", "Σ weights"],
        ).style.format("{:.6g}"),
        width="stretch",
    )
    st.markdown(leak_summary(rows, scale, dtype))
    render.show(
        render.cached(leak_figure, dtype, scale, all_blocked), filename=f"mask-leak-{dtype}"
    )
    write_url_after_fragment(view)


def leak_summary(rows: dict, scale: str, dtype: str) -> str:
    """What each fill leaves on the blocked keys, and why −∞ leaves nothing."""
    sentences = [
        f"Scale {scale}, {dtype}: "
        + "; ".join(
            f"{name} leaves **{float(row.leaked):.4g}** of the weight on blocked keys"
            for name, row in rows.items()
        )
        + "."
    ]
    if np.isneginf(rows["−1e9"].stored_fill):
        sentences.append(f"{dtype} cannot store −1e9: it rounds to −∞ (largest float16: 65504).")
    if any(row.scores_overflow for row in rows.values()):
        sentences.append(
            f"The scaled scores do not fit in {dtype}: they overflow to ±∞ and the softmax "
            "returns NaN."
        )
    sentences.append(
        "A finite fill only lowers a blocked score by |fill|: once a blocked key outscores the "
        "allowed ones by more than that, it wins the softmax. With −∞, exp(−∞) = 0 whatever the "
        "scores, and the stable softmax (which subtracts the row maximum) never overflows. A "
        "fully blocked row is the worst case: any finite fill spreads the whole weight over the "
        "keys it was told to ignore, while −∞ gives zeros."
    )
    return "\n\n".join(sentences)


def leak_figure(dtype: str, scale: str, all_blocked: bool) -> go.Figure:
    """Weight leaked onto the blocked keys over score scales 1..1e10, one line per fill, with
    the chosen scale marked."""
    allowed = np.zeros(4, bool) if all_blocked else LEAK_ALLOWED
    scales = np.logspace(0, 10, 81)
    curves = {
        name: leak_curve(LEAK_SCORES, allowed, scales, fill=fill, dtype=dtype)
        for name, fill in FILLS.items()
    }
    figure = lines.line_plot(
        scales,
        curves,
        x_title="score scale",
        y_title="weight on blocked keys",
        title=f"Weight leaked onto blocked keys, {dtype} (gaps: scores overflow)",
        log_x=True,
        dashed=["−∞"],
    )
    return figure.add_vline(x=float(scale), line_dash="dot", line_color="#888")
