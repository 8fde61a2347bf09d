"""Plotly figures that read the same way on every page.

Rows are queries and columns are keys, labelled with their tokens; positions are plotted and
tokens are only labels, so a repeated token never merges two rows. Attention weights always use
the fixed 0..1 scale, scores a diverging scale centred on 0, and cells that a mask removed are
drawn grey and labelled −∞ rather than given a colour of the scale.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ui import describe, margins
from ui.describe import MINUS_INFINITY, format_number
from ui.state import FIGURE_FORMAT_KEY, TABLES_KEY, is_presenting

Kind = Literal["weights", "scores", "values", "mask", "sequential"]

# By default Plotly measures every tick label against the page, a forced layout of the whole
# page each, to hide any label that spills past the chart: a quarter of a second of drawing on
# a page of a dozen charts. Labels here sit in margins made for them, so the check is skipped,
# for every figure: the template is added to Streamlit's, which is Plotly's default by now.
# Merged here, once: a default named "a+b" is merged again for every figure made (5 ms each,
# a third of the server's time under the load benchmark); one name is merely looked up.
pio.templates["attention_explorer"] = pio.templates.merge_templates(
    pio.templates["streamlit"],
    go.layout.Template(
        layout={"xaxis": {"ticklabeloverflow": "allow"}, "yaxis": {"ticklabeloverflow": "allow"}}
    ),
)
pio.templates.default = "attention_explorer"

# Above this many cells the numbers are unreadable anyway and only cost bytes and time.
MAX_ANNOTATED_CELLS = 144
MAX_HOVER_TEXT_CELLS = 1_024
# A browser draws about a pixel per cell; more cells than pixels only slow the page.
MAX_SIDE = 512

# Colour scales a colour-blind reader can read too (tests/test_chart_access.py simulates
# deuteranopia, protanopia and tritanopia and measures neighbouring steps in CIELAB).
# Weights: cividis, dark blue to yellow, uniform in lightness and built for deuteranopia: the
# blue-yellow axis is the one all common colour-vision deficiencies keep.
WEIGHT_COLORS = [
    [0.0, "#00224e"],
    [0.1111, "#123570"],
    [0.2222, "#3b496c"],
    [0.3333, "#575d6d"],
    [0.4444, "#707173"],
    [0.5556, "#8a8678"],
    [0.6667, "#a59c74"],
    [0.7778, "#c3b369"],
    [0.8889, "#e1cc55"],
    [1.0, "#fee838"],
]
# Signed values: orange below zero, blue above, near-white at zero (not red/green).
DIVERGING_COLORS = [
    [0.0, "#b35806"],
    [0.125, "#e08214"],
    [0.25, "#fdb863"],
    [0.375, "#fee0b6"],
    [0.5, "#f7f7f7"],
    [0.625, "#d1e5f0"],
    [0.75, "#92c5de"],
    [0.875, "#4393c3"],
    [1.0, "#2166ac"],
]
MASK_COLORS = [[0.0, "#d9d9d9"], [1.0, "#1b7837"]]
# A neutral grey lighter than cividis's greys and darker than the diverging scale's zero.
BLOCKED_COLOR = "#bdbdbd"


def font_size() -> int:
    return 20 if is_presenting() else 13


def plot_config(filename: str) -> dict:
    """Modebar settings: a download named after what it shows, as PNG or SVG, no logo."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": figure_format(), "filename": filename, "scale": 2},
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


def figure_format() -> str:
    """What the chart toolbar's camera button saves: "png", or "svg" for slides."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return "png"
    return "svg" if st.session_state.get(FIGURE_FORMAT_KEY) == "SVG" else "png"


def show(fig: go.Figure, *, filename: str, key: str | None = None, **options: Any) -> None:
    """Draw a figure full-width with a PNG download named `filename.png`.

    The chart's one-sentence summary becomes its accessible name (`alt`, read by screen
    readers); with "Show chart data as tables" on, its numbers follow as a table.
    """
    if not isinstance(fig, _SharedFigure):
        reserve_margins(fig)
    st.plotly_chart(
        fig,
        width="stretch",
        config=plot_config(filename),
        key=key,
        alt=describe.summary(fig),
        **options,
    )
    if st.session_state.get(TABLES_KEY):
        data = describe.table(fig)
        if data is not None:
            st.dataframe(data.arrow, key=None if key is None else f"{key}.table")


def reserve_margins(fig: go.Figure) -> None:
    """Widen the figure's margins to what its labels will need (`ui.margins`), so the browser
    draws it once instead of drawing, measuring and drawing again."""
    # The figure's own dicts, read without the deep copy `to_dict` makes.
    margin = margins.reserved(fig._data, fig._layout)
    if margin is not None:
        # `reserved` keeps the figure's other margin keys; set directly, without update_layout's
        # path parsing: 1 ms -> 15 µs a figure.
        fig.layout.margin = margin


def cached(build: Callable[..., go.Figure], *args: Any, **options: Any) -> go.Figure:
    """`build(*args, **options)`, built once per distinct input and shared by every session.

    The one figure cache of the app: keyed on the builder, its inputs and presenter mode (which
    sets font sizes), bounded, and shared, so fifty viewers of one deep link cost one figure.
    Shared figures must not be modified: `st.plotly_chart` only serialises them.
    """
    digest = hashlib.sha256(
        pickle.dumps(
            (build.__module__, build.__qualname__, args, options, is_presenting()), protocol=5
        )
    ).hexdigest()
    return _built_figure(digest, build, args, options)


# A cached figure holds ~0.2-0.7 MB of Plotly objects and its dict (most of it Plotly's template,
# even for a 3x3 heatmap): under the 10-minute load benchmark 512 entries ended ~30-40 MB higher
# than 128, which still hold every figure of several views of every page.
FIGURE_CACHE_ENTRIES = 128


@st.cache_resource(max_entries=FIGURE_CACHE_ENTRIES, show_spinner=False)
def _built_figure(digest: str, _build: Callable, _args: tuple, _options: dict) -> go.Figure:
    # Only `digest` is hashed: it covers the builder, the inputs and presenter mode. Kept as
    # objects: unpickling a figure (what st.cache_data would do on every hit) costs more than
    # building it.
    figure = _build(*_args, **_options)
    if type(figure) is go.Figure:
        # Described here, once, while the figure is still this thread's own.
        if not getattr(figure, "_alt", None):
            describe.attach(figure, describe.summary(figure), describe.table(figure))
        reserve_margins(figure)
        drawn = figure.to_dict()
        # The figure is new and only this cache holds it, so it can become a shared one.
        figure.__class__ = _SharedFigure
        figure._drawn = drawn
    return figure


class _SharedFigure(go.Figure):
    """A cached figure, drawn by every session and never changed after it was built.

    `st.plotly_chart` asks a figure for its dict on every draw, and Plotly makes one by deep-
    copying every trace and base64-encoding every array (a millisecond or more per chart, so
    tens of milliseconds for a page of small multiples); a shared figure has made it once.
    The dict is shared too: read it, never change it.
    """

    _drawn: dict

    def to_dict(self) -> dict:
        return self._drawn


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
    tick_every: int | None = None,
) -> go.Figure:
    """A labelled heatmap of a `(rows, cols)` matrix.

    `hover` adds one line per cell saying how its value was computed. `blocked` (True where a
    mask removed the cell) and any −∞ in `values` are drawn grey and written −∞. `cell_hover`
    False gives every cell one hover template (position and value) instead of its own text,
    the default past MAX_HOVER_TEXT_CELLS; `tick_every` labels every that many rows and columns.
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
    zmin, zmax, colors = _scale(kind, shown)
    heat = {
        "type": "heatmap",
        "z": shown,
        # Block-averaged maps keep real positions on the axes (and in the hover): block starts.
        "x": np.arange(cols) * step,
        "y": np.arange(rows) * step,
        "zmin": zmin,
        "zmax": zmax,
        "colorscale": colors,
        "colorbar": {"thickness": 12, "len": 0.9},
        "showscale": kind != "mask",
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
        traces.append(_cell_numbers(matrix, removed, (zmin, zmax, colors), decimals, step))
    layout = {
        "title": {"text": title, "font": {"size": font_size() + 3}, "y": 0.99, "yanchor": "top"},
        "height": height or _height(rows),
        # The key axis sits on top, under the title: leave room for both.
        "margin": {"l": 10, "r": 10, "t": 110 if title else 70, "b": 10},
        "font": {"size": font_size()},
        **_axes(row_labels, col_labels, row_title, col_title, step, tick_every),
    }
    table = describe.matrix_table(
        np.where(removed, -np.inf, matrix),
        describe.MatrixAxes(row_labels, col_labels, row_title, col_title),
        title=title,
    )
    return describe.attach(_figure(traces, layout), alt, table)


def _figure(traces: list[dict], layout: dict) -> go.Figure:
    """A figure built from plain dicts: per-property validation costs more than the page."""
    return go.Figure({"data": traces, "layout": layout}, _validate=False)


def heatmap_grid(
    matrices: np.ndarray,
    *,
    titles: Sequence[str],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    kind: Kind = "weights",
    columns: int = 4,
    highlight: int | None = None,
) -> go.Figure:
    """Small multiples of `(n, rows, cols)` matrices sharing one colour scale."""
    stack = np.asarray(matrices, dtype=np.float64)
    count = stack.shape[0]
    columns = max(1, min(columns, count))
    grid_rows = -(-count // columns)
    titles = [f"<b>{t}</b>" if i == highlight else t for i, t in enumerate(titles)]
    zmin, zmax, colors = _scale(kind, stack[np.isfinite(stack)] if kind != "weights" else stack)
    small = stack.shape[1] <= 12 and stack.shape[2] <= 12
    panel_height = 260 if small else 200
    height = min(1800, 60 + grid_rows * panel_height)
    # Gaps leave room for each panel's tick labels and the title of the panel below.
    panels = panel_domains(count, columns=columns, x_gap=0.04, y_gap=min(0.2, 60 / height))
    tick_font = {"size": max(8, font_size() - 4)}
    traces, annotations = [], []
    layout: dict = {}
    for index, (matrix, (suffix, x_domain, y_domain)) in enumerate(zip(stack, panels, strict=True)):
        row, col = divmod(index, columns)
        traces.append(
            {
                "type": "heatmap",
                "z": np.where(np.isfinite(matrix), matrix, np.nan).astype(np.float32),
                "x": np.arange(matrix.shape[1]),
                "y": np.arange(matrix.shape[0]),
                "coloraxis": "coloraxis",
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "hovertemplate": (
                    f"{titles[index]}<br>query %{{y}} → key %{{x}}: %{{z:.4f}}<extra></extra>"
                ),
            }
        )
        layout[f"xaxis{suffix}"] = {
            "domain": x_domain,
            "anchor": f"y{suffix}",
            "tickvals": list(range(len(col_labels))),
            "ticktext": list(col_labels),
            "showticklabels": small,
            "tickfont": tick_font,
            "title": {"text": "key", "font": tick_font} if row == grid_rows - 1 else None,
        }
        layout[f"yaxis{suffix}"] = {
            "domain": y_domain,
            "anchor": f"x{suffix}",
            "tickvals": list(range(len(row_labels))),
            "ticktext": list(row_labels),
            "autorange": "reversed",
            "showticklabels": small,
            "tickfont": tick_font,
            "title": {"text": "query", "font": tick_font} if col == 0 else None,
        }
        annotations.append(
            {
                "text": titles[index],
                "x": (x_domain[0] + x_domain[1]) / 2,
                "y": y_domain[1],
                "xref": "paper",
                "yref": "paper",
                "xanchor": "center",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": font_size()},
            }
        )
    layout.update(
        coloraxis={"colorscale": colors, "cmin": zmin, "cmax": zmax, "colorbar": {"thickness": 12}},
        annotations=annotations,
        height=height,
        margin={"l": 60, "r": 10, "t": 40, "b": 40},
        font={"size": font_size()},
    )
    labels = {"titles": titles, "row_labels": row_labels, "col_labels": col_labels}
    return describe.attach(
        _figure(traces, layout),
        describe.grid_summary(stack, kind=kind, **labels),
        describe.grid_table(stack, **labels),
    )


def panel_domains(
    count: int, *, columns: int, x_gap: float, y_gap: float
) -> list[tuple[str, list[float], list[float]]]:
    """Where `count` panels sit in a grid `columns` wide, filled row by row from the top: each
    panel's axis suffix ("", "2", "3", ...) and its x and y domains in paper coordinates.

    The one subplot layout of the app (`make_subplots` validates every axis and costs more than
    the figure): `heatmap_grid` and the multi-head page's side-by-side matrices use it.
    """
    grid_rows = -(-count // columns)
    width = (1 - x_gap * (columns - 1)) / columns
    tall = (1 - y_gap * (grid_rows - 1)) / grid_rows
    panels = []
    for index in range(count):
        row, col = divmod(index, columns)
        left, top = col * (width + x_gap), 1 - row * (tall + y_gap)
        # Rounding keeps float error (-8e-17) inside plotly's [0, 1] check.
        x_domain = [max(0.0, round(left, 9)), min(1.0, round(left + width, 9))]
        y_domain = [max(0.0, round(top - tall, 9)), min(1.0, round(top, 9))]
        panels.append(("" if index == 0 else str(index + 1), x_domain, y_domain))
    return panels


def line_plot(
    x: np.ndarray,
    series: dict[str, np.ndarray],
    *,
    x_title: str,
    y_title: str,
    title: str = "",
    log_x: bool = False,
    log_y: bool = False,
    dashed: Sequence[str] = (),
    markers: bool = False,
) -> go.Figure:
    """One line per named series over a shared x axis; names in `dashed` are references."""
    traces = [
        {
            "type": "scatter",
            "x": np.asarray(x),
            "y": np.asarray(y, dtype=np.float64),
            "name": name,
            "mode": "lines+markers" if markers else "lines",
            "line": {
                "dash": "dash" if name in dashed else "solid",
                "width": 3 if is_presenting() else 2,
            },
        }
        for name, y in series.items()
    ]
    layout = {
        "title": {"text": title, "font": {"size": font_size() + 3}},
        "xaxis": {"title": {"text": x_title}, "type": "log" if log_x else "linear"},
        "yaxis": {"title": {"text": y_title}, "type": "log" if log_y else "linear"},
        "height": 420,
        "margin": {"l": 10, "r": 10, "t": 60 if title else 30, "b": 10},
        "font": {"size": font_size()},
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "x unified",
    }
    fig = _figure(traces, layout)
    return describe.attach(
        fig,
        describe.lines_summary(x, series, x_title=x_title, y_title=y_title, title=title),
        describe.lines_table(x, series, x_title=x_title, title=title),
    )


def _scale(kind: Kind, values: np.ndarray) -> tuple[float, float, list]:
    if kind == "weights":
        return 0.0, 1.0, WEIGHT_COLORS
    if kind == "mask":
        return 0.0, 1.0, MASK_COLORS
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if kind == "sequential":
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        return low, high if high > low else low + 1.0, WEIGHT_COLORS
    # Diverging: zero is white, so the sign of a score is visible at a glance.
    reach = float(np.abs(finite).max()) if finite.size else 1.0
    reach = reach if reach > 0 else 1.0
    return -reach, reach, DIVERGING_COLORS


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
    matrix: np.ndarray, removed: np.ndarray, scale: tuple, decimals: int, step: int = 1
) -> dict:
    """Each cell's number as a text layer over the heatmap, black or white per cell.

    A heatmap trace takes one text colour for all its cells (or Plotly's automatic white or
    #444, which falls to about 3:1 on mid-tone cells); a text trace takes one per cell, so each
    number gets whichever of black and white contrasts more with its cell: at least 4.6:1
    (WCAG AA asks 4.5:1).
    """
    rows, cols = matrix.shape
    zmin, zmax, colors = scale
    cell = _scale_rgb(np.where(removed, zmin, matrix), zmin, zmax, colors)
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
    row_labels: list[str],
    col_labels: list[str],
    row_title: str,
    col_title: str,
    step: int = 1,
    tick_every: int | None = None,
) -> dict:
    def ticks(labels: list[str]) -> dict:
        every = tick_every or max(1, len(labels) // 40)
        positions = list(range(0, len(labels), every))
        return {
            "tickvals": [p * step for p in positions],
            "ticktext": [labels[p] for p in positions],
        }

    return {
        "xaxis": {"title": {"text": f"{col_title} →"}, "side": "top", **ticks(col_labels)},
        "yaxis": {
            "title": {"text": f"← {row_title}"},
            "autorange": "reversed",
            **ticks(row_labels),
        },
    }


def _height(rows: int) -> int:
    per_row = 56 if is_presenting() else 40
    return int(min(720, max(260, 110 + rows * per_row)))


def rnn_vs_attention(tokens: Sequence[str]) -> go.Figure:
    """Two rows of the same tokens: an RNN's chain of steps, and attention's all-pairs links.

    The first→last connection is drawn in red in both: n−1 hops through the chain, one direct
    link in attention. Built from plain dicts (see `_figure`); draw it through `cached`.
    """
    n = len(tokens)
    x = np.arange(n, dtype=np.float64)
    rnn_y, attention_y = 1.0, 0.0
    arrow = {"xref": "x", "yref": "y", "axref": "x", "ayref": "y", "showarrow": True,
             "arrowhead": 3, "arrowwidth": 3, "arrowcolor": "#d62728"}  # fmt: skip
    annotations = [
        {**arrow, "x": i + 1 - 0.18, "y": rnn_y, "ax": i + 0.18, "ay": rnn_y} for i in range(n - 1)
    ]
    arc = np.linspace(0, np.pi, 24)
    traces = []
    for i in range(n):
        for j in range(i + 1, n):
            first_to_last = i == 0 and j == n - 1
            traces.append(
                {
                    "type": "scatter",
                    # Lists: each NumPy array costs plotly a typed-array conversion per draw.
                    "x": np.round(x[i] + (x[j] - x[i]) * (1 - np.cos(arc)) / 2, 4).tolist(),
                    "y": np.round(attention_y - 0.08 * (j - i) * np.sin(arc), 4).tolist(),
                    "mode": "lines",
                    "hoverinfo": "skip",
                    "showlegend": False,
                    "line": {
                        "color": "#d62728" if first_to_last else "rgba(33,113,181,0.35)",
                        "width": 3 if first_to_last else 1.5,
                    },
                }
            )
    for y in (rnn_y, attention_y):
        traces.append(
            {
                "type": "scatter",
                "x": x.tolist(),
                "y": [y] * n,
                "mode": "markers+text",
                "text": list(tokens),
                "textposition": "top center",
                "hoverinfo": "text",
                "showlegend": False,
                "marker": {"size": 26 if is_presenting() else 20, "color": "#2171b5"},
                "textfont": {"size": font_size()},
            }
        )
    caption = {"x": -0.6, "xref": "x", "yref": "y", "showarrow": False, "xanchor": "left"}
    annotations += [
        {**caption, "y": rnn_y + 0.3,
         "text": f"<b>RNN</b>: {n - 1} sequential steps from the first token to the last"},
        {**caption, "y": attention_y + 0.3,
         "text": f"<b>Attention</b>: 1 step for each of the {n * (n - 1) // 2} pairs, all at once"},
    ]  # fmt: skip
    depth = 0.08 * max(n - 1, 1) + 0.2
    layout = {
        "annotations": annotations,
        "xaxis": {"visible": False, "range": [-0.7, n - 0.3]},
        "yaxis": {"visible": False, "range": [attention_y - depth, rnn_y + 0.45]},
        "height": 360 + 20 * n,
        "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
        "font": {"size": font_size()},
    }
    summary = (
        f"Diagram of {n} tokens ({' '.join(tokens)}): an RNN reaches the last token from the "
        f"first in {n - 1} sequential steps; attention links all {n * (n - 1) // 2} pairs "
        "directly, in one step."
    )
    return describe.attach(_figure(traces, layout), summary)
