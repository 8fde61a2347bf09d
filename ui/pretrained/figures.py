"""The real-model page's figures: one head zoomed, the head view's lines, every head at once,
the layer averages and the head roles.

Each builder takes the text (and the layer, head, query it shows) rather than the trace, so the
page draws it through `render.cached(builder, text, ...)`: the key is a few hundred bytes to
hash, not the ~100 MB of a 512-token trace, and every viewer of one link shares one figure.
The builder fetches the trace from the trace cache (`model_views.trace_of`), which holds it
once per text. Figures are built from plain dicts; long texts are shrunk into blocks so the
browser stays fast. Nothing here computes attention: the numbers come from the model's trace.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core.head_patterns import head_average
from ui.models.minilm import PageTrace, trace_of
from ui.pretrained.views import PATTERN_TITLES, ROLE_TITLES
from ui.widgets import compare, describe, heatmaps, render, theme
from ui.widgets.state import PageState, is_presenting, write_url_after_fragment

# The head view draws n² lines: past this many tokens only the chosen query's lines are drawn.
MAX_ALL_LINES_TOKENS = 48
MAX_HEAD_VIEW_TOKENS = 160
# Lines with less weight than this are not drawn (they would be invisible anyway).
MIN_LINE_WEIGHT = 0.01
LINE_LEVELS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0001)
QUERY_COLOR = "#e15759"
# Each small map of the model view is at most this many cells a side (longer texts are averaged
# over blocks of tokens), so the 72 maps stay one light image.
MAX_TILE = 24
MAX_AVERAGE_SIDE = 96
PATTERN_COLORS = {
    "previous": "#fdd0a2",
    "next": "#fdae6b",
    "self": "#c7e9c0",
    "cls": "#bcbddc",
    "sep": "#9e9ac8",
    "broad": "#deebf7",
    "mixed": "#f0f0f0",
}


def zoom_figure(text: str, layer: int, head: int, query: int) -> go.Figure:
    """Head (`layer`, `head`)'s weights as a heatmap, the row of `query` (all from 0) framed."""
    trace = trace_of(text)
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
        line={"color": QUERY_COLOR, "width": 3 if is_presenting() else 2},
    )
    return fig


# -- the head view ------------------------------------------------------------------------------


def head_view_figure(text: str, layer: int, head: int, query: int, only_query: bool) -> go.Figure:
    """Lines from each query token (left) to each key token (right), BertViz style.

    A line's width and opacity grow with its weight; lines under MIN_LINE_WEIGHT are left out.
    `query` (from 0) is drawn on top in red and its token is bold; with `only_query` the other
    queries' lines are left out. Each line trace is named "query" or "others" with its weight
    band, e.g. "query 0.50-0.70".
    """
    trace = trace_of(text)
    w = trace.weights[layer, head]  # (q_pos, k_pos)
    y = -np.arange(trace.num_tokens, dtype=np.float64)  # token i sits at height -i
    data = [
        *_weight_lines(w, y, query, only_query),
        _query_weights_hover(trace.tokens, w, y, query),
        *_token_columns(trace.tokens, y, query),
    ]
    tokens = trace.tokens
    best = int(np.argmax(w[query]))
    summary = (
        f"Head view of layer {layer + 1}, head {head + 1}: lines join each query token (left) to "
        f"the keys (right) it gives at least {MIN_LINE_WEIGHT} of its weight; query "
        f"{query + 1} “{tokens[query]}” puts {w[query, best]:.2f} on “{tokens[best]}”."
    )
    table = describe.matrix_table(w, describe.MatrixAxes(tokens, tokens))
    return describe.attach(render.figure(data, _head_view_layout(trace.num_tokens)), summary, table)


def _weight_lines(w: np.ndarray, y: np.ndarray, query: int, only_query: bool) -> list[dict]:
    """One trace per weight band (a trace has one width and opacity), its segments separated by
    NaN gaps: the other queries' first, the chosen query's on top."""
    n = w.shape[0]
    is_query = np.arange(n) == query
    drawn = w >= MIN_LINE_WEIGHT
    if only_query:
        drawn &= is_query[:, None]
    lines = []
    for emphasised in (False, True):
        rows_here = (is_query == emphasised)[:, None]
        for lo, hi in itertools.pairwise(LINE_LEVELS):
            level = min(1.0, (lo + hi) / 2)
            rows, cols = np.nonzero(drawn & (w >= lo) & (w < hi) & rows_here)
            if rows.size == 0:
                continue
            lines.append(
                {
                    "type": "scatter",
                    "x": np.tile([0.0, 1.0, np.nan], rows.size),
                    "y": np.column_stack([y[rows], y[cols], np.full(rows.size, np.nan)]).ravel(),
                    "mode": "lines",
                    "name": f"{'query' if emphasised else 'others'} {lo:.2f}-{min(hi, 1):.2f}",
                    "line": {
                        "width": 0.8 + 7 * level,
                        "color": QUERY_COLOR if emphasised else "#7f7f7f",
                    },
                    "opacity": min(1.0, 0.25 + 0.9 * level) if emphasised else 0.1 + 0.5 * level,
                    "hoverinfo": "skip",
                    "showlegend": False,
                }
            )
    return lines


def _query_weights_hover(tokens: tuple[str, ...], w: np.ndarray, y: np.ndarray, query: int) -> dict:
    """An invisible marker per key at the right end of the query's lines, saying the weight on
    hover (a line cannot carry its own hover label)."""
    n = len(tokens)
    return {
        "type": "scatter",
        "x": np.full(n, 1.0),
        "y": y,
        "mode": "markers",
        "name": "weights of the query",
        "marker": {"size": 14, "opacity": 0},
        "hovertext": [
            f"query {query + 1} “{tokens[query]}” → key {j + 1} “{tokens[j]}”: {w[query, j]:.4f}"
            for j in range(n)
        ],
        "hoverinfo": "text",
        "showlegend": False,
    }


def _token_columns(tokens: tuple[str, ...], y: np.ndarray, query: int) -> list[dict]:
    """The tokens written down the left (queries, the chosen one bold) and right (keys)."""
    columns = []
    for side, x, position in (("query", 0.0, "left"), ("key", 1.0, "right")):
        columns.append(
            {
                "type": "scatter",
                "x": np.full(len(tokens), x),
                "y": y,
                "mode": "text",
                "name": f"{side} tokens",
                "text": [
                    f"<b>{t}</b>" if (side == "query" and i == query) else t
                    for i, t in enumerate(tokens)
                ],
                "textposition": f"middle {position}",
                "textfont": {"size": theme.font_size()},
                "hoverinfo": "skip",
                "showlegend": False,
            }
        )
    return columns


def _head_view_layout(n: int) -> dict:
    per_token = 30 if is_presenting() else 22
    return {
        "height": int(min(3600, max(260, 90 + per_token * n))),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "font": {"size": theme.font_size()},
        "xaxis": {"visible": False, "range": [-0.9, 1.9], "fixedrange": True},
        "yaxis": {"visible": False, "range": [-n + 0.4, 0.6], "fixedrange": True},
        "annotations": [
            {
                "x": x,
                "xref": "x",
                "y": 1.0,
                "yref": "paper",
                "yanchor": "bottom",
                "xanchor": anchor,
                "showarrow": False,
                "text": f"<b>{side}</b>",
            }
            for side, x, anchor in (("query", 0.0, "right"), ("key", 1.0, "left"))
        ],
        "plot_bgcolor": "white",
    }


# -- every head at once -------------------------------------------------------------------------


def _shrink(matrix: np.ndarray, side: int) -> np.ndarray:
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


def tile_cell(num_tokens: int) -> int:
    """Rows (and columns) per layer (and head) in the model view: a tile and one blank line."""
    return -(-num_tokens // -(-num_tokens // MAX_TILE)) + 1


def tile_at(x: float, y: float, cell: int) -> tuple[int, int] | None:
    """The (layer, head), from 0, of the model-view cell at column `x`, row `y`; None in a gap."""
    column, row = round(x), round(y)
    if column < 0 or row < 0 or column % cell == cell - 1 or row % cell == cell - 1:
        return None
    return row // cell, column // cell


def model_view_figure(text: str, layer: int, head: int) -> go.Figure:
    """All heads at once: layer per row, head per column, each a small weights map, as one
    heatmap of the tiles side by side (72 separate plots would take seconds to draw).

    Head (`layer`, `head`), from 0, is framed. Hover says the layer, head, query and key.
    """
    trace = trace_of(text)
    tiles = _shrink(trace.weights, MAX_TILE)  # (layer, head, side, side)
    num_layers, num_heads, side = tiles.shape[0], tiles.shape[1], tiles.shape[2]
    cell = side + 1  # one blank row/column between tiles
    heat = _tiles_heatmap(tiles, step=-(-trace.num_tokens // side))
    centres = [i * cell + (side - 1) / 2 for i in range(max(num_layers, num_heads))]
    axis = {"showgrid": False, "zeroline": False}
    layout = {
        "xaxis": {
            **axis,
            "tickvals": centres[:num_heads],
            "ticktext": [str(h + 1) for h in range(num_heads)],
            "title": {"text": "head"},
            "side": "top",
        },
        "yaxis": {
            **axis,
            "tickvals": centres[:num_layers],
            "ticktext": [str(i + 1) for i in range(num_layers)],
            "title": {"text": "layer"},
            "autorange": "reversed",
            "scaleanchor": "x",
        },
        # The frame around the chosen head's tile.
        "shapes": [
            {
                "type": "rect",
                "x0": head * cell - 0.9,
                "x1": head * cell + side - 0.1,
                "y0": layer * cell - 0.9,
                "y1": layer * cell + side - 0.1,
                "line": {"color": QUERY_COLOR, "width": 3},
            }
        ],
        # Square tiles, twice as many heads as layers: about 400 px of map at the page's width.
        "height": int((80 + 60 * num_layers) * (1.3 if is_presenting() else 1)),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "font": {"size": theme.font_size()},
        "plot_bgcolor": "white",
    }
    summary = (
        f"Model view: the attention pattern of every head, {num_layers} layers (rows) × "
        f"{num_heads} heads (columns), for {trace.num_tokens} tokens; layer {layer + 1}, head "
        f"{head + 1} is framed. Select a tile to open that head."
    )
    table = describe.matrix_table(
        trace.weights[layer, head],
        describe.MatrixAxes(trace.tokens, trace.tokens),
        title=f"layer {layer + 1}, head {head + 1}",
    )
    figure = render.figure([heat, _tile_pickers(num_layers, num_heads, side)], layout)
    return describe.attach(figure, summary, table)


def _tiles_heatmap(tiles: np.ndarray, step: int) -> dict:
    """The `(layer, head, side, side)` tiles laid out in one grid with blank lines between, each
    cell's hover saying its layer, head, query and key (or the block they start)."""
    num_layers, num_heads, side = tiles.shape[0], tiles.shape[1], tiles.shape[2]
    cell = side + 1
    z = np.full((num_layers * cell - 1, num_heads * cell - 1), np.nan, dtype=np.float32)
    info = np.zeros((*z.shape, 4), dtype=np.int32)
    grid = np.arange(side)
    for l_index in range(num_layers):
        for h_index in range(num_heads):
            r0, c0 = l_index * cell, h_index * cell
            z[r0 : r0 + side, c0 : c0 + side] = tiles[l_index, h_index]
            info[r0 : r0 + side, c0 : c0 + side, 0] = l_index + 1
            info[r0 : r0 + side, c0 : c0 + side, 1] = h_index + 1
            info[r0 : r0 + side, c0 : c0 + side, 2] = grid[:, None] * step + 1
            info[r0 : r0 + side, c0 : c0 + side, 3] = grid[None, :] * step + 1
    what = "query %{customdata[2]} → key %{customdata[3]}"
    if step > 1:
        what = f"queries from %{{customdata[2]}}, keys from %{{customdata[3]}} ({step}×{step} mean)"
    return {
        "type": "heatmap",
        "z": z,
        "customdata": info,
        "zmin": 0.0,
        "zmax": 1.0,
        "colorscale": theme.WEIGHT_COLORS,
        "colorbar": {"thickness": 12, "len": 0.9, "title": {"text": "weight"}},
        "hovertemplate": "layer %{customdata[0]}, head %{customdata[1]}<br>"
        + f"{what}: %{{z:.3f}}<extra></extra>",
        "hoverongaps": False,
    }


def _tile_pickers(num_layers: int, num_heads: int, side: int) -> dict:
    """Plotly reports no click on a heatmap, so an invisible marker over each tile's centre
    catches the click that picks the head (see show_model_view)."""
    cell = side + 1
    layers_at, heads_at = np.meshgrid(np.arange(num_layers), np.arange(num_heads), indexing="ij")
    return {
        "type": "scatter",
        "name": "pick a head",
        "x": (heads_at * cell + (side - 1) / 2).ravel(),
        "y": (layers_at * cell + (side - 1) / 2).ravel(),
        "mode": "markers",
        "marker": {"symbol": "square", "size": 36, "opacity": 0},
        "customdata": np.stack([layers_at.ravel() + 1, heads_at.ravel() + 1], axis=1),
        "hovertemplate": "layer %{customdata[0]}, head %{customdata[1]}: click to zoom"
        "<extra></extra>",
        "showlegend": False,
    }


def show_model_view(view: PageState, trace: PageTrace, layer: int, head: int) -> None:
    """The model view, drawn so that clicking a tile picks its layer and head."""
    key = view.key("model_view")
    cell = tile_cell(trace.num_tokens)

    def pick() -> None:
        event = st.session_state.get(key) or {}
        points = (event.get("selection") or {}).get("points") or []
        if not points:
            return
        tile = tile_at(points[0].get("x", -1), points[0].get("y", -1), cell)
        if tile is not None and tile[0] < trace.num_layers and tile[1] < trace.num_heads:
            view.set("layer", tile[0] + 1)
            view.set("head", tile[1] + 1)

    render.show(
        render.cached(model_view_figure, trace.text, layer, head),
        filename="bert-model-view",
        key=key,
        on_select=pick,
        selection_mode="points",
    )


@st.fragment
def compare_heads(view: PageState, trace: PageTrace, layer: int, head: int) -> None:
    """Head (`layer`, `head`), from 0, the page's choice, as A; any other head of any layer as B."""
    box = compare.opened(view, label="Compare with another head or layer")
    if box is not None:
        with box:
            layers, heads = range(1, trace.num_layers + 1), range(1, trace.num_heads + 1)
            first, second = st.columns(2)
            layer_b = first.select_slider(
                "Layer B", list(layers), key=view.int_key("cmp_layer", 1, lo=1, hi=layers[-1])
            )
            head_b = second.select_slider(
                "Head B", list(heads), key=view.int_key("cmp_head", 1, lo=1, hi=heads[-1])
            )
            st.caption(f"A is the head chosen above: layer {layer + 1}, head {head + 1}.")
            compare.show(
                trace.weights[layer, head],
                trace.weights[layer_b - 1, head_b - 1],
                names=(f"layer {layer + 1} head {head + 1}", f"layer {layer_b} head {head_b}"),
                query_labels=trace.labels(),
                key_labels=trace.labels(),
                filename=f"bert-compare-l{layer + 1}-h{head + 1}-l{layer_b}-h{head_b}",
            )
    write_url_after_fragment(view)


def averages_figure(text: str, layer: int) -> go.Figure:
    """The mean over heads of each layer, as small multiples; `layer` (from 0) in bold."""
    trace = trace_of(text)
    labels = trace.labels()
    averages = head_average(trace.weights)  # (layer, q_pos, k_pos)
    if trace.num_tokens > MAX_AVERAGE_SIDE:
        averages = _shrink(averages, MAX_AVERAGE_SIDE)
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


def roles_figure(text: str) -> go.Figure:
    """Every head's label and the score behind it: layer per row, head per column, coloured by
    label."""
    trace = trace_of(text)
    patterns = trace.patterns
    scores = patterns.label_score()  # (layer, head)
    names = list(PATTERN_TITLES)
    index = np.vectorize(names.index)(patterns.labels)  # (layer, head) category numbers
    count = len(names)
    # A stepped colour scale: category c fills [c, c + 1) / count with one flat colour.
    colorscale = []
    for c, name in enumerate(names):
        colorscale += [[c / count, PATTERN_COLORS[name]], [(c + 1) / count, PATTERN_COLORS[name]]]
    text_cells = [
        [f"{ROLE_TITLES[str(patterns.labels[i, j])]}<br>{scores[i, j]:.2f}" for j in
         range(trace.num_heads)]
        for i in range(trace.num_layers)
    ]  # fmt: skip
    heat: dict[str, Any] = {
        "type": "heatmap",
        "z": index + 0.5,
        "zmin": 0,
        "zmax": count,
        "colorscale": colorscale,
        "showscale": False,
        "text": text_cells,
        "texttemplate": "%{text}",
        "textfont": {"size": max(9, theme.font_size() - 2), "color": "#111"},
        "xgap": 2,
        "ygap": 2,
        "hovertemplate": "layer %{y}, head %{x}: %{text}<extra></extra>",
        "x": np.arange(1, trace.num_heads + 1),
        "y": np.arange(1, trace.num_layers + 1),
    }
    axis = {"dtick": 1, "showgrid": False, "zeroline": False}
    layout = {
        "xaxis": {**axis, "title": {"text": "head"}, "side": "top"},
        "yaxis": {**axis, "title": {"text": "layer"}, "autorange": "reversed"},
        "height": int((90 + 52 * trace.num_layers) * (1.4 if is_presenting() else 1)),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "font": {"size": theme.font_size()},
        "plot_bgcolor": "white",
    }
    roles = [str(label) for label in patterns.labels.ravel()]
    counts = "; ".join(f"{ROLE_TITLES[name]}: {roles.count(name)}" for name in dict.fromkeys(roles))
    summary = (
        f"The role of each of the {trace.num_layers} × {trace.num_heads} heads (layer per row, "
        f"head per column), written in its cell with its score; heads per role: {counts}."
    )
    table = describe.ChartTable(
        values=np.asarray([[describe.plain(c) for c in row] for row in text_cells], dtype=object),
        rows=tuple(f"layer {i + 1}" for i in range(trace.num_layers)),
        columns=tuple(f"head {j + 1}" for j in range(trace.num_heads)),
        row_title="layer",
    )
    return describe.attach(render.figure([heat], layout), summary, table)
