"""The positional page's figure builders: the sinusoid table, chosen dimensions, the similarity
of positions, score profiles by offset, the rotation, and one family's same-content scores.

Builders are plain functions of their inputs, drawn through `show`, so each is built once per
distinct input and shared by every viewer of one link. They lay out what `data` computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_core import sinusoid_wavelengths
from attention_core.lessons.position_experiments import (
    OffsetProfile,
    RotationExample,
)
from ui.positional.data import FamilySetting, family_scores, pe_table, similarity_profile
from ui.widgets import heatmaps, lines, render

FAMILY_TITLES = {
    "sinusoidal": "Sinusoidal (added)",
    "learned": "Learned table (added)",
    "rotary": "Rotary (RoPE)",
    "alibi": "ALiBi (score bias)",
    "nope": "NoPE (no positions)",
}


def show(build, *args, filename: str) -> None:
    """Draw `build(*args)`, built once per distinct input (`render.cached`)."""
    render.show(render.cached(build, *args), filename=filename)


def position_labels(count: int) -> list[str]:
    return [str(i) for i in range(count)]


# -- the sinusoidal table -----------------------------------------------------------------------


def table_heatmap(table: np.ndarray, title: str) -> go.Figure:
    """A `(position, dimension)` table, positions down, dimensions across."""
    num_positions, d_model = table.shape
    return heatmaps.heatmap(
        table,
        row_labels=position_labels(num_positions),
        col_labels=position_labels(d_model),
        kind="scores",
        row_title="position",
        col_title="dimension",
        title=title,
    )


def pe_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    """Heatmap of the table, positions down, dimensions across (block-averaged when large)."""
    return table_heatmap(
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


# -- similarity and the rotation ------------------------------------------------------------------


def similarity_figure(num_positions: int, d_model: int, base: float) -> go.Figure:
    return heatmaps.similarity_heatmap(
        pe_table(num_positions, d_model, base),
        position_labels(num_positions),
        "PE·PEᵀ: dot product of every pair of positions",
    )


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


# -- one family's same-content scores (the families section and beyond the training length) ------


def family_figure(setting: FamilySetting, *, height: int = 340) -> go.Figure:
    """Same-content scores of one family, query positions down, key positions across."""
    scores = family_scores(setting)
    num_positions = setting.num_positions
    labels = position_labels(num_positions)
    return heatmaps.heatmap(
        scores,
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        title=FAMILY_TITLES[setting.family],
        row_title="query position",
        col_title="key position",
        annotate=False,
        height=height,
        # Thousands of per-cell hover texts cost the browser megabytes; position and value
        # say all there is to say about a cell here.
        cell_hover=num_positions <= 16,
        # Half-width panels: a label every few positions stays readable.
    )
