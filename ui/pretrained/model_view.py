"""The pretrained page's model view: every head at once, a small weights map per head, and the
click on a map that opens its head.

Like every builder of the page, `model_view_figure` takes the trace, passed to `render.cached`
with its digest for the key (`render.digested`): a few hundred bytes to hash, not its arrays.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from ui.models.minilm import PageTrace
from ui.pretrained.figures import shrink
from ui.widgets import describe, heatmaps, render, theme
from ui.widgets.state import PageState, is_presenting

# Each small map of the model view is at most this many cells a side (longer texts are averaged
# over blocks of tokens), so the 72 maps stay one light image.
MAX_TILE = 24


def tile_cell(num_tokens: int) -> int:
    """Rows (and columns) per layer (and head) in the model view: a tile and one blank line."""
    return -(-num_tokens // -(-num_tokens // MAX_TILE)) + 1


def tile_at(x: float, y: float, cell: int) -> tuple[int, int] | None:
    """The (layer, head), from 0, of the model-view cell at column `x`, row `y`; None in a gap."""
    column, row = round(x), round(y)
    if column < 0 or row < 0 or column % cell == cell - 1 or row % cell == cell - 1:
        return None
    return row // cell, column // cell


def model_view_figure(trace: PageTrace, layer: int, head: int) -> go.Figure:
    """All heads at once: layer per row, head per column, each a small weights map, as one
    heatmap of the tiles side by side (72 separate plots would take seconds to draw).

    Head (`layer`, `head`), from 0, is framed. Hover says the layer, head, query and key.
    """
    tiles = shrink(trace.weights, MAX_TILE)  # (layer, head, side, side)
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
                "line": {"color": theme.CHOSEN_COLOR, "width": 3},
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
    scale = heatmaps.color_scale("weights").trace()
    what = "query %{customdata[2]} → key %{customdata[3]}"
    if step > 1:
        what = f"queries from %{{customdata[2]}}, keys from %{{customdata[3]}} ({step}×{step} mean)"
    return {
        "type": "heatmap",
        "z": z,
        "customdata": info,
        **scale,
        "colorbar": {**scale["colorbar"], "title": {"text": "weight"}},
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
        render.cached(model_view_figure, render.digested(trace.digest, trace), layer, head),
        filename="bert-model-view",
        key=key,
        on_select=pick,
        selection_mode="points",
    )
