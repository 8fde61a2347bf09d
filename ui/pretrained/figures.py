"""The pretrained page's figures: one head zoomed, the layer averages and the head roles.

Each builder takes the page's trace (`PageTrace` of ui.models.minilm, not imported: figures
never reach the model) and the layer, head, query it shows. The page draws it through
`render.cached(builder, render.digested(trace.digest, trace), ...)`: the key is a few hundred
bytes to hash, not the ~100 MB of a 512-token trace, and every viewer of one link shares one
figure. Figures are built from plain dicts; long texts are shrunk into blocks so the browser
stays fast. Nothing here computes attention: the numbers come from the model's trace.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from attention_core.head_patterns import head_average
from ui.pretrained.patterns import PATTERN_TITLES, ROLE_TITLES
from ui.widgets import describe, heatmaps, render, theme
from ui.widgets.state import is_presenting

# The layer averages are drawn at most this many cells a side (longer texts over blocks).
MAX_AVERAGE_SIDE = 96


def zoom_figure(trace: Any, layer: int, head: int, query: int) -> go.Figure:
    """Head (`layer`, `head`)'s weights as a heatmap, the row of `query` (all from 0) framed."""
    label = PATTERN_TITLES[str(trace.patterns.labels[layer, head])]
    fig = heatmaps.heatmap(
        trace.weights[layer, head],
        row_labels=trace.labels(),
        col_labels=trace.labels(),
        kind="weights",
        title=f"Layer {layer + 1}, head {head + 1} ({label})",
        height=None if trace.num_tokens <= 24 else 720,
    )
    fig.add_shape(
        type="rect",
        x0=-0.5,
        x1=trace.num_tokens - 0.5,
        y0=query - 0.5,
        y1=query + 0.5,
        line={"color": theme.CHOSEN_COLOR, "width": 3 if is_presenting() else 2},
    )
    return fig


def shrink(matrix: np.ndarray, side: int) -> np.ndarray:
    """Average `(..., n, n)` over blocks so it is at most `side` cells a side (display only)."""
    n = matrix.shape[-1]
    step = -(-n // side)
    if step == 1:
        return matrix
    padded = -(-n // step) * step
    # float32 sums: a display average needs no more, and a float64 copy of 72 heads at 512
    # tokens would be 150 MB.
    total = np.zeros((*matrix.shape[:-2], padded, padded), dtype=np.float32)
    count = np.zeros((padded, padded), dtype=np.float32)
    total[..., :n, :n] = matrix
    count[:n, :n] = 1
    blocks = (padded // step, step, padded // step, step)
    summed = total.reshape(*matrix.shape[:-2], *blocks).sum(axis=(-3, -1))
    return summed / count.reshape(blocks).sum(axis=(1, 3))


def averages_figure(trace: Any, layer: int) -> go.Figure:
    """The mean over heads of each layer, as small multiples; `layer` (from 0) in bold."""
    labels = trace.labels()
    averages = head_average(trace.weights)  # (layer, q_pos, k_pos)
    if trace.num_tokens > MAX_AVERAGE_SIDE:
        averages = shrink(averages, MAX_AVERAGE_SIDE)
        labels = labels[:: -(-trace.num_tokens // MAX_AVERAGE_SIDE)]
    return heatmaps.heatmap_grid(
        averages,
        titles=[f"layer {i + 1}: mean of {trace.num_heads} heads" for i in range(trace.num_layers)],
        row_labels=labels,
        col_labels=labels,
        kind="weights",
        columns=3,
        highlight=layer,
    )


# -- head roles -----------------------------------------------------------------------------------


def roles_figure(trace: Any) -> render.Panels:
    """Every head's label and the score behind it: layer per row, head per column, coloured by
    label; HEADS_PER_PANEL heads a figure, side by side on a wide screen and one under the other
    on a phone, where a cell of twelve heads in a row was too narrow for its words."""
    patterns = trace.patterns
    scores = patterns.label_score()  # (layer, head)
    text_cells = np.array(
        [
            [f"{ROLE_TITLES[str(patterns.labels[i, j])]}<br>{scores[i, j]:.2f}"
             for j in range(trace.num_heads)]
            for i in range(trace.num_layers)
        ],
        dtype=object,
    )  # fmt: skip
    starts = range(0, trace.num_heads, HEADS_PER_PANEL)
    panels = tuple(
        _roles_panel(
            patterns.labels, text_cells, slice(h, min(h + HEADS_PER_PANEL, trace.num_heads))
        )
        for h in starts
    )
    return render.Panels(panels, len(panels))


HEADS_PER_PANEL = 4


def _roles_panel(labels: np.ndarray, text_cells: np.ndarray, heads: slice) -> go.Figure:
    """The roles of heads `heads` of every layer: `labels` and `text_cells` are `(layer, head)`."""
    names = list(PATTERN_TITLES)
    index = np.vectorize(names.index)(labels[:, heads])  # (layer, head) category numbers
    count = len(names)
    colors = [theme.PATTERN_COLORS[name] for name in names]
    # A stepped colour scale: category c fills [c, c + 1) / count with one flat colour.
    stepped = [[(c + edge) / count, color] for c, color in enumerate(colors) for edge in (0, 1)]
    scale = heatmaps.ColorScale(0.0, count, stepped, show_bar=False)
    layers, shown = index.shape  # the last panel may hold fewer heads
    first = heads.start + 1
    heat: dict[str, Any] = {
        "type": "heatmap",
        "z": index + 0.5,
        **scale.trace(),
        "text": text_cells[:, heads].tolist(),
        "texttemplate": "%{text}",
        "textfont": {"size": max(10, theme.font_size() - 2), "color": theme.PATTERN_TEXT_COLOR},
        "xgap": 2,
        "ygap": 2,
        "hovertemplate": "layer %{y}, head %{x}: %{text}<extra></extra>",
        "x": np.arange(first, first + shown),
        "y": np.arange(1, layers + 1),
    }
    axis = {"dtick": 1, "showgrid": False, "zeroline": False}
    layout = {
        "xaxis": {**axis, "title": {"text": "head"}, "side": "top"},
        "yaxis": {**axis, "title": {"text": "layer"}, "autorange": "reversed"},
        "height": int((90 + 52 * layers) * (1.4 if is_presenting() else 1)),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "font": {"size": theme.font_size()},
        "plot_bgcolor": "white",
    }
    roles = [str(label) for label in labels[:, heads].ravel()]
    counts = "; ".join(f"{ROLE_TITLES[name]}: {roles.count(name)}" for name in dict.fromkeys(roles))
    summary = (
        f"The role of heads {first} to {first + shown - 1} of each of the {layers} layers "
        f"(layer per row, head per column), written in its cell with its score; heads per "
        f"role: {counts}."
    )
    table = describe.ChartTable(
        values=np.asarray([[describe.plain(c) for c in row] for row in text_cells[:, heads]],
                          dtype=object),
        rows=tuple(f"layer {i + 1}" for i in range(layers)),
        columns=tuple(f"head {j}" for j in range(first, first + shown)),
        row_title="layer",
    )  # fmt: skip
    return describe.attach(render.figure([heat], layout), summary, table)
