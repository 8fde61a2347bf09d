"""What a chart shows, in words and as a table: its text alternative and its data.

A screen reader gets nothing from a heatmap's colours, so every chart the app draws carries a
one-sentence summary computed from the numbers it plots (`st.plotly_chart(alt=...)`, which the
browser reads as the chart's `aria-label`) and, on request, the same numbers as a table.

The figure builders know their labels and attach both with `attach` when they build a figure;
`summary` and `table` fall back to reading any other figure's traces. Summaries are built once
per figure: cached figures are described inside the figure cache (`ui.widgets.render`), so a
rerun reads an attribute. Nothing here imports Streamlit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

# A sentence, not a listing: past this many rows or series the summary names the extremes only.
MAX_LISTED = 6
_TAGS = re.compile(r"<[^>]+>")
MINUS_INFINITY = "−∞"


@dataclass(frozen=True)
class MatrixAxes:
    """What a heatmap's rows and columns are: one label per row and column, and what a row
    and a column stand for ("query", "key")."""

    rows: Sequence[str]
    columns: Sequence[str]
    row_title: str = "query"
    col_title: str = "key"


@dataclass(frozen=True)
class ChartTable:
    """A chart's numbers as rows × columns, labelled like its axes.

    `values` is `(rows, cols)`; `rows` and `columns` label them (positions are part of the
    label, so a repeated token never merges two rows).
    """

    values: np.ndarray
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    row_title: str = ""
    title: str = ""

    def frame(self):
        """The table as a pandas DataFrame (built on demand: only when tables are switched on)."""
        import pandas as pd

        return pd.DataFrame(
            self.values, index=pd.Index(self.rows, name=self.row_title), columns=list(self.columns)
        )

    @cached_property
    def arrow(self):
        """The frame as an Arrow table, made once: a cached chart's table is drawn by every
        session that shows tables, and `st.dataframe` sends a ready Arrow table far faster
        than it converts a DataFrame (the same bytes)."""
        import pyarrow as pa

        return pa.Table.from_pandas(self.frame())


def attach(figure: Any, summary: str, table: ChartTable | None = None) -> Any:
    """Give a figure its text alternative and table; returns the figure.

    Call it on a figure that is being built, never on a shared (cached) one.
    """
    figure._alt = summary
    figure._table = table
    return figure


def summary(figure: Any) -> str:
    """The figure's one-sentence text alternative: attached by its builder, else read off it."""
    attached = getattr(figure, "_alt", None)
    return attached if attached else describe_traces(figure._data, figure._layout)


def table(figure: Any) -> ChartTable | None:
    """The figure's data as a table, if it has one."""
    if hasattr(figure, "_table"):
        return figure._table
    return traces_table(figure._data, figure._layout)


def label(position: int, text: str) -> str:
    """A row or column label that stays unique when tokens repeat: `1 “the”`."""
    return f"{position + 1} “{text}”"


def format_number(value: float, decimals: int = 2) -> str:
    """Cell text: −∞ for a masked score, otherwise a fixed number of decimals."""
    if np.isneginf(value):
        return MINUS_INFINITY
    if np.isposinf(value):
        return "∞"
    if np.isnan(value):
        return "NaN"
    text = f"{value:.{decimals}f}"
    # "-0.00" reads as a sign error to a learner.
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def number(value: float, decimals: int = 2) -> str:
    """A value in a sentence: the cells' text, or scientific notation where that would read
    0.00 or run long."""
    if np.isfinite(value) and value != 0 and (abs(value) >= 1e5 or abs(value) < 10**-decimals):
        return f"{value:.2e}"
    return format_number(value, decimals)


def short(value: float) -> str:
    """Four significant digits: axis positions and measured values of any size."""
    return f"{float(value):.4g}"


def plain(text: str) -> str:
    """Chart titles carry a little HTML (<b>, <br>): read aloud, they are plain text."""
    return " ".join(_TAGS.sub(" ", text or "").split())


def matrix_summary(
    matrix: np.ndarray,
    axes: MatrixAxes,
    *,
    kind: str = "weights",
    title: str = "",
    removed: np.ndarray | None = None,
    decimals: int = 2,
) -> str:
    """One sentence about a `(rows, cols)` heatmap.

    Weights: where each query puts most of its weight (for a few rows), or the strongest pair.
    Other kinds: the range, with the cells that hold the extremes. Masked cells are counted.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    rows, cols = matrix.shape
    row_labels, col_labels, row_title, col_title = (
        axes.rows,
        axes.columns,
        axes.row_title,
        axes.col_title,
    )
    blocked = ~np.isfinite(matrix) if removed is None else np.asarray(removed, bool)
    names = {"weights": "Attention weights", "scores": "Scores", "mask": "Mask"}
    what = plain(title) or names.get(kind, "Values")
    head = f"{what}, {_count(rows, row_title)} × {_count(cols, col_title)}"

    def cell(i: int, j: int) -> str:
        return f"{_place(row_title, i, row_labels[i])} → {_place(col_title, j, col_labels[j])}"

    if kind == "mask":
        allowed = int((matrix > 0.5).sum())
        return (
            f"{head}: {allowed} of {rows * cols} pairs may attend, {rows * cols - allowed} blocked."
        )
    kept = np.where(blocked, np.nan, matrix)
    if np.isnan(kept).all():
        return f"{head}: every cell is masked."
    parts = []
    if kind == "weights" and rows <= MAX_LISTED:
        tops = []
        for i in range(rows):
            if np.isnan(kept[i]).all():
                tops.append(f"“{row_labels[i]}” is fully masked")
                continue
            j = int(np.nanargmax(kept[i]))
            tops.append(
                f"“{row_labels[i]}” puts {number(kept[i, j], decimals)} on “{col_labels[j]}”"
            )
        parts.append("; ".join(tops))
    i, j = np.unravel_index(int(np.nanargmax(kept)), kept.shape)
    if kind == "weights":
        parts.append(f"the strongest weight is {number(kept[i, j], decimals)} ({cell(i, j)})")
    else:
        low = np.unravel_index(int(np.nanargmin(kept)), kept.shape)
        parts.append(
            f"values run from {number(kept[low], decimals)} ({cell(*low)}) "
            f"to {number(kept[i, j], decimals)} ({cell(i, j)})"
        )
    if blocked.any():
        parts.append(f"{int(blocked.sum())} of {rows * cols} cells are masked (−∞)")
    return f"{head}: " + "; ".join(parts) + "."


def matrix_table(matrix: np.ndarray, axes: MatrixAxes, *, title: str = "") -> ChartTable:
    """A heatmap's matrix with its labels; masked cells stay −∞."""
    return ChartTable(
        values=np.asarray(matrix, dtype=np.float64),
        rows=tuple(f"{axes.row_title} {label(i, t)}" for i, t in enumerate(axes.rows)),
        columns=tuple(f"{axes.col_title} {label(j, t)}" for j, t in enumerate(axes.columns)),
        row_title=axes.row_title,
        title=plain(title),
    )


def lines_summary(
    x: np.ndarray, series: dict[str, np.ndarray], *, x_title: str, y_title: str, title: str = ""
) -> str:
    """One sentence about line plots over a shared x: where each series starts and ends."""
    x = np.asarray(x)
    what = plain(title) or f"{plain(y_title)} against {plain(x_title)}"
    head = f"{what}, {_count(len(series), 'line')} over {plain(x_title)} {_span(x)}"
    if not series or x.size == 0:
        return f"{head}."
    described = []
    for name, y in list(series.items())[:MAX_LISTED]:
        y = np.asarray(y, dtype=np.float64)
        finite = np.isfinite(y)
        if not finite.any():
            described.append(f"{name}: no values")
            continue
        first, last = np.flatnonzero(finite)[[0, -1]]
        described.append(
            f"{name} goes from {short(y[first])} to {short(y[last])}"
            f" (highest {short(np.nanmax(y))})"
        )
    more = len(series) - MAX_LISTED
    tail = f"; and {more} more" if more > 0 else ""
    return f"{head}: " + "; ".join(described) + tail + "."


def lines_table(
    x: np.ndarray, series: dict[str, np.ndarray], *, x_title: str, title: str = ""
) -> ChartTable:
    return ChartTable(
        values=np.column_stack([np.asarray(y, dtype=np.float64) for y in series.values()])
        if series
        else np.zeros((len(x), 0)),
        rows=tuple(short(v) for v in np.asarray(x, dtype=np.float64)),
        columns=tuple(series),
        row_title=plain(x_title),
        title=plain(title),
    )


def describe_traces(data: Sequence[dict], layout: dict) -> str:
    """A summary read off any figure's plain trace dicts: its title and what each trace holds.

    For figures no builder described (hand-made diagrams, bar charts); cheap, since it reads
    the arrays the figure already holds.
    """
    title = plain(_text(layout.get("title")))
    said = []
    # Small multiples drawn by hand: each heatmap's panel title is an annotation.
    heatmaps = [id(t) for t in data if t.get("type") == "heatmap"]
    panels = [plain(a.get("text", "")) for a in layout.get("annotations") or ()]
    names = dict(zip(heatmaps, panels, strict=True)) if len(panels) == len(heatmaps) else {}
    for trace in data[:MAX_LISTED]:
        kind = trace.get("type", "scatter")
        name = plain(str(trace.get("name") or names.get(id(trace), "")))
        if kind == "heatmap" and trace.get("z") is not None:
            z = np.asarray(trace["z"], dtype=np.float64)
            if z.ndim == 2 and np.isfinite(z).any():
                said.append(
                    f"{name + ': ' if name else ''}a {z.shape[0]} × {z.shape[1]} heatmap from "
                    f"{number(np.nanmin(z))} to {number(np.nanmax(z))}"
                )
        elif trace.get("y") is not None and kind in ("scatter", "bar", "scattergl"):
            y = _numbers(trace["y"])
            if y is not None and y.size:
                mark = "bars" if kind == "bar" else "points"
                said.append(
                    f"{name or kind}: {y.size} {mark} from {short(np.nanmin(y))} "
                    f"to {short(np.nanmax(y))}"
                )
    x_title = plain(_text((layout.get("xaxis") or {}).get("title")))
    y_title = plain(_text((layout.get("yaxis") or {}).get("title")))
    axes = f" ({y_title} against {x_title})" if x_title and y_title else ""
    head = f"{title or 'Chart'}{axes}"
    return f"{head}: " + "; ".join(said) + "." if said else f"{head}."


def traces_table(data: Sequence[dict], layout: dict) -> ChartTable | None:
    """The first heatmap's matrix, or the lines/bars sharing one x axis, as a table."""
    title = plain(_text(layout.get("title")))
    for trace in data:
        if trace.get("type") == "heatmap" and trace.get("z") is not None:
            z = np.asarray(trace["z"], dtype=np.float64)
            if z.ndim == 2:
                rows = _ticks(layout.get("yaxis") or {}, z.shape[0])
                cols = _ticks(layout.get("xaxis") or {}, z.shape[1])
                return ChartTable(z, rows, cols, title=title)
    lines = [t for t in data if t.get("x") is not None and t.get("y") is not None]
    if not lines:
        return None
    x = _numbers(lines[0]["x"])
    ys = [_numbers(t["y"]) for t in lines]
    if x is None or any(y is None or y.shape != x.shape for y in ys):
        return None
    if any(_numbers(t["x"]) is None or not np.array_equal(_numbers(t["x"]), x) for t in lines):
        return None
    names = [plain(str(t.get("name") or f"series {i + 1}")) for i, t in enumerate(lines)]
    x_title = plain(_text((layout.get("xaxis") or {}).get("title")))
    return ChartTable(np.column_stack(ys), tuple(short(v) for v in x), tuple(names), x_title, title)


def _count(n: int, noun: str) -> str:
    """`3 queries`, `1 key`, `16 keys (input token)`: the first word is the noun."""
    first, _, rest = (noun or "row").partition(" ")
    if n != 1:
        consonant_y = first.endswith("y") and first[-2:-1] not in "aeiou"
        first = first[:-1] + "ies" if consonant_y else first + "s"
    return f"{n} {first}{' ' + rest if rest else ''}"


def _place(title: str, index: int, text: str) -> str:
    """`query 2 “cat”`; a label that already says where it is (“head 2”) is not repeated."""
    where = f"{title} {index + 1}".strip()
    return f"“{text}”" if str(text).startswith(where) else f"{where} “{text}”"


def _span(x: np.ndarray) -> str:
    values = _numbers(x)
    if values is None or values.size == 0:
        return ""
    return f"{short(np.nanmin(values))} to {short(np.nanmax(values))}"


def _text(title: Any) -> str:
    if isinstance(title, dict):
        return str(title.get("text") or "")
    return str(title or "")


def _numbers(values: Any) -> np.ndarray | None:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return array.ravel() if array.ndim >= 1 else None


def _ticks(axis: dict, count: int) -> tuple[str, ...]:
    text = axis.get("ticktext")
    if text is not None and len(text) == count:
        return tuple(label(i, plain(str(t))) for i, t in enumerate(text))
    return tuple(str(i + 1) for i in range(count))
