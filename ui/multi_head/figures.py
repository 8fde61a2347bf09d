"""The multi-head page's matrices with their heads framed: the projections W_Q, W_K, W_V, W_O,
the split of Q, K or V into heads, and the concat.

Arrays come in computed (by attention_core); these functions only lay them out, each head's
part framed in its colour (ui.multi_head.labels).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ui.multi_head.labels import head_color, shape_text
from ui.widgets import describe, heatmaps, render, theme


def head_boxes(
    num_heads: int,
    width: int,
    *,
    along: str,
    span: tuple[float, float],
    xref: str = "x",
    yref: str = "y",
    stride: int | None = None,
) -> list[dict]:
    """Plotly shapes framing each head's `width // num_heads` columns (along="x") or rows ("y"),
    head h's starting at h · `stride` (default: right after the previous head's).

    Plain dicts, laid out with the rest of the figure: plotly's `add_shape` copies every
    existing shape on each call, which made this page's reruns slow.
    """
    d_head = width // num_heads
    step = stride or d_head
    boxes = []
    for h in range(num_heads):
        start, stop = h * step - 0.5, h * step + d_head - 0.5
        box = (
            {"x0": start, "x1": stop, "y0": span[0], "y1": span[1]}
            if along == "x"
            else {"x0": span[0], "x1": span[1], "y0": start, "y1": stop}
        )
        boxes.append(
            {
                "type": "rect",
                "xref": xref,
                "yref": yref,
                "line": {"color": head_color(h), "width": 3},
                "fillcolor": "rgba(0,0,0,0)",
                **box,
            }
        )
    return boxes


def projections_figure(
    weights: Sequence[tuple[str, np.ndarray]], num_heads: int, *, heads_on: str
) -> render.Panels:
    """`(d_model, d_model)` projections side by side (nn.Linear layout), one shared scale,
    each head's part framed in its colour: a figure each, so that a phone shows them one
    under the other, as large as the screen allows (`render.Panels`).

    W_Q, W_K, W_V: head h owns output rows h·d_head..(h+1)·d_head-1 (heads_on="rows");
    W_O: head h's concat features meet columns h·d_head.. (heads_on="cols").
    """
    count = len(weights)
    d_model = weights[0][1].shape[0]
    scale = heatmaps.color_scale("values", np.concatenate([w.ravel() for _, w in weights]))
    along = "y" if heads_on == "rows" else "x"
    panels = []
    for index, (name, matrix) in enumerate(weights):
        layout = _projection_axes(d_model)
        layout.update(
            coloraxis={**scale.axis(), "showscale": index == count - 1},
            shapes=head_boxes(num_heads, d_model, along=along, span=(-0.5, d_model - 0.5)),
            annotations=[_title_below(f"<b>{name}</b> {shape_text(matrix.shape)}")],
            height=int(min(460, 200 + (300 if count == 1 else 220) * min(1.0, d_model / 16))),
            margin={"l": 10, "r": 10, "t": 60, "b": 40},
            font={"size": theme.font_size()},
        )
        panels.append(render.figure([_projection_trace(name, matrix)], layout))
    return render.Panels(tuple(panels), count)


def _projection_trace(name: str, matrix: np.ndarray) -> dict:
    """One weight matrix `(out, in)` as a heatmap; the hover
    names the output and input feature (from 1), small matrices print their numbers."""
    rows, cols = matrix.shape
    annotate = rows <= 6
    trace = {
        "type": "heatmap",
        "z": matrix.astype(np.float32),
        "x": np.arange(cols),
        "y": np.arange(rows),
        "coloraxis": "coloraxis",
        "xgap": 1 if annotate else 0,
        "ygap": 1 if annotate else 0,
        "hovertemplate": (
            f"{name}: output feature %{{customdata[0]}}, input feature %{{customdata[1]}}"
            "<br>value: %{z:.4f}<extra></extra>"
        ),
        "customdata": np.stack(
            np.meshgrid(np.arange(1, rows + 1), np.arange(1, cols + 1), indexing="ij"), axis=-1
        ),
    }
    if annotate:
        trace["text"] = [[describe.format_number(v) for v in row] for row in matrix]
        trace["texttemplate"] = "%{text}"
        trace["textfont"] = {"size": theme.font_size()}
    return trace


def _projection_axes(d_model: int) -> dict:
    """A square panel's axes: input features across the top, output features down."""
    ticks = list(range(0, d_model, max(1, d_model // 16)))
    axis = {
        "tickvals": ticks,
        "ticktext": [str(t + 1) for t in ticks],
        "tickfont": {"size": theme.font_size() - 2},
        "constrain": "domain",
    }
    return {
        "xaxis": {**axis, "side": "top", "title": {"text": "input feature →"}},
        "yaxis": {
            **axis,
            "autorange": "reversed",
            "scaleanchor": "x",
            "title": {"text": "← output feature"},
        },
    }


def _title_below(text: str) -> dict:
    """A panel title under the panel, centred."""
    return {
        "text": text,
        "x": 0.5,
        "y": 0,
        "xref": "paper",
        "yref": "paper",
        "xanchor": "center",
        "yanchor": "top",
        "yshift": -4,
        "showarrow": False,
        "font": {"size": theme.font_size() + 1},
    }


def banded_matrix_figure(
    matrix: np.ndarray,
    num_heads: int,
    *,
    tokens: Sequence[str],
    title: str,
) -> go.Figure:
    """A `(pos, d_model)` matrix (rows = tokens) with each head's columns framed in its colour."""
    pos, d_model = matrix.shape
    fig = heatmaps.heatmap(
        matrix,
        row_labels=list(tokens),
        col_labels=[f"f{j + 1}" for j in range(d_model)],
        kind="values",
        title=title,
        row_title="query",
        col_title="feature",
        annotate=pos * d_model <= 96,
    )
    return fig.update_layout(
        shapes=head_boxes(num_heads, d_model, along="x", span=(-0.5, pos - 0.5))
    )


# The columns of the wide matrix and of its split into heads, side by side on a wide screen.
SPLIT_WIDTHS = (3, 2)


def head_split_figure(
    matrix: np.ndarray, heads: np.ndarray, *, tokens: Sequence[str], name: str
) -> render.Panels:
    """`matrix` `(pos, d_model)` beside `heads` `(head, pos, d_head)` = split_heads(matrix): a
    figure each, side by side on a wide screen and one above the other on a phone.

    First: the wide matrix, each head's columns framed in its colour. Second: the same numbers as
    a stack of per-head blocks (the head axis moved in front), framed in the same colours.
    """
    pos, d_model = matrix.shape
    num_heads, _, d_head = heads.shape
    stacked, labels, stride = stack_heads(heads, tokens)
    wide, split = _split_traces(matrix, stacked, name, heatmaps.color_scale("values", matrix))
    wide_axes, split_axes = _split_axes(tokens, d_model, d_head, labels)
    wide_title, split_title = _split_titles(name, matrix.shape, heads.shape)
    common = {
        "height": int(min(700, max(320, 120 + 18 * stacked.shape[0]))),
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
        "font": {"size": theme.font_size()},
    }
    wide_figure = render.figure(
        [wide],
        {
            **wide_axes,
            "shapes": head_boxes(num_heads, d_model, along="x", span=(-0.5, pos - 0.5)),
            "annotations": [wide_title, *_head_labels(num_heads, d_head, pos)],
            **common,
        },
    )
    split_figure = render.figure(
        [split],
        {
            **split_axes,
            "shapes": head_boxes(
                num_heads, num_heads * pos, along="y", span=(-0.5, d_head - 0.5), stride=stride
            ),
            "annotations": [split_title],
            **common,
        },
    )
    return render.Panels((wide_figure, split_figure), 2, widths=SPLIT_WIDTHS)


def stack_heads(heads: np.ndarray, tokens: Sequence[str]) -> tuple[np.ndarray, list[str], int]:
    """`(head, pos, d_head)` as one tall `(head·(pos+1) − 1, d_head)` matrix, a blank (NaN) row
    between heads so they stay visibly apart; its row labels `h2 · cat`; the rows per head
    block including the blank one."""
    num_heads, pos, d_head = heads.shape
    stride = pos + 1
    stacked = np.full((num_heads * stride - 1, d_head), np.nan)
    labels = []
    for h in range(num_heads):
        stacked[h * stride : h * stride + pos] = heads[h]
        labels += [f"h{h + 1} · {t}" for t in tokens] + ([""] if h < num_heads - 1 else [])
    return stacked, labels, stride


def _split_traces(
    matrix: np.ndarray, stacked: np.ndarray, name: str, scale: heatmaps.ColorScale
) -> tuple[dict, dict]:
    """The wide matrix (with the colour bar) and the stacked heads, on one diverging scale."""
    common = {
        "type": "heatmap",
        **scale.trace(),
        "xgap": 1,
        "ygap": 1,
    }
    wide = {
        **common,
        "z": matrix.astype(np.float32),
        "x": np.arange(matrix.shape[1]),
        "y": np.arange(matrix.shape[0]),
        "hovertemplate": f"{name}: query %{{y}}, feature %{{x}} = %{{z:.4f}}<extra></extra>",
    }
    split = {
        **common,
        "z": stacked.astype(np.float32),
        "x": np.arange(stacked.shape[1]),
        "y": np.arange(stacked.shape[0]),
        "showscale": False,
        "hovertemplate": "%{z:.4f}<extra></extra>",
    }
    return wide, split


def _split_axes(
    tokens: Sequence[str], d_model: int, d_head: int, labels: list[str]
) -> tuple[dict, dict]:
    """The wide matrix's axes, and the stacked heads'."""
    few_rows = len(labels) <= 40
    wide = {
        "xaxis": _feature_axis("feature (d_model) →", d_model),
        "yaxis": {
            "autorange": "reversed",
            "tickvals": list(range(len(tokens))),
            "ticktext": list(tokens),
        },
    }
    split = {
        "xaxis": _feature_axis("feature in the head (d_head) →", d_head),
        "yaxis": {
            "autorange": "reversed",
            "tickvals": list(range(len(labels))) if few_rows else [],
            "ticktext": labels if few_rows else [],
        },
    }
    return wide, split


def _feature_axis(title: str, count: int) -> dict:
    """An x axis of `count` features numbered from 1 (numbers hidden past 24)."""
    return {
        "title": {"text": title},
        "tickvals": list(range(count)),
        "ticktext": [str(j + 1) for j in range(count)],
        "showticklabels": count <= 24,
    }


def _split_titles(name: str, shape: Sequence[int], heads_shape: Sequence[int]) -> list[dict]:
    """The two figures' titles, each with the shape of what it shows."""
    return [
        {
            "text": text,
            "x": 0.5,
            "y": 1.0,
            "xref": "paper",
            "yref": "paper",
            "xanchor": "center",
            "yanchor": "bottom",
            "showarrow": False,
            "font": {"size": theme.font_size()},
        }
        for text in (
            f"{name}: (pos, d_model) = {shape_text(shape)}",
            f"split_heads({name}):<br>(head, pos, d_head) = {shape_text(heads_shape)}",
        )
    ]


def _head_labels(num_heads: int, d_head: int, pos: int) -> list[dict]:
    """h1, h2, ... under each head's columns of the wide matrix (up to 16 heads)."""
    if num_heads > 16:
        return []
    return [
        {
            # Yellow or sky-blue text would fail 4.5:1 on white: the colour goes in a swatch,
            # the label in the theme's text colour.
            "text": f"<span style='color:{head_color(h)}'>■</span> h{h + 1}",
            "x": (h + 0.5) * d_head - 0.5,
            "y": pos - 0.5,
            "xref": "x",
            "yref": "y",
            "yanchor": "top",
            "yshift": -4,
            "showarrow": False,
            "font": {"size": theme.font_size()},
        }
        for h in range(num_heads)
    ]
