"""The "Why attention?" page's picture: an RNN's chain of steps against attention's all pairs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ui.why.counts import path_counts
from ui.widgets import describe
from ui.widgets.render import figure
from ui.widgets.state import is_presenting
from ui.widgets.theme import font_size


def rnn_vs_attention(tokens: Sequence[str]) -> go.Figure:
    """Two rows of the same tokens: an RNN's chain of steps, and attention's all-pairs links.

    The first→last connection is drawn in red in both: n−1 hops through the chain, one direct
    link in attention. Built from plain dicts (see `render.figure`); draw it through `cached`.
    """
    n = len(tokens)
    counts = path_counts(n)
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
         "text": f"<b>RNN</b>: {counts.rnn_steps} sequential steps from the first token to the "
                 "last"},
        {**caption, "y": attention_y + 0.3,
         "text": f"<b>Attention</b>: {counts.attention_steps} step for each of the "
                 f"{counts.pairs} pairs, all at once"},
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
        f"first in {counts.rnn_steps} sequential steps; attention links all {counts.pairs} "
        "pairs directly, in one step."
    )
    return describe.attach(figure(traces, layout), summary)
