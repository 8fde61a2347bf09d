"""The "why a head attends there" page's figures. Each builder takes a `HeadReading`
(``ui.attends.data``'s result, passed to `render.cached` with its digest, `render.digested`) and
plain choices: built once per view for every viewer of the link, never running a model.

Sources are named as ``models.score_sources`` names them; tokens as the page labels them
(position and text, ``labels``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_core.models.score_reading import HeadReading
from ui.widgets import describe, heatmaps
from ui.widgets.render import figure
from ui.widgets.theme import BAR_COLOR, CHOSEN_COLOR, font_size
from ui.widgets.tokens import labels, token_label  # noqa: F401 (read here by the page)

# A chart of sources shows this many, the largest in size, and the rest summed.
SHOWN_SOURCES = 10
OTHERS = "all other sources"


def largest(values: np.ndarray, names: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The SHOWN_SOURCES values largest in size, largest first, and the others' sum."""
    order = np.argsort(-np.abs(values), kind="stable")
    shown = order[:SHOWN_SOURCES]
    picked = [names[i] for i in shown]
    sums = list(values[shown])
    if len(order) > SHOWN_SOURCES:
        picked.append(OTHERS)
        sums.append(float(values[order[SHOWN_SOURCES:]].sum()))
    return picked, np.asarray(sums, dtype=np.float64)


def side_figure(reading: HeadReading, side: str, key: int) -> go.Figure:
    """What each source wrote at the key (`side` "key") or at the query ("query") added to the
    key's score, above the visible keys' average: horizontal bars, the largest first."""
    above = reading.key_above if side == "key" else reading.query_above
    position = key if side == "key" else reading.query
    names, values = largest(above[:, key], reading.names)
    title = f"Written at the {side}, token {position + 1}"
    traces = [
        {"type": "bar", "orientation": "h", "y": names[::-1], "x": values[::-1],
         "marker": {"color": [CHOSEN_COLOR if v < 0 else BAR_COLOR for v in values[::-1]]},
         "hovertemplate": "%{y}: %{x:+.3f}<extra></extra>"},
    ]  # fmt: skip
    layout = {
        "title": {"text": title, "font": {"size": font_size() + 3}},
        "xaxis": {"title": {"text": "vs the average key"}, "zeroline": True},
        "yaxis": {"type": "category", "automargin": True},
        "height": 120 + 28 * len(names),
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
        "font": {"size": font_size()},
        "showlegend": False,
    }
    summary = (
        f"{title}: of the {reading.key_above.shape[0]} sources, {names[0]} adds the most, "
        f"{values[0]:+.2f}; together they set this key {above[:, key].sum():+.2f} apart from "
        "the average key."
    )
    table = describe.ChartTable(
        values[:, None], tuple(names), ("above the average key",), "source", title
    )
    return describe.attach(figure(traces, layout), summary, table)


def bands_figure(reading: HeadReading, tokens: Sequence[str]) -> go.Figure:
    """The scores over RoPE's frequency bands, fastest first, above the average key, at every
    key the query sees."""
    seen = np.flatnonzero(reading.visible)
    count = reading.bands.shape[0]
    rows = [f"band {b + 1}" + (" (fastest)" if b == 0 else " (slowest)" if b == count - 1 else "")
            for b in range(count)]  # fmt: skip
    return heatmaps.heatmap(
        reading.bands[:, seen],
        row_labels=rows,
        col_labels=[tokens[j] for j in seen],
        kind="scores",
        title="Each RoPE band's part of each score",
        row_title="RoPE band",
        col_title="key",
        annotate=len(seen) <= 16,
    )


def rotation_figure(reading: HeadReading, tokens: Sequence[str]) -> go.Figure:
    """Every visible key's score, and the same q and k met without the rotation."""
    seen = np.flatnonzero(reading.visible)
    return heatmaps.heatmap(
        np.stack([reading.scores[seen], reading.content[seen]]),
        row_labels=["with the rotation (the model's)", "without it (content alone)"],
        col_labels=[tokens[j] for j in seen],
        kind="scores",
        title="Each score with and without RoPE",
        row_title="score",
        col_title="key",
        annotate=len(seen) <= 16,
    )


def pattern_figure(reading: HeadReading, tokens: Sequence[str]) -> go.Figure:
    """The whole pattern's map: for the largest sources, what they wrote at each key after the
    first (where heads park spare weight, whose column would drown the others' colours),
    summed over the queries that attend, weighted by their attention."""
    order = np.argsort(-np.abs(reading.pattern_totals), kind="stable")[:SHOWN_SOURCES]
    return heatmaps.heatmap(
        reading.pattern_map[order, 1:],
        row_labels=[reading.names[i] for i in order],
        col_labels=list(tokens[1:]),
        kind="scores",
        title=f"Sources × keys, over {len(reading.pattern_queries)} queries",
        row_title="source",
        col_title="key",
        annotate=len(tokens) <= 16,
        height=140 + 34 * len(order),
    )
