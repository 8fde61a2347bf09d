"""The positional-encoding page's derived arrays, figure builders and link plumbing.

Tables reach 2048 positions × 1024 dimensions (16 MB each), and the similarity matrix 2048²:
derived arrays are cached with `st.cache_data` keyed by the settings that define them, and the
page draws every figure through `render.cached(builder, *inputs)`, so a rerun after an
unrelated control change rebuilds nothing and every viewer of one link shares one figure.
Builders are plain functions of their inputs. Nothing here computes a formula: the numbers
come from `attention_core`; this module lays them out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import (
    AttentionInputError,
    alibi_slopes,
    learned_encoding,
    sinusoid_wavelengths,
    sinusoidal_encoding,
)
from attention_core.lessons.position_experiments import (
    LEARNED_STD,
    POSITION_FAMILIES,
    SENTENCE_ENCODINGS,
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
from ui.widgets import compare, heatmaps, lines, render, theme
from ui.widgets.state import PageState, write_url_after_fragment

# Big tables: only needed when a figure is built, and a cache hit unpickles a copy.
_BIG = {"max_entries": 2, "show_spinner": False}
_SMALL = {"max_entries": 64, "show_spinner": False}

MAX_WORDS = 8
DEFAULT_SENTENCE = "I love AI"
FAMILY_TITLES = {
    "sinusoidal": "Sinusoidal (added)",
    "learned": "Learned table (added)",
    "rotary": "Rotary (RoPE)",
    "alibi": "ALiBi (score bias)",
}
BREAKDOWN_COLUMNS = {
    "ω_i = base^(-2i/d)": st.column_config.NumberColumn(format="%.6g"),
    "angle p·ω_i": st.column_config.NumberColumn(format="%.6g"),
    "wavelength 2π/ω_i": st.column_config.NumberColumn(format="%.6g"),
    "PE[p, dimension]": st.column_config.NumberColumn(format="%.10f"),
}


# -- link and widget plumbing -------------------------------------------------------------------


def keep(key: str) -> str:
    """Keep a widget's value when its range follows another control.

    Streamlit treats a slider whose min/max (or a multiselect whose options) changed as a new
    widget and restarts it at its default; stating the value through Session State before the
    widget is drawn carries it over (PageState has already fitted it into the new range).
    """
    st.session_state[key] = st.session_state[key]
    return key


def even_d_model_key(view: PageState) -> str:
    """Key of the d_model slider; an odd d_model from a link is rounded down, with a notice."""
    key = view.int_key("d_model", 64, lo=2, hi=1024)
    odd = view.value("d_model")
    if odd % 2:
        view.set("d_model", odd - 1)
        view.notices.append(
            f"The link's `d_model={odd}` was rounded to {odd - 1}: the encodings use (sin, cos) "
            "pairs, so d_model is even here."
        )
    return key


def sentence_words(sentence: str) -> tuple[tuple[str, ...], str | None]:
    """The words of the sentence (at most MAX_WORDS), and what to tell the learner, if anything."""
    words = sentence.split()
    if not words:
        return tuple(DEFAULT_SENTENCE.split()), (
            "The sentence is empty: type a few words separated by spaces."
        )
    if len(words) > MAX_WORDS:
        return tuple(words[:MAX_WORDS]), (
            f"Only the first {MAX_WORDS} words are used: attention tables stay readable."
        )
    return tuple(words), None


def show(build, *args, filename: str) -> None:
    """Draw `build(*args)`, built once per distinct input (`render.cached`)."""
    render.show(render.cached(build, *args), filename=filename)


def _labels(count: int) -> list[str]:
    return [str(i) for i in range(count)]


# -- the sinusoidal table ---------------------------------------------------------------------


@st.cache_data(**_BIG)
def pe_table(num_positions: int, d_model: int, base: float) -> np.ndarray:
    return sinusoidal_encoding(num_positions, d_model, base)


def _table_heatmap(table: np.ndarray, title: str) -> go.Figure:
    """A positions × dimensions table, positions down, dimensions across."""
    num_positions, d_model = table.shape
    return heatmaps.heatmap(
        table,
        row_labels=_labels(num_positions),
        col_labels=_labels(d_model),
        kind="scores",
        row_title="position",
        col_title="dimension",
        title=title,
    )


def pe_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    """Heatmap of the table, positions down, dimensions across (block-averaged when large)."""
    return _table_heatmap(
        pe_table(num_positions, d_model, base),
        f"PE: {num_positions} positions × {d_model} dimensions",
    )


def dimension_name(dimension: int, d_model: int, base: float) -> str:
    """'dim 4 (sin, i=2): wavelength 2π·10000^(4/64) = 11.2' — the legend of a dimension."""
    pair = dimension // 2
    wavelength = sinusoid_wavelengths(d_model, base)[pair]
    function = "sin" if dimension % 2 == 0 else "cos"
    return (
        f"dim {dimension} ({function}, i={pair}): wavelength 2π·{base:g}^({2 * pair}/{d_model})"
        f" = {wavelength:,.4g}"
    )


def dimensions_figure(
    num_positions: int, d_model: int, base: float, dims: tuple[int, ...]
) -> go.Figure:
    table = pe_table(num_positions, d_model, base)
    series = {dimension_name(j, d_model, base): table[:, j] for j in dims}
    return lines.line_plot(
        np.arange(num_positions),
        series,
        x_title="position p",
        y_title="PE[p, dim]",
        title="Chosen dimensions across positions",
    )


@st.cache_data(**_SMALL)
def breakdown_frame(position: int, d_model: int, base: float) -> pd.DataFrame:
    """One row per dimension: what is computed, from which angle, and the value."""
    b: PositionBreakdown = position_breakdown(position, d_model, base)
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


def similarity_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    labels = _labels(num_positions)
    return heatmaps.heatmap(
        similarity_matrix(pe_table(num_positions, d_model, base)),  # (position, position)
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        row_title="query position",
        col_title="key position",
        title="PE·PEᵀ: dot product of every pair of positions",
    )


@st.cache_data(**_SMALL)
def similarity_profile(num_positions: int, d_model: int, base: float) -> OffsetProfile:
    # The n×n matrix is not kept: at 2048 positions it is 32 MB for a few KB of profile.
    table = pe_table(num_positions, d_model, base)
    return offset_profile(similarity_matrix(table), nonnegative=True)


def similarity_profile_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    return profile_figure(
        similarity_profile(num_positions, d_model, base),
        title="PE(p)·PE(p+k) as a function of the distance k",
        y_title="dot product",
    )


def profile_figure(profile: OffsetProfile, *, title: str, y_title: str) -> go.Figure:
    """Mean, smallest and largest value at each offset: one line when only the offset matters."""
    return lines.line_plot(
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


@st.fragment
def compare_encodings(
    view: PageState, tokens: tuple[str, ...], order_kind: str, width: int, seed: int
) -> None:
    """The sentence's attention weights with two positional encodings, and their difference."""
    box = compare.opened(view, label="Compare two positional encodings")
    if box is not None:
        with box:
            first, second = st.columns(2)
            a, b = (
                column.selectbox(
                    f"Encoding {letter}", SENTENCE_ENCODINGS,
                    key=view.choice_key(f"cmp_{letter.lower()}", default, SENTENCE_ENCODINGS),
                )
                for column, letter, default in ((first, "A", "none"), (second, "B", "sinusoidal"))
            )  # fmt: skip
            try:
                weights = [blindness(tokens, order_kind, width, encoding, seed, 10000.0).weights
                           for encoding in (a, b)]  # fmt: skip
            except AttentionInputError as error:
                st.error(str(error), icon=":material/error:")
            else:
                compare.show(*weights, names=(f"{a} positions", f"{b} positions"),
                             query_labels=tokens, key_labels=tokens,
                             filename=f"positions-compare-{a}-{b}")  # fmt: skip
    write_url_after_fragment(view)


def _small_heatmap(
    values: np.ndarray,
    rows: Sequence[str],
    *,
    title: str,
    kind: heatmaps.Kind = "values",
    cols: Sequence[str] | None = None,
    row_title: str = "token",
    col_title: str = "dimension",
    decimals: int = 2,
) -> go.Figure:
    """An annotated heatmap of a few tokens × a few dimensions (or queries × keys)."""
    cols = [f"d{j}" for j in range(values.shape[1])] if cols is None else cols
    return heatmaps.heatmap(
        values,
        row_labels=rows,
        col_labels=cols,
        kind=kind,
        title=title,
        row_title=row_title,
        col_title=col_title,
        decimals=decimals,
    )


BLINDNESS_FIGURES = (
    "weights",
    "permuted_weights",
    "output",
    "unpermuted_output",
    "difference",
    "token_embeddings",
    "positions",
    "inputs",
)


def blindness_figure(
    name: str,
    tokens: tuple[str, ...],
    order_kind: str,
    width: int,
    encoding: str,
    seed: int,
    base: float,
) -> go.Figure:
    """One of the order-blindness pictures (`BLINDNESS_FIGURES`): both weight patterns, both
    outputs, the difference, and the inputs (embeddings, positions, their sum)."""
    b = blindness(tokens, order_kind, width, encoding, seed, base)
    words, reordered = " ".join(tokens), " ".join(b.permuted.tokens)
    pattern = {"kind": "weights", "row_title": "query", "col_title": "key"}
    if name == "weights":
        return _small_heatmap(b.weights, tokens, cols=tokens, title=f"Weights: {words}", **pattern)
    if name == "permuted_weights":
        rows = b.permuted.tokens
        return _small_heatmap(
            b.permuted_weights, rows, cols=rows, title=f"Weights: {reordered}", **pattern
        )
    if name == "output":
        return _small_heatmap(b.output, tokens, title=f"Output: {words}")
    if name == "unpermuted_output":
        title = f"Output: {reordered}, rows put back"
        return _small_heatmap(b.unpermuted_output, tokens, title=title)
    if name == "difference":
        return _small_heatmap(b.difference, tokens, title="Difference", decimals=3)
    if name == "token_embeddings":
        return _small_heatmap(b.original.token_embeddings, tokens, title="Token embeddings E")
    if name == "positions":
        return _small_heatmap(
            b.original.positions,
            [f"{p}: {t}" for p, t in enumerate(tokens)],
            title="PE" if encoding == "sinusoidal" else f"Positions ({encoding})",
            row_title="position",
        )
    if name == "inputs":
        return _small_heatmap(b.original.inputs, tokens, title="Input X = E + PE")
    raise ValueError(f"no order-blindness figure called {name!r}")


# -- the families ---------------------------------------------------------------------------------


class FamilySetting(NamedTuple):
    """What one family's same-content score matrix depends on (a cache key)."""

    family: str
    num_positions: int
    d_model: int
    seed: int
    base: float
    num_heads: int = 1
    head: int = 0


@st.cache_data(**_SMALL)
def family_scores(setting: FamilySetting) -> np.ndarray:
    family, num_positions, d_model, seed, base, num_heads, head = setting
    return same_content_scores(
        family, num_positions, d_model, seed=seed, base=base, num_heads=num_heads, head=head
    )


def family_spread(setting: FamilySetting) -> float:
    """The largest spread along a diagonal of the setting's scores (0 for a Toeplitz matrix);
    the scores come from their cache, so this costs a pass over a small matrix."""
    return toeplitz_deviation(family_scores(setting))


def family_figure(setting: FamilySetting, train_length: int | None = None) -> go.Figure:
    """Same-content scores of one family; with `train_length`, the trained square outlined."""
    scores = family_scores(setting)
    num_positions = setting.num_positions
    labels = _labels(num_positions)
    fig = heatmaps.heatmap(
        scores,
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        title=FAMILY_TITLES[setting.family],
        row_title="query position",
        col_title="key position",
        annotate=False,
        height=340 if train_length is None else 380,
        # Thousands of per-cell hover texts cost the browser megabytes; position and value
        # say all there is to say about a cell here.
        cell_hover=num_positions <= 16,
        # Half-width panels: a label every few positions stays readable.
        tick_every=-(-num_positions // 8) if num_positions > 24 else None,
    )
    if train_length is not None:
        _mark_training_length(fig, train_length, num_positions)
    return fig


def rope_profile_figure(num_positions: int, d_model: int, seed: int, base: float) -> go.Figure:
    """Mean, smallest and largest RoPE score at each offset, for identical content."""
    scores = family_scores(FamilySetting("rotary", num_positions, d_model, seed, base))
    return profile_figure(
        offset_profile(scores),
        title="RoPE score by offset: one line, whatever the positions",
        y_title="score / √d",
    )


def learned_figure(num_positions: int, d_model: int, seed: int) -> go.Figure:
    table = learned_encoding(num_positions, d_model, seed=seed, std=LEARNED_STD)
    return _table_heatmap(
        table, f"A random 'learned' table: {num_positions} positions × {d_model} dimensions"
    )


@st.cache_data(**_SMALL)
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
    labels = _labels(num_positions)
    slopes = alibi_slopes(num_heads)
    return heatmaps.heatmap_grid(
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
            font={"size": theme.font_size()},
        )


@st.cache_data(**_SMALL)
def unseen_share(train_length: int, num_positions: int, d_model: int, base: float) -> np.ndarray:
    return unseen_angle_share(train_length, num_positions, d_model, base)


def unseen_figure(train_length: int, num_positions: int, d_model: int, base: float) -> go.Figure:
    """The share of (sin, cos) pairs at an angle training never reached, position by position."""
    share = unseen_share(train_length, num_positions, d_model, base)
    fig = lines.line_plot(
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


# -- the families and extrapolation sections, drawn as fragments ----------------------------------


@st.fragment
def families(view: PageState, n: int, d_model: int, seed: int, base: float) -> None:
    """Same-content scores of the four families, their tabs, and (nested) the extrapolation."""
    a, b, c = st.columns(3)
    compare_n = a.slider(
        "Positions to compare", 4, 64, key=view.int_key("compare_n", 16, lo=4, hi=64)
    )
    heads = b.slider("ALiBi heads", 1, 16, key=view.int_key("heads", 8, lo=1, hi=16))
    head_key = keep(view.int_key("head", 1, lo=1, hi=heads))
    if heads > 1:
        head = c.slider("ALiBi head shown", 1, heads, key=head_key)
    else:
        head = 1
        c.caption("One head: its slope is 2⁻⁸.")
    columns = st.columns(2)
    for index, family in enumerate(POSITION_FAMILIES):
        setting = FamilySetting(family, compare_n, d_model, seed, base, heads, head - 1)
        with columns[index % 2]:
            try:
                spread = family_spread(setting)
            except AttentionInputError as error:
                st.error(str(error))
                continue
            show(family_figure, setting, filename=f"same-content-{family}")
            st.metric(f"{FAMILY_TITLES[family]}: largest spread along a diagonal", f"{spread:.1e}")
    st.caption(
        "Sinusoidal and learned: (c + P[m])·(c + P[n]) contains c·P[n], which depends on where "
        "the key is, not only on n − m. Rotary: rotating q by m·θ and k by n·θ leaves an angle "
        "(m − n)·θ between them. ALiBi: c·c plus m_h·(n − m), with the later keys masked (−∞) "
        "as in a causal model. All scores are divided by √d_model."
    )
    learned_tab, rope_tab, alibi_tab = st.tabs(
        [
            ":material/grid_on: Learned",
            ":material/rotate_right: Rotary (RoPE)",
            ":material/trending_down: ALiBi",
        ]
    )
    with learned_tab:
        st.markdown(
            "BERT and GPT-2 keep a table with one trainable row per position. Here it is random "
            f"(N(0, ½), the sinusoids' size), {n} × {d_model} like the table above. Trained tables "
            "look much smoother: neighbouring rows become similar, and GPT-2's even show "
            "wave-like patterns. Nothing links row p to row p + k, and there is no row past "
            "the last one."
        )
        show(learned_figure, n, d_model, seed, filename=f"learned-pe-{n}x{d_model}")
    with rope_tab:
        st.markdown(
            "RoPE (Llama, Mistral, GPT-NeoX) rotates q and k instead of adding anything: each pair "
            "of dimensions turns by p·θᵢ. The score rot(q, m)·rot(k, n) depends on m − n only. "
            "Below, the score at each offset for identical content, over every pair of positions."
        )
        st.latex(r"\mathrm{rot}(q, m)^\top \mathrm{rot}(k, n) = q^\top R_{(n-m)\theta}\, k")
        show(rope_profile_figure, compare_n, d_model, seed, base, filename="rope-score-by-offset")
    with alibi_tab:
        st.markdown(
            "ALiBi (BLOOM, MPT) adds nothing to the tokens: each head adds m_h·(j − i) to the "
            "score of query i and key j ≤ i, a penalty growing with distance, steep for the first "
            "heads and gentle for the last. For 2ⁿ heads the slopes are 2^(−8/n), 2^(−16/n), …"
        )
        st.dataframe(
            slopes_frame(heads),
            hide_index=True,
            column_config={"slope m": st.column_config.NumberColumn(format="%.8g")},
        )
        show(alibi_grid, heads, compare_n, filename=f"alibi-bias-{heads}-heads")
    # Nested: the training length reruns only its own section; the ALiBi head reruns both.
    extrapolation(view, d_model, seed, base, heads, head)
    write_url_after_fragment(view)


@st.fragment
def extrapolation(
    view: PageState, d_model: int, seed: int, base: float, heads: int, head: int
) -> None:
    st.header("Beyond the training length", divider="gray")
    st.markdown(
        "A model trained on sequences of length L meets longer inputs. The dashed square marks "
        "the positions it was trained on."
    )
    train = st.slider("Training length L", 4, 256, key=view.int_key("train", 32, lo=4, hi=256))
    columns = st.columns(2)
    for index, family in enumerate(POSITION_FAMILIES):
        length = train if family == "learned" else 2 * train
        setting = FamilySetting(family, length, d_model, seed, base, heads, head - 1)
        with columns[index % 2]:
            try:
                family_spread(setting)
            except AttentionInputError as error:
                st.error(str(error))
                continue
            show(family_figure, setting, train, filename=f"extrapolation-{family}")
            if family == "learned":
                st.caption(
                    f"The table has {train} rows: position {train} has no vector at all, so the "
                    "model cannot even be run on a longer input."
                )
    share = unseen_share(train, 8 * train, d_model, base)
    show(unseen_figure, train, 8 * train, d_model, base, filename="unseen-angles")
    st.markdown(
        f"Sinusoidal and rotary encodings are defined everywhere, but the slow pairs, whose "
        f"wavelength exceeds L, never complete a turn in training. Past L they reach angles the "
        f"model has never seen: {100 * share[-1]:.0f}% of the pairs at position {8 * train - 1}. "
        "That is why RoPE models are stretched with position interpolation or a larger base "
        "before long inputs. ALiBi only adds a straight line: far keys get ever larger penalties "
        "and fade out, so it degrades gently (its paper trains on 1024 tokens and tests on 2048)."
    )
    write_url_after_fragment(view)
