"""The pretrained page's head view: lines from each query token to the keys it weighs, BertViz
style, the chosen query's drawn on top.

Like every builder of the page it takes the trace, passed to `render.cached` with its digest for
the key (`render.digested`), so the key is a few hundred bytes to hash, not the trace's arrays.
"""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go

from ui.models.minilm import PageTrace
from ui.widgets import describe, render, theme
from ui.widgets.state import is_presenting

# The head view draws n² lines: past this many tokens only the chosen query's lines are drawn.
MAX_ALL_LINES_TOKENS = 48
MAX_HEAD_VIEW_TOKENS = 160
# Lines with less weight than this are not drawn (they would be invisible anyway).
MIN_LINE_WEIGHT = 0.01
LINE_LEVELS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0001)
# The token columns are drawn inside the plot, a third of its width each: at presenter mode's
# type in a laptop's half-width column, or at a phone's width, a third holds about 18
# characters (MiniLM's longest token, "telecommunications"). A longer token is written to its
# first 17 and "…"; its whole text is in the hover and the chart's table.
TOKEN_SIDE = 1.0
MAX_TOKEN_CHARS = 18


def head_view_figure(
    trace: PageTrace, layer: int, head: int, query: int, only_query: bool
) -> go.Figure:
    """Lines from each query token (left) to each key token (right), BertViz style.

    A line's width and opacity grow with its weight; lines under MIN_LINE_WEIGHT are left out.
    `query` (from 0) is drawn on top in red and its token is bold; with `only_query` the other
    queries' lines are left out. Each line trace is named "query" or "others" with its weight
    band, e.g. "query 0.50-0.70".
    """
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
                        "color": theme.CHOSEN_COLOR if emphasised else theme.OTHER_LINES_COLOR,
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
                    f"<b>{written(t)}</b>" if (side == "query" and i == query) else written(t)
                    for i, t in enumerate(tokens)
                ],
                "textposition": f"middle {position}",
                "textfont": {"size": theme.font_size()},
                "hovertext": [f"{side} {i + 1} “{t}”" for i, t in enumerate(tokens)],
                # The keys' hover is the chosen query's weight on each (`_query_weights_hover`).
                "hoverinfo": "text" if side == "query" else "skip",
                "showlegend": False,
            }
        )
    return columns


def written(token: str) -> str:
    """`token` as its column writes it: at most MAX_TOKEN_CHARS characters."""
    return token if len(token) <= MAX_TOKEN_CHARS else token[: MAX_TOKEN_CHARS - 1] + "…"


def _head_view_layout(n: int) -> dict:
    per_token = 30 if is_presenting() else 22
    return {
        "height": int(min(3600, max(260, 90 + per_token * n))),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "font": {"size": theme.font_size()},
        "xaxis": {"visible": False, "range": [-TOKEN_SIDE, 1 + TOKEN_SIDE], "fixedrange": True},
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
