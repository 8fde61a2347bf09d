"""The probe page's figures: rollout, the joint query-key map and the ablation's before, after
and difference.

Each builder takes what it draws (the model's trace, rollout, a head's projection, an
ablation), passed to `render.cached` with their digests for the key (`render.digested`: a few
hundred bytes to hash, not the arrays), and the view's plain settings; it never runs the model.
A `trace` is the page's `PageTrace` of the text (ui.models.minilm, not imported: figures never
reach the model).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from attention_core.models.hiding import Ablation
from attention_core.probing import QueryKeyProjection, Rollout
from ui.widgets import heatmaps, theme
from ui.widgets.state import is_presenting

# -- rollout figures ----------------------------------------------------------------------------


def rollout_figure(trace: Any, rollout: Rollout) -> go.Figure:
    """R_L as a heatmap: row i, how much of position i's top vector traces to each input."""
    return heatmaps.heatmap(
        rollout.rollout,
        row_labels=trace.labels(),
        col_labels=trace.labels(),
        kind="weights",
        title=f"Rollout through all {trace.num_layers} layers",
        row_title="query (top layer)",
        col_title="key (input token)",
        height=None if trace.num_tokens <= 24 else 720,
    )


def token_rollout_figure(trace: Any, rollout: Rollout, token: int) -> go.Figure:
    """One token's rollout row after each layer, and the last layer's own attention beneath."""
    rows = np.vstack([rollout.cumulative[:, token], rollout.head_mean[-1, token][None]])
    labels = [f"rollout to layer {layer + 1}" for layer in range(trace.num_layers)]
    labels.append(f"layer {trace.num_layers} attention alone")
    return heatmaps.heatmap(
        rows,
        row_labels=labels,
        col_labels=trace.labels(),
        kind="weights",
        title=f"Token {token + 1} “{trace.tokens[token]}”, layer by layer",
        row_title="layer",
        col_title="key (input token)",
        # Seven rows of numbers in half the page overlap past a few tokens; hover keeps them.
        annotate=trace.num_tokens <= 8,
    )


# -- the joint query-key map --------------------------------------------------------------------


def query_key_map_figure(
    trace: Any, projection: QueryKeyProjection, layer: int, head: int, pairs: int
) -> go.Figure:
    """Queries (circles) and keys (diamonds) of head (`layer`, `head`) in one PCA plane
    (`projection`), each labelled with its token, and a line for each of the `pairs` heaviest
    query→key weights of the head."""
    w = trace.weights[layer, head]  # (q_pos, k_pos)
    tokens = trace.labels()
    n = len(tokens)
    heaviest = np.argsort(w, axis=None)[::-1][:pairs]
    qi, kj = np.unravel_index(heaviest, w.shape)
    qxy, kxy = projection.query_xy, projection.key_xy
    lines = {
        "type": "scatter",
        "x": np.column_stack([qxy[qi, 0], kxy[kj, 0], np.full(qi.size, np.nan)]).ravel(),
        "y": np.column_stack([qxy[qi, 1], kxy[kj, 1], np.full(qi.size, np.nan)]).ravel(),
        "mode": "lines",
        "line": {"color": theme.OTHER_LINES_COLOR, "width": 1},
        "opacity": 0.6,
        "name": f"{qi.size} heaviest weights",
        "hoverinfo": "skip",
    }
    size = 14 if is_presenting() else 10

    def points(xy: np.ndarray, role: str, name: str, symbol: str, color: str) -> dict:
        return {
            "type": "scatter",
            "x": xy[:, 0],
            "y": xy[:, 1],
            "mode": "markers+text",
            "name": name,
            "text": tokens,
            "textposition": "top center",
            "marker": {"symbol": symbol, "size": size, "color": color, "opacity": 0.85},
            "hovertext": [f"{role} {i + 1} “{tokens[i]}”" for i in range(n)],
            "hoverinfo": "text",
        }

    explained = projection.explained
    layout = {
        "title": {
            "text": f"Layer {layer + 1}, head {head + 1}: queries and keys in one plane",
            "font": {"size": theme.font_size() + 3},
        },
        "height": 560,
        "font": {"size": theme.font_size()},
        "xaxis": {"title": {"text": f"PC 1 ({explained[0]:.0%} of the variance)"}},
        "yaxis": {
            "title": {"text": f"PC 2 ({explained[1]:.0%})"},
            "scaleanchor": "x",
            "scaleratio": 1,
        },
        "legend": {"orientation": "h", "y": -0.15},
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
    }
    data = [
        lines,
        points(qxy, "query", "queries", "circle", theme.QUERY_POINT_COLOR),
        points(kxy, "key", "keys", "diamond", theme.KEY_POINT_COLOR),
    ]
    return go.Figure({"data": data, "layout": layout}, _validate=False)


# -- ablation figures ---------------------------------------------------------------------------


def ablation_figure(ablation: Ablation, layer: int, head: int, which: str) -> go.Figure:
    """Head (`layer`, `head`) before, after, or their difference (`which`), on the positions
    that exist in both texts (a removed token has no row or column after)."""
    mode, position = ablation.mode, ablation.position
    kept = [i for i in range(len(ablation.tokens)) if mode != "remove" or i != position]
    ix = np.ix_(kept, kept)
    # A replaced token's row and column say both words: "tired→wide".
    before_labels = [
        f"{ablation.tokens[i]}→{ablation.tokens_after[i]}"
        if mode == "replace" and i == position
        else ablation.tokens[i]
        for i in kept
    ]
    after_labels = list(ablation.tokens_after)
    options = {
        "before": (
            ablation.weights_before[layer, head],
            list(ablation.tokens),
            "Before",
            "weights",
        ),
        "after": (ablation.weights_after[layer, head][ix], after_labels, "After", "weights"),
        "difference": (
            ablation.difference[layer, head][ix],
            before_labels,
            "After − before",
            "scores",
        ),
    }
    values, labels, title, kind = options[which]
    if ablation.head is not None:
        title += f" removing layer {ablation.head[0] + 1}, head {ablation.head[1] + 1}"
    return heatmaps.heatmap(
        values,
        row_labels=labels,
        col_labels=labels,
        kind=kind,
        title=f"{title}: layer {layer + 1}, head {head + 1}",
        height=None if len(labels) <= 24 else 720,
    )


def token_change_figure(ablation: Ablation) -> go.Figure:
    """How far each token's last-layer vector turned: 1 - cosine(before, after)."""
    change = np.nan_to_num(ablation.token_change, nan=0.0)
    labels = [f"{i + 1} · {t}" for i, t in enumerate(ablation.tokens)]
    colors = [
        theme.CHOSEN_COLOR if i == ablation.position else theme.BAR_COLOR
        for i in range(len(labels))
    ]
    data = [
        {
            "type": "bar",
            "x": labels,
            "y": change,
            "marker": {"color": colors},
            "hovertemplate": "%{x}: 1 − cos = %{y:.4f}<extra></extra>",
        }
    ]
    layout = {
        "title": {
            "text": "How much each token's final vector turned (1 − cosine)",
            "font": {"size": theme.font_size() + 3},
        },
        "height": 320,
        "font": {"size": theme.font_size()},
        "xaxis": {"title": {"text": "token"}, "tickangle": -45},
        "yaxis": {"title": {"text": "1 − cos(before, after)"}, "rangemode": "tozero"},
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
    }
    return go.Figure({"data": data, "layout": layout}, _validate=False)
