"""The learning page's figures. Each builder takes the arrays it draws (a run's curves, a
checkpoint's patterns, a head's circuits: `ui.learning.data`'s results, passed to
`render.cached` with their digest, `render.digested`) and plain settings: built once per view
for every viewer of the link, never training or running anything.

Heads are named as TransformerLens names them, layer.head from 0; the toy vocabulary's tokens
are their ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_core.training.formation import INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD
from ui.learning.data import Curves, head_ids
from ui.widgets import describe, heatmaps, lines
from ui.widgets.render import Panels, figure
from ui.widgets.theme import BAR_COLOR, CHOSEN_COLOR, OTHER_LINES_COLOR, font_size


def head_names(n_layers: int, n_heads: int) -> list[str]:
    return [f"head {name}" for name in head_ids(n_layers, n_heads)]


def _mark(fig: go.Figure, step: int | None, text: str) -> go.Figure:
    """A dotted vertical line at `step` (the phase change), named at its top; said in the
    chart's text alternative too."""
    if step is None:
        return fig  # nothing has formed yet
    # The name sits between the plot and the title: the top margin grows by its line.
    fig.layout.margin.t += round(1.5 * font_size())
    fig.layout.shapes = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": step, "x1": step, "y0": 0, "y1": 1,
         "line": {"dash": "dot", "color": CHOSEN_COLOR, "width": 2}},
    ]  # fmt: skip
    fig.layout.annotations = [
        {"x": step, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom", "text": text,
         "showarrow": False, "font": {"color": CHOSEN_COLOR, "size": font_size()}},
    ]  # fmt: skip
    return describe.attach(fig, f"{describe.summary(fig)} Marked: {text}.", describe.table(fig))


def loss_figure(curves: Curves) -> go.Figure:
    """The held-out losses on first-seen and on repeated tokens, and the training loss, by step;
    the gap between the first two is the in-context learning."""
    fig = lines.line_plot(
        curves.steps,
        {
            "first-seen tokens": curves.first,
            "repeated tokens": curves.repeated,
            # Step 0 has no training loss yet: the held-out first-seen loss stands in.
            "training loss": np.where(np.isnan(curves.train), curves.first, curves.train),
        },
        x_title="training step",
        y_title="loss (nats)",
        title="Loss on held-out sequences",
        dashed=("training loss",),
    )
    formed = curves.formed
    return _mark(fig, formed, f"induction head at step {formed:,}" if formed is not None else "")


def scores_figure(curves: Curves, role: str) -> go.Figure:
    """One line per head of a role's score by step ("induction": prefix matching, "previous":
    previous-token), with the line a head must pass and what attention spread evenly scores."""
    steps = curves.steps
    scores = curves.induction if role == "induction" else curves.previous
    line = INDUCTION_HEAD if role == "induction" else PREVIOUS_TOKEN_HEAD
    chance = curves.chance_induction if role == "induction" else curves.chance_previous
    title = "Prefix matching (induction)" if role == "induction" else "Previous-token score"
    _, n_layers, n_heads = scores.shape
    series = dict(zip(head_names(n_layers, n_heads), scores.reshape(len(steps), -1).T, strict=True))
    reference = (f"{role} line {line}", f"chance {chance:.2f}")
    series[reference[0]] = np.full(len(steps), line)
    series[reference[1]] = np.full(len(steps), chance)
    fig = lines.line_plot(
        steps, series, x_title="training step", y_title="score (0 to 1)", title=title,
        dashed=reference,
    )  # fmt: skip
    fig.layout.yaxis.range = [0, 1]
    formed = curves.formed
    return _mark(fig, formed, f"step {formed:,}" if formed is not None else "")


def patterns_panels(
    patterns: np.ndarray, labels: Sequence[str], step: int, highlight: int | None = None
) -> Panels:
    """Every head's weights `(layer, head, n, n)` on the held-out example at `step`: small
    multiples, a layer to a row on a wide screen."""
    n_layers, n_heads = patterns.shape[:2]
    names = [f"{name} · step {step:,}" for name in head_names(n_layers, n_heads)]
    return heatmaps.heatmap_grid(
        patterns.reshape(n_layers * n_heads, *patterns.shape[2:]),
        titles=names,
        row_labels=list(labels),
        col_labels=list(labels),
        columns=min(n_heads, 4),
        highlight=highlight,
        row_title="query (token id)",
        col_title="key (token id)",
    )


def gradient_panels(
    weights: np.ndarray,
    d_weights: np.ndarray,
    d_scaled: np.ndarray,
    labels: Sequence[str],
    name: str,
) -> Panels:
    """One head's pattern P, the gradient arriving at it dP, and what passes the softmax, dS,
    `(n, n)` each: dP and dS on a scale centred on 0."""
    labels = list(labels)
    common = {"row_labels": labels, "col_labels": labels, "annotate": False,
              "row_title": "query (token id)", "col_title": "key (token id)"}  # fmt: skip
    return Panels(
        (
            heatmaps.heatmap(weights, kind="weights", title=f"{name}: weights P", **common),
            heatmaps.heatmap(d_weights, kind="scores", title="dP = ∂loss/∂P", decimals=4, **common),
            heatmaps.heatmap(
                d_scaled, kind="scores", title="dS through the softmax", decimals=4, **common
            ),
        ),
        3,
    )


def composition_figure(scores: np.ndarray, earlier: int, later: int, what: str) -> go.Figure:
    """A composition score `(earlier heads, later heads)`, on the 0..1 scale of weights."""
    rows, cols = scores.shape
    return heatmaps.heatmap(
        scores,
        row_labels=[f"{earlier}.{h}" for h in range(rows)],
        col_labels=[f"{later}.{h}" for h in range(cols)],
        kind="weights",
        title=f"{what}-composition, layer {earlier} → {later}",
        row_title=f"layer {earlier} head (writes)",
        col_title=f"layer {later} head (reads)",
        decimals=2,
    )


def circuit_figure(
    matrix: np.ndarray,
    *,
    title: str,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    row_title: str,
    col_title: str,
) -> go.Figure:
    """A circuit read over tokens or positions, on a scale centred on 0."""
    return heatmaps.heatmap(
        matrix,
        row_labels=list(row_labels),
        col_labels=list(col_labels),
        kind="scores",
        title=title,
        row_title=row_title,
        col_title=col_title,
        annotate=False,
        decimals=3,
    )


def ablation_figure(
    repeated: np.ndarray, first: np.ndarray, whole_repeated: float, whole_first: float
) -> go.Figure:
    """The held-out losses with each head removed `(layer, head)`, beside the whole model's."""
    n_layers, n_heads = repeated.shape
    names = head_ids(n_layers, n_heads)
    bars = [
        {"type": "bar", "name": "repeated tokens", "x": names, "y": repeated.ravel(),
         "marker": {"color": BAR_COLOR},
         "hovertemplate": "without head %{x}: %{y:.3f} nats on repeated tokens<extra></extra>"},
        {"type": "bar", "name": "first-seen tokens", "x": names, "y": first.ravel(),
         "marker": {"color": OTHER_LINES_COLOR},
         "hovertemplate": "without head %{x}: %{y:.3f} nats on first-seen tokens<extra></extra>"},
    ]  # fmt: skip
    layout = {
        "title": {"text": "Loss with one head removed", "font": {"size": font_size() + 3}},
        "barmode": "group",
        "xaxis": {"title": {"text": "head removed (layer.head)"}, "type": "category"},
        "yaxis": {"title": {"text": "loss (nats)"}},
        "height": 420,
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
        "font": {"size": font_size()},
        "legend": {"orientation": "h", "y": -0.25},
        "shapes": [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "y0": whole_repeated,
                "y1": whole_repeated,
                "line": {"dash": "dash", "color": CHOSEN_COLOR, "width": 2},
            },
        ],
    }
    worst = int(np.argmax(repeated))
    summary = (
        f"Loss on repeated tokens with each of {repeated.size} heads removed: highest without "
        f"head {names[worst]}, {repeated.ravel()[worst]:.3f} nats, against "
        f"{whole_repeated:.3f} with every head (dashed line); on first-seen tokens the whole "
        f"model scores {whole_first:.3f}."
    )
    table = describe.ChartTable(
        np.column_stack([repeated.ravel(), first.ravel()]),
        tuple(names),
        ("repeated tokens", "first-seen tokens"),
        "head removed",
        "Loss with one head removed",
    )
    return describe.attach(figure(bars, layout), summary, table)
