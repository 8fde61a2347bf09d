"""The long-context page's figures: each token's loss along the text, and the share of
attention the first tokens receive, layer by layer, for the three ways of reading it.

Each builder takes the text's three passes (`ui.long_context.data.three_passes`), passed to
`render.cached` with their digest for the key (`render.digested`): never the model."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.long_context import data
from ui.widgets import lines

# Per-token losses jump from token to token: the chart draws their running mean over this many.
SMOOTHING = 16


def running_mean(values: np.ndarray, width: int) -> np.ndarray:
    """`(n,)`: the mean of each value and the `width - 1` before it (fewer at the start)."""
    total = np.cumsum(np.concatenate([[0.0], values]))
    start = np.maximum(np.arange(1, values.size + 1) - width, 0)
    return (total[1:] - total[start]) / (np.arange(1, values.size + 1) - start)


def loss_figure(passes: data.ThreePasses) -> go.Figure:
    """Each variant's loss on every next token, as a running mean, along the text."""
    window, sinks = passes.window, passes.sinks
    queries = np.arange(passes.losses["full"].size)  # (n - 1,): every token but the last
    return lines.line_plot(
        queries,
        {data.TITLES[name]: running_mean(loss, SMOOTHING) for name, loss in passes.losses.items()},
        x_title="query position (the token it predicts is the next one)",
        y_title=f"loss in nats (mean of the last {SMOOTHING})",
        title=f"What each token costs to predict, window {window}, {sinks} first tokens kept",
        dashed=(data.TITLES["full"],),
    )


def share_figure(passes: data.ThreePasses) -> go.Figure:
    """Each variant's mean share of attention on the first tokens, layer by layer."""
    sinks = passes.sinks
    layers = np.arange(1, next(iter(passes.first_share.values())).size + 1)
    first = "the first token" if sinks <= 1 else f"the first {sinks} tokens"
    return lines.line_plot(
        layers,
        {data.TITLES[name]: share for name, share in passes.first_share.items()},
        x_title="layer",
        y_title=f"share of attention on {first}",
        title=f"How much attention goes to {first}, heads averaged",
        dashed=(data.TITLES["full"],),
        markers=True,
    )
