"""The positional-encoding page's cached arrays and figures.

Tables reach 2048 positions × 1024 dimensions (16 MB each), and the similarity matrix 2048²:
every derived array is cached here with `st.cache_data` and every figure with
`st.cache_resource`, keyed by the settings that define it (and by presenter mode, which changes
a figure's fonts), so a rerun after an unrelated control change rebuilds nothing. Nothing
here computes a formula: the numbers come from `attention_core`; this module lays them out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import (
    alibi_slopes,
    learned_encoding,
    sinusoid_wavelengths,
    sinusoidal_encoding,
)
from attention_core.position_lab import (
    LEARNED_STD,
    OffsetProfile,
    OrderBlindness,
    PositionBreakdown,
    RotationExample,
    ShiftCheck,
    causal_alibi,
    offset_profile,
    order_blindness,
    permutation,
    position_breakdown,
    rotation_example,
    same_content_scores,
    shift_check,
    similarity_matrix,
    toeplitz_deviation,
    unseen_angle_share,
)
from ui import charts
from ui.state import is_presenting

# Big tables: a handful of settings is enough to go back and forth without recomputing.
_BIG = {"max_entries": 4, "show_spinner": False}
_SMALL = {"max_entries": 64, "show_spinner": False}
# Figures are shared, never mutated after they are built, and kept as objects: unpickling a
# plotly Figure (what st.cache_data would do on every hit) re-validates it and costs more than
# building it again.
_figure_cache = st.cache_resource(max_entries=48, show_spinner=False)

FAMILY_TITLES = {
    "sinusoidal": "Sinusoidal (added)",
    "learned": "Learned table (added)",
    "rotary": "Rotary (RoPE)",
    "alibi": "ALiBi (score bias)",
}


def keep(key: str) -> str:
    """Keep a widget's value when its range follows another control.

    Streamlit treats a slider whose min/max (or a multiselect whose options) changed as a new
    widget and restarts it at its default; stating the value through Session State before the
    widget is drawn carries it over (PageState has already fitted it into the new range).
    """
    st.session_state[key] = st.session_state[key]
    return key


def _labels(count: int) -> list[str]:
    return [str(i) for i in range(count)]


# -- the sinusoidal table ---------------------------------------------------------------------


@st.cache_data(**_BIG)
def pe_table(num_positions: int, d_model: int, base: float) -> np.ndarray:
    return sinusoidal_encoding(num_positions, d_model, base)


def _table_heatmap(table: np.ndarray, title: str) -> go.Figure:
    """A positions × dimensions table, positions down, dimensions across."""
    num_positions, d_model = table.shape
    return charts.heatmap(
        table,
        row_labels=_labels(num_positions),
        col_labels=_labels(d_model),
        kind="scores",
        row_title="position",
        col_title="dimension",
        title=title,
    )


@_figure_cache
def _pe_figure(num_positions: int, d_model: int, base: float, presenting: bool) -> go.Figure:
    return _table_heatmap(
        pe_table(num_positions, d_model, base),
        f"PE: {num_positions} positions × {d_model} dimensions",
    )


def pe_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    """Heatmap of the table, positions down, dimensions across (block-averaged when large)."""
    return _pe_figure(num_positions, d_model, base, is_presenting())


def dimension_name(dimension: int, d_model: int, base: float) -> str:
    """'dim 4 (sin, i=2): wavelength 2π·10000^(4/64) = 11.2' — the legend of a dimension."""
    pair = dimension // 2
    wavelength = sinusoid_wavelengths(d_model, base)[pair]
    function = "sin" if dimension % 2 == 0 else "cos"
    return (
        f"dim {dimension} ({function}, i={pair}): wavelength 2π·{base:g}^({2 * pair}/{d_model})"
        f" = {wavelength:,.4g}"
    )


@_figure_cache
def _dimensions_figure(
    num_positions: int, d_model: int, base: float, dims: tuple[int, ...], presenting: bool
) -> go.Figure:
    table = pe_table(num_positions, d_model, base)
    series = {dimension_name(j, d_model, base): table[:, j] for j in dims}
    return charts.line_plot(
        np.arange(num_positions),
        series,
        x_title="position p",
        y_title="PE[p, dim]",
        title="Chosen dimensions across positions",
    )


def dimensions_figure(
    num_positions: int, d_model: int, base: float, dims: Sequence[int]
) -> go.Figure:
    return _dimensions_figure(num_positions, d_model, base, tuple(dims), is_presenting())


@st.cache_data(**_SMALL)
def breakdown(position: int, d_model: int, base: float) -> PositionBreakdown:
    return position_breakdown(position, d_model, base)


def breakdown_frame(b: PositionBreakdown) -> pd.DataFrame:
    """One row per dimension: what is computed, from which angle, and the value."""
    return pd.DataFrame(
        {
            "dimension": b.dimension,
            "i (pair)": b.pair,
            "function": b.function,
            "ω_i = base^(-2i/d)": b.frequency,
            "angle p·ω_i": b.angle,
            "wavelength 2π/ω_i": b.wavelength,
            "PE[p, dimension]": b.value,
        }
    )


# -- similarity and the rotation ----------------------------------------------------------------


@st.cache_data(**_BIG)
def similarity(num_positions: int, d_model: int, base: float) -> np.ndarray:
    return similarity_matrix(pe_table(num_positions, d_model, base))


@st.cache_data(**_BIG)
def similarity_profile(num_positions: int, d_model: int, base: float) -> OffsetProfile:
    return offset_profile(similarity(num_positions, d_model, base), nonnegative=True)


@_figure_cache
def _similarity_figure(
    num_positions: int, d_model: int, base: float, presenting: bool
) -> go.Figure:
    labels = _labels(num_positions)
    return charts.heatmap(
        similarity(num_positions, d_model, base),
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        row_title="query position",
        col_title="key position",
        title="PE·PEᵀ: dot product of every pair of positions",
    )


def similarity_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    return _similarity_figure(num_positions, d_model, base, is_presenting())


@_figure_cache
def _similarity_profile_figure(
    num_positions: int, d_model: int, base: float, presenting: bool
) -> go.Figure:
    return profile_figure(
        similarity_profile(num_positions, d_model, base),
        title="PE(p)·PE(p+k) as a function of the distance k",
        y_title="dot product",
    )


def similarity_profile_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    return _similarity_profile_figure(num_positions, d_model, base, is_presenting())


def profile_figure(profile: OffsetProfile, *, title: str, y_title: str) -> go.Figure:
    """Mean, smallest and largest value at each offset: one line when only the offset matters."""
    return charts.line_plot(
        profile.offsets,
        {
            "mean over all positions p": profile.mean,
            "smallest over p": profile.low,
            "largest over p": profile.high,
        },
        x_title="offset k = key position − query position",
        y_title=y_title,
        title=title,
        dashed=("smallest over p", "largest over p"),
    )


@st.cache_data(**_SMALL)
def shift(num_positions: int, d_model: int, offset: int, base: float) -> ShiftCheck:
    return shift_check(num_positions, d_model, offset, base)


@st.cache_data(**_SMALL)
def rotation(position: int, offset: int, pair: int, d_model: int, base: float) -> RotationExample:
    return rotation_example(position, offset, pair, d_model, base)


def _column(values: Sequence[float]) -> str:
    return r"\begin{bmatrix}" + r" \\ ".join(f"{v:.6f}" for v in values) + r"\end{bmatrix}"


def rotation_latex(r: RotationExample) -> str:
    """PE pair at p+k = R(ω_i k) · PE pair at p, with the numbers filled in."""
    (a, b), (c, d) = r.rotation
    matrix = rf"\begin{{bmatrix}} {a:.6f} & {b:.6f} \\ {c:.6f} & {d:.6f} \end{{bmatrix}}"
    return (
        rf"\underbrace{{{_column(r.rotated)}}}_{{R\,\cdot\,\mathrm{{PE}}({r.position})}}"
        rf" = \underbrace{{{matrix}}}_{{\omega_{{{r.pair}}} k\,=\,{r.angle:.6f}\ \mathrm{{rad}}}}"
        rf"\underbrace{{{_column(r.before)}}}_{{\mathrm{{PE}}({r.position})"
        rf"_{{{2 * r.pair},{2 * r.pair + 1}}}}}"
    )


# -- a sentence: embeddings, positions and order blindness --------------------------------------


@st.cache_data(**_SMALL)
def blindness(
    tokens: tuple[str, ...], order_kind: str, width: int, encoding: str, seed: int, base: float
) -> OrderBlindness:
    order = permutation(order_kind, len(tokens))
    return order_blindness(tokens, order, width, encoding=encoding, seed=seed, base=base)


def _small_heatmap(
    values: np.ndarray,
    rows: Sequence[str],
    *,
    title: str,
    kind: charts.Kind = "values",
    cols: Sequence[str] | None = None,
    row_title: str = "token",
    col_title: str = "dimension",
    decimals: int = 2,
) -> go.Figure:
    """An annotated heatmap of a few tokens × a few dimensions (or queries × keys)."""
    cols = [f"d{j}" for j in range(values.shape[1])] if cols is None else cols
    return charts.heatmap(
        values,
        row_labels=rows,
        col_labels=cols,
        kind=kind,
        title=title,
        row_title=row_title,
        col_title=col_title,
        decimals=decimals,
    )


@_figure_cache
def _blindness_figures(
    tokens: tuple[str, ...],
    order_kind: str,
    width: int,
    encoding: str,
    seed: int,
    base: float,
    presenting: bool,
) -> dict[str, go.Figure]:
    b = blindness(tokens, order_kind, width, encoding, seed, base)
    words, reordered = " ".join(tokens), " ".join(b.permuted.tokens)
    pattern = {"kind": "weights", "row_title": "query", "col_title": "key"}
    return {
        "weights": _small_heatmap(
            b.weights, tokens, cols=tokens, title=f"Weights: {words}", **pattern
        ),
        "permuted_weights": _small_heatmap(
            b.permuted_weights,
            b.permuted.tokens,
            cols=b.permuted.tokens,
            title=f"Weights: {reordered}",
            **pattern,
        ),
        "output": _small_heatmap(b.output, tokens, title=f"Output: {words}"),
        "unpermuted_output": _small_heatmap(
            b.unpermuted_output, tokens, title=f"Output: {reordered}, rows put back"
        ),
        "difference": _small_heatmap(b.difference, tokens, title="Difference", decimals=3),
        "token_embeddings": _small_heatmap(
            b.original.token_embeddings, tokens, title="Token embeddings E"
        ),
        "positions": _small_heatmap(
            b.original.positions,
            [f"{p}: {t}" for p, t in enumerate(tokens)],
            title="PE" if encoding == "sinusoidal" else f"Positions ({encoding})",
            row_title="position",
        ),
        "inputs": _small_heatmap(b.original.inputs, tokens, title="Input X = E + PE"),
    }


def blindness_figures(
    tokens: tuple[str, ...], order_kind: str, width: int, encoding: str, seed: int, base: float
) -> dict[str, go.Figure]:
    """The order-blindness pictures: both weight patterns, both outputs, the difference, and
    the inputs (embeddings, positions, their sum)."""
    return _blindness_figures(tokens, order_kind, width, encoding, seed, base, is_presenting())


# -- the families ---------------------------------------------------------------------------------


@st.cache_data(**_SMALL)
def family_scores(
    family: str,
    num_positions: int,
    d_model: int,
    seed: int,
    base: float,
    num_heads: int,
    head: int,
) -> np.ndarray:
    return same_content_scores(
        family, num_positions, d_model, seed=seed, base=base, num_heads=num_heads, head=head
    )


@st.cache_data(**_SMALL)
def deviation(matrix: np.ndarray) -> float:
    return toeplitz_deviation(matrix)


@_figure_cache
def _family_figure(
    family: str,
    num_positions: int,
    d_model: int,
    seed: int,
    base: float,
    num_heads: int,
    head: int,
    train_length: int | None,
    presenting: bool,
) -> go.Figure:
    scores = family_scores(family, num_positions, d_model, seed, base, num_heads, head)
    labels = _labels(num_positions)
    fig = charts.heatmap(
        scores,
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        title=FAMILY_TITLES[family],
        row_title="query position",
        col_title="key position",
        annotate=False,
        height=340 if train_length is None else 380,
    )
    if num_positions > 16:
        # Thousands of per-cell hover texts cost the browser megabytes; position and value
        # say all there is to say about a cell here.
        fig.update_traces(
            hovertext=None,
            hovertemplate="query position %{y}, key position %{x}: %{z:.4f}<extra></extra>",
        )
        fig.update_traces(
            selector={"name": "masked"},
            hovertemplate="query position %{y}, key position %{x}: masked (−∞)<extra></extra>",
        )
    if num_positions > 24:
        # Half-width panels: a label every few positions stays readable.
        shown = list(range(0, num_positions, -(-num_positions // 8)))
        fig.update_xaxes(tickvals=shown, ticktext=[str(p) for p in shown])
        fig.update_yaxes(tickvals=shown, ticktext=[str(p) for p in shown])
    if train_length is not None:
        _mark_training_length(fig, train_length, num_positions)
    return fig


def family_figure(
    family: str,
    num_positions: int,
    d_model: int,
    seed: int,
    base: float,
    num_heads: int,
    head: int,
    *,
    train_length: int | None = None,
) -> go.Figure:
    """Same-content scores of one family; with `train_length`, the trained square outlined."""
    return _family_figure(
        family, num_positions, d_model, seed, base, num_heads, head, train_length, is_presenting()
    )


@_figure_cache
def _rope_profile_figure(
    num_positions: int, d_model: int, seed: int, base: float, presenting: bool
) -> go.Figure:
    scores = family_scores("rotary", num_positions, d_model, seed, base, 1, 0)
    return profile_figure(
        offset_profile(scores),
        title="RoPE score by offset: one line, whatever the positions",
        y_title="score / √d",
    )


def rope_profile_figure(num_positions: int, d_model: int, seed: int, base: float) -> go.Figure:
    """Mean, smallest and largest RoPE score at each offset, for identical content."""
    return _rope_profile_figure(num_positions, d_model, seed, base, is_presenting())


@st.cache_data(**_BIG)
def learned_table(num_positions: int, d_model: int, seed: int) -> np.ndarray:
    return learned_encoding(num_positions, d_model, seed=seed, std=LEARNED_STD)


@_figure_cache
def _learned_figure(num_positions: int, d_model: int, seed: int, presenting: bool) -> go.Figure:
    return _table_heatmap(
        learned_table(num_positions, d_model, seed),
        f"A random 'learned' table: {num_positions} positions × {d_model} dimensions",
    )


def learned_figure(num_positions: int, d_model: int, seed: int) -> go.Figure:
    return _learned_figure(num_positions, d_model, seed, is_presenting())


def slopes_frame(num_heads: int) -> pd.DataFrame:
    slopes = alibi_slopes(num_heads)
    return pd.DataFrame(
        {
            "head": np.arange(1, num_heads + 1),
            "slope m": slopes,
            "as a power of 2": [f"2^{np.log2(m):.4g}" for m in slopes],
        }
    )


def alibi_grid(num_heads: int, num_positions: int) -> go.Figure:
    """The causal bias of every head, one small heatmap each, on one colour scale."""
    return _alibi_grid(num_heads, num_positions, is_presenting())


@_figure_cache
def _alibi_grid(num_heads: int, num_positions: int, presenting: bool) -> go.Figure:
    labels = _labels(num_positions)
    slopes = alibi_slopes(num_heads)
    return charts.heatmap_grid(
        causal_alibi(num_heads, num_positions),
        titles=[f"head {h + 1}: m = {m:.4g}" for h, m in enumerate(slopes)],
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        columns=4,
    )


def _mark_training_length(fig: go.Figure, train_length: int, total: int) -> None:
    """Outline the square of positions seen in training (0 .. L-1) on a position heatmap."""
    edge = train_length - 0.5
    fig.add_shape(
        type="rect",
        x0=-0.5,
        y0=-0.5,
        x1=edge,
        y1=edge,
        line={"color": "#111111", "width": 3, "dash": "dash"},
    )
    if total > train_length:
        fig.add_annotation(
            x=edge,
            y=edge,
            text="trained up to here",
            showarrow=True,
            arrowhead=2,
            ax=40,
            ay=30,
            font={"size": charts.font_size()},
        )


@st.cache_data(**_SMALL)
def unseen_share(train_length: int, num_positions: int, d_model: int, base: float) -> np.ndarray:
    return unseen_angle_share(train_length, num_positions, d_model, base)


@_figure_cache
def _unseen_figure(
    train_length: int, num_positions: int, d_model: int, base: float, presenting: bool
) -> go.Figure:
    share = unseen_share(train_length, num_positions, d_model, base)
    fig = charts.line_plot(
        np.arange(share.size),
        {"sinusoidal at position p  =  RoPE at offset p": 100 * share},
        x_title="position p (sinusoidal) or offset p (RoPE)",
        y_title="% of (sin, cos) pairs at a new angle",
        title="Angles never seen in training",
    )
    fig.add_vline(
        x=train_length - 1,
        line={"dash": "dash", "color": "#111111"},
        annotation_text=f"training length {train_length}",
    )
    return fig


def unseen_figure(train_length: int, num_positions: int, d_model: int, base: float) -> go.Figure:
    """The share of (sin, cos) pairs at an angle training never reached, position by position."""
    return _unseen_figure(train_length, num_positions, d_model, base, is_presenting())
