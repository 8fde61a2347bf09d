"""Heatmaps that read the same way on every page.

Rows are queries and columns are keys, labelled with their tokens; positions are plotted and
tokens are only labels, so a repeated token never merges two rows. Attention weights always use
the fixed 0..1 scale, scores a diverging scale centred on 0, and cells that a mask removed are
drawn grey and labelled −∞ rather than given a colour of the scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import plotly.graph_objects as go

from attention_core.lessons.position_experiments import similarity_matrix
from ui.widgets import describe
from ui.widgets.describe import MINUS_INFINITY, format_number
from ui.widgets.render import Panels, figure
from ui.widgets.state import is_presenting
from ui.widgets.theme import (
    BLOCKED_COLOR,
    DIVERGING_COLORS,
    MASK_COLORS,
    WEIGHT_COLORS,
    font_size,
)

Kind = Literal["weights", "scores", "values", "mask", "sequential"]

# Above this many cells the numbers are unreadable anyway and only cost bytes and time.
MAX_ANNOTATED_CELLS = 144
MAX_HOVER_TEXT_CELLS = 1_024
# A browser draws about a pixel per cell; more cells than pixels only slow the page.
MAX_SIDE = 512
# A panel of small multiples is at most this high (px): a phone shows it whole.
PANEL_HEIGHT = 420


def heatmap(
    values: np.ndarray,
    *,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    kind: Kind = "weights",
    title: str = "",
    hover: np.ndarray | Sequence[Sequence[str]] | None = None,
    blocked: np.ndarray | None = None,
    row_title: str = "query",
    col_title: str = "key",
    decimals: int = 2,
    annotate: bool | None = None,
    height: int | None = None,
    cell_hover: bool | None = None,
    scale: ColorScale | None = None,
) -> go.Figure:
    """A labelled heatmap of a `(rows, cols)` matrix.

    `hover` adds one line per cell saying how its value was computed. `blocked` (True where a
    mask removed the cell) and any −∞ in `values` are drawn grey and written −∞. `cell_hover`
    False gives every cell one hover template (position and value) instead of its own text,
    the default past MAX_HOVER_TEXT_CELLS; `scale` replaces the kind's own colour scale (panels
    that share one).
    """
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {matrix.shape}")
    removed = ~np.isfinite(matrix)
    if blocked is not None:
        removed |= np.asarray(blocked, dtype=bool)
    rows, cols = matrix.shape
    row_labels, col_labels = list(row_labels), list(col_labels)
    alt = describe.matrix_summary(
        matrix,
        describe.MatrixAxes(row_labels, col_labels, row_title, col_title),
        kind=kind,
        title=title,
        removed=removed,
        decimals=decimals,
    )

    step = max(1, -(-max(rows, cols) // MAX_SIDE))
    if step > 1:
        matrix, removed = _block_mean(matrix, removed, step)
        row_labels, col_labels = row_labels[::step], col_labels[::step]
        title = f"{title} (averaged over {step}×{step} blocks to stay fast)".strip()
        hover = None
        rows, cols = matrix.shape
    annotate = rows * cols <= MAX_ANNOTATED_CELLS if annotate is None else annotate

    shown = np.where(removed, np.nan, matrix).astype(np.float32)
    scale = scale or color_scale(kind, shown)
    height = height or _height(rows)
    heat = {
        "type": "heatmap",
        "z": shown,
        # Block-averaged maps keep real positions on the axes (and in the hover): block starts.
        "x": np.arange(cols) * step,
        "y": np.arange(rows) * step,
        **scale.trace(),
        # Numbers in the cells say what the colours mean, and the plot keeps the colour bar's
        # width for them (in a narrow column, cells too narrow for their numbers overlapped).
        "showscale": scale.show_bar and not annotate,
        "colorbar": colorbar(height),
        "xgap": 1 if annotate else 0,
        "ygap": 1 if annotate else 0,
    }
    cell_hover = rows * cols <= MAX_HOVER_TEXT_CELLS if cell_hover is None else cell_hover
    if cell_hover:
        heat["hovertext"] = _hover_text(
            matrix, row_labels, col_labels, row_title, col_title, hover, decimals
        )
        heat["hoverinfo"] = "text"
    else:
        block = f" (block of {step})" if step > 1 else ""
        heat["hovertemplate"] = (
            f"{row_title} %{{y}}, {col_title} %{{x}}{block}: %{{z:.4f}}<extra></extra>"
        )
    traces = [heat]
    if removed.any():
        traces.append(
            _blocked_layer(
                removed, annotate, row_labels, col_labels, row_title, col_title, step, cell_hover
            )
        )
    if annotate:
        traces.append(_cell_numbers(matrix, removed, scale, decimals, step))
    layout = {
        "title": {"text": title, "font": {"size": font_size() + 3}, "y": 0.99, "yanchor": "top"},
        "height": height,
        # The key axis sits on top, under the title: leave room for both.
        "margin": {"l": 10, "r": 10, "t": 110 if title else 70, "b": 10},
        "font": {"size": font_size()},
        **_axes(row_labels, col_labels, row_title, col_title, step),
    }
    table = describe.matrix_table(
        np.where(removed, -np.inf, matrix),
        describe.MatrixAxes(row_labels, col_labels, row_title, col_title),
        title=title,
    )
    return describe.attach(figure(traces, layout), alt, table)


def similarity_heatmap(
    table: np.ndarray, labels: Sequence[str], title: str, **options: object
) -> go.Figure:
    """How alike the rows of a position table `(position, d_model)` are: every pair's dot
    product `(position, position)`, as a query position would score a key position by its
    position vector alone."""
    return heatmap(
        similarity_matrix(table),  # (position, position)
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        row_title="query position",
        col_title="key position",
        title=title,
        **options,
    )


def heatmap_grid(
    matrices: np.ndarray,
    *,
    titles: Sequence[str],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    kind: Kind = "weights",
    columns: int = 4,
    highlight: int | None = None,
    row_title: str = "query",
    col_title: str = "key",
) -> Panels:
    """Small multiples of `(n, rows, cols)` matrices sharing one colour scale (rows are queries
    and columns keys unless `row_title` and `col_title` say otherwise): a heatmap per panel,
    `columns` to a row on a wide screen and one per row on a phone (`render.Panels`), each with
    its own labels and title; the colour bar on the last."""
    stack = np.asarray(matrices, dtype=np.float64)
    count, rows, _ = stack.shape
    scale = color_scale(kind, stack)
    panels = tuple(
        heatmap(
            matrix,
            row_labels=row_labels,
            col_labels=col_labels,
            kind=kind,
            title=f"<b>{title}</b>" if index == highlight else title,
            row_title=row_title,
            col_title=col_title,
            annotate=False,
            height=min(_height(rows), PANEL_HEIGHT),
            scale=replace(scale, show_bar=scale.show_bar and index == count - 1),
        )
        for index, (matrix, title) in enumerate(zip(stack, titles, strict=True))
    )
    return Panels(panels, max(1, min(columns, count)))


@dataclass(frozen=True)
class ColorScale:
    """How a heatmap colours its values: the colours, the range they span, the colour bar.

    The one owner of a heatmap's look: every heatmap of the app, those built here and the raw
    traces some views build themselves, takes its colours from `color_scale`.
    """

    low: float
    high: float
    colors: list
    show_bar: bool = True

    def trace(self) -> dict:
        """The keys of a heatmap trace: `{**scale.trace(), "z": ...}`."""
        return {"zmin": self.low, "zmax": self.high, "colorscale": self.colors,
                "colorbar": COLORBAR, "showscale": self.show_bar}  # fmt: skip

    def axis(self) -> dict:
        """A shared colour axis (`layout.coloraxis`, or a marker's colours)."""
        return {"cmin": self.low, "cmax": self.high, "colorscale": self.colors,
                "colorbar": COLORBAR, "showscale": self.show_bar}  # fmt: skip


COLORBAR = {"thickness": 12, "len": 0.9}


def colorbar(height: int) -> dict:
    """A colour bar in a figure `height` px high, its labels at most as many as stay two lines
    apart (the height is the server's to set, unlike the width: presenter mode's large type
    made the labels of a short map's bar overlap)."""
    bar = COLORBAR["len"] * (height - 150)  # the plot: the height less the title and key axis
    return {**COLORBAR, "nticks": max(2, int(bar // (2.5 * font_size())))}


def color_scale(kind: Kind, values: np.ndarray | None = None) -> ColorScale:
    """The colour scale of a heatmap of `kind`: weights (and any share or probability) on the
    fixed 0..1 scale, masks in two colours, sequential values over their own range, signed
    values (scores, outputs) on a diverging scale centred on 0.
    """
    if kind == "weights":
        return ColorScale(0.0, 1.0, WEIGHT_COLORS)
    if kind == "mask":
        return ColorScale(0.0, 1.0, MASK_COLORS, show_bar=False)
    finite = np.asarray([] if values is None else values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if kind == "sequential":
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        return ColorScale(low, high if high > low else low + 1.0, WEIGHT_COLORS)
    # Diverging: zero is white, so the sign of a score is visible at a glance.
    reach = float(np.abs(finite).max()) if finite.size else 1.0
    reach = reach if reach > 0 else 1.0
    return ColorScale(-reach, reach, DIVERGING_COLORS)


def _block_mean(
    matrix: np.ndarray, removed: np.ndarray, step: int
) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = matrix.shape
    padded_rows, padded_cols = -(-rows // step) * step, -(-cols // step) * step
    kept = np.where(removed, 0.0, matrix)
    counts = np.zeros((padded_rows, padded_cols))
    totals = np.zeros((padded_rows, padded_cols))
    counts[:rows, :cols] = ~removed
    totals[:rows, :cols] = kept
    shape = (padded_rows // step, step, padded_cols // step, step)
    count = counts.reshape(shape).sum(axis=(1, 3))
    total = totals.reshape(shape).sum(axis=(1, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    return mean, count == 0


def _hover_text(
    matrix: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    row_title: str,
    col_title: str,
    hover: np.ndarray | Sequence[Sequence[str]] | None,
    decimals: int,
) -> list[list[str]]:
    precise = max(4, decimals)
    text = []
    for i, row_label in enumerate(row_labels):
        line = []
        for j, col_label in enumerate(col_labels):
            cell = (
                f"{row_title} {i + 1} “{row_label}” → {col_title} {j + 1} “{col_label}”"
                f"<br>value: {format_number(matrix[i, j], precise)}"
            )
            if hover is not None:
                cell += f"<br>{hover[i][j]}"
            line.append(cell)
        text.append(line)
    return text


def _blocked_layer(
    removed: np.ndarray,
    annotate: bool,
    row_labels: list[str],
    col_labels: list[str],
    row_title: str,
    col_title: str,
    step: int = 1,
    cell_hover: bool = True,
) -> dict:
    rows, cols = removed.shape
    layer = {
        "type": "heatmap",
        "z": np.where(removed, 1.0, np.nan).astype(np.float32),
        "x": np.arange(cols) * step,
        "y": np.arange(rows) * step,
        "colorscale": [[0.0, BLOCKED_COLOR], [1.0, BLOCKED_COLOR]],
        "showscale": False,
        "xgap": 1 if annotate else 0,
        "ygap": 1 if annotate else 0,
        "hoverinfo": "text",
        "name": "masked",
    }
    if cell_hover:
        layer["hovertext"] = [
            [
                f"{row_title} {i + 1} “{row_labels[i]}” → {col_title} {j + 1} “{col_labels[j]}”"
                f"<br>masked: {MINUS_INFINITY}, so its weight is 0"
                for j in range(cols)
            ]
            for i in range(rows)
        ]
    else:
        layer["hovertemplate"] = (
            f"{row_title} %{{y}}, {col_title} %{{x}}: masked ({MINUS_INFINITY})<extra></extra>"
        )
    return layer


def _cell_numbers(
    matrix: np.ndarray, removed: np.ndarray, scale: ColorScale, decimals: int, step: int = 1
) -> dict:
    """Each cell's number as a text layer over the heatmap, black or white per cell.

    A heatmap trace takes one text colour for all its cells (or Plotly's automatic white or
    #444, which falls to about 3:1 on mid-tone cells); a text trace takes one per cell, so each
    number gets whichever of black and white contrasts more with its cell: at least 4.6:1
    (WCAG AA asks 4.5:1).
    """
    rows, cols = matrix.shape
    cell = _scale_rgb(np.where(removed, scale.low, matrix), scale.low, scale.high, scale.colors)
    cell[removed] = _hex_rgb(BLOCKED_COLOR)
    text = [
        MINUS_INFINITY if removed[i, j] else format_number(matrix[i, j], decimals)
        for i in range(rows)
        for j in range(cols)
    ]
    return {
        "type": "scatter",
        "mode": "text",
        "x": (np.tile(np.arange(cols), rows) * step).tolist(),
        "y": (np.repeat(np.arange(rows), cols) * step).tolist(),
        "text": text,
        "textfont": {"size": font_size(), "color": text_colors(cell.reshape(-1, 3))},
        "hoverinfo": "skip",
        "showlegend": False,
        "name": "values",
    }


def text_colors(rgb: np.ndarray) -> list[str]:
    """Black or white for text on each `(n, 3)` sRGB colour in 0..1: whichever contrasts more.

    WCAG contrast is (L1 + 0.05) / (L2 + 0.05) on relative luminance L; black wins exactly when
    the cell's L is above √(1.05 · 0.05) − 0.05 ≈ 0.179.
    """
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = linear @ np.array([0.2126, 0.7152, 0.0722])
    return np.where((luminance + 0.05) ** 2 > 1.05 * 0.05, "#000000", "#ffffff").tolist()


def _scale_rgb(values: np.ndarray, zmin: float, zmax: float, colors: list) -> np.ndarray:
    """The colour Plotly paints each value: the scale's stops interpolated in sRGB, `(..., 3)`."""
    where = np.clip((np.asarray(values, dtype=np.float64) - zmin) / (zmax - zmin), 0.0, 1.0)
    stops = [position for position, _ in colors]
    rgb = np.array([_hex_rgb(color) for _, color in colors])
    return np.stack([np.interp(where, stops, rgb[:, c]) for c in range(3)], axis=-1)


def _hex_rgb(color: str) -> np.ndarray:
    return np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)]) / 255.0


def _axes(
    row_labels: list[str], col_labels: list[str], row_title: str, col_title: str, step: int = 1
) -> dict:
    """Both axes, labelled with their tokens. Positions are categories and each label an alias
    of its position, so the browser labels every k-th position when the axis is too short for
    all of them (Plotly spaces a category axis's labels 1.2 fonts apart; ui.small_screens
    thins what still touches) instead of drawing them over each other: a phone and a laptop
    each get as many labels as fit. Key labels always lie flat: turned upright, they reached
    into the title above them by more than the margin reserved for one line."""

    def ticks(labels: list[str]) -> dict:
        aliases = {str(p * step): label for p, label in enumerate(labels)}
        return {"type": "category", "labelalias": aliases}

    return {
        "xaxis": {
            "title": {"text": f"{col_title} →"},
            "side": "top",
            "tickangle": 0,
            **ticks(col_labels),
        },
        "yaxis": {
            "title": {"text": f"← {row_title}"},
            "autorange": "reversed",
            **ticks(row_labels),
        },
    }


def _height(rows: int) -> int:
    per_row = 56 if is_presenting() else 40
    return int(min(720, max(260, 110 + rows * per_row)))
