"""The heads page's figures. Each builder takes what it draws (a prompt's readout, a logit's
split by writer, a probe's roles, the causal check, the four measures: `ui.heads.data`'s
results, passed to `render.cached` with their digest for the key, `render.digested`) and the
view's plain settings, so a figure is built once per distinct view for every viewer and never
runs the model.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attention_core.logit_lens import LogitAttribution
from ui.heads import data
from ui.widgets import describe, heatmaps, lines
from ui.widgets.tokens import labels, token_label  # noqa: F401 (read here by the page)


def stage_labels(count: int) -> list[str]:
    return ["embedding", *(f"layer {i}" for i in range(1, count))]


def lens_figure(
    readout: data.PromptReadout, token: int, versus: int | None, names: tuple[str, ...]
) -> go.Figure:
    """P(token) (and P(versus)) read from the stream after the embedding and each layer."""
    lens, position = readout.lens, readout.position
    stages = np.arange(lens.logits.shape[0])
    series = {f"P({names[0]})": lens.probability(token)}
    if versus is not None:
        series[f"P({names[1]})"] = lens.probability(versus)
    return lines.line_plot(
        stages,
        series,
        x_title="after layer (0 = the embedding)",
        y_title="probability of the next token",
        title=f"When does {names[0]} appear? The logit lens at token {position + 1}",
        markers=True,
    )


def attribution_figure(split: LogitAttribution, title: str) -> go.Figure:
    """Each head's and each MLP's share of the logit (difference): layers × (heads, MLP)."""
    layers, heads = split.heads.shape
    values = np.column_stack([split.heads, split.mlps])  # (layer, head + 1)
    return heatmaps.heatmap(
        values,
        row_labels=[f"layer {i + 1}" for i in range(layers)],
        col_labels=[*(f"h{h + 1}" for h in range(heads)), "MLP"],
        kind="scores",
        title=title,
        row_title="layer",
        col_title="writer",
        annotate=False,
        height=640,
        decimals=3,
    )


def head_pattern_figure(readout: data.PromptReadout, layer: int, head: int) -> go.Figure:
    """Head (layer, head)'s weights over the prompt: the causal triangle."""
    names = labels(readout.tokens)
    n = len(names)
    return heatmaps.heatmap(
        readout.weights[layer, head],
        row_labels=names,
        col_labels=names,
        blocked=np.triu(np.ones((n, n), dtype=bool), k=1),  # the future is masked
        title=f"Layer {layer + 1}, head {head + 1} on the prompt",
        annotate=n <= 12,
    )


ROLE_TITLES = {
    "previous": "previous token",
    "induction": "induction",
    "duplicate": "duplicate token",
    "first": "first token (sink)",
}


def roles_figure(probe: data.ProbeRoles) -> go.Figure:
    """Every head's score for each role on the probe: one layers × heads map per role."""
    roles = probe.roles
    layers, heads = roles.previous.shape
    return heatmaps.heatmap_grid(
        np.stack([roles.score(role) for role in ROLE_TITLES]),
        titles=list(ROLE_TITLES.values()),
        row_labels=[f"layer {i + 1}" for i in range(layers)],
        col_labels=[f"h{h + 1}" for h in range(heads)],
        columns=4,
        row_title="layer",
        col_title="head",
    )


def probe_head_figure(probe: data.ProbeRoles, kind: str, layer: int, head: int) -> go.Figure:
    """Head (layer, head)'s weights on the probe (read by model `kind`): an induction head draws
    a stripe one period back, one step right of the diagonal."""
    names = labels(probe.tokens)
    n = len(names)
    blocked = np.triu(np.ones((n, n), dtype=bool), k=1) if kind != "minilm" else None
    return heatmaps.heatmap(
        probe.weights[layer, head],
        row_labels=names,
        col_labels=names,
        blocked=blocked,
        title=f"Layer {layer + 1}, head {head + 1} on the probe",
        annotate=False,
    )


def causal_figure(check: data.CausalCheck) -> go.Figure:
    """Loss on the repeated half as the top-k induction heads, or k random heads, are removed."""
    k = np.arange(check.ablated.size)
    return lines.line_plot(
        k,
        {"top-k induction heads removed": check.ablated, "k random heads removed": check.random},
        x_title="heads removed (k)",
        y_title="loss on the repeated half (nats)",
        title="Remove the induction heads and the repeat is no longer predicted",
        dashed=("k random heads removed",),
        markers=True,
    )


def explanation_figure(found: data.Explanation, layer: int) -> go.Figure:
    """The four measures over the keys, each as its share of its own total (one row each), for
    `found.query` in `layer`."""
    query = found.query
    rows = np.stack([found.measures[name] for name in data.MEASURES])
    totals = rows.sum(axis=-1, keepdims=True)
    shares = np.divide(rows, totals, out=np.zeros_like(rows), where=totals > 0)
    figure = heatmaps.heatmap(
        shares,
        row_labels=list(data.MEASURES.values()),
        col_labels=labels(found.tokens),
        title=f"Where token {query + 1}'s vector comes from, by four measures (layer {layer + 1})",
        row_title="measure",
        col_title="key",
        decimals=2,
        height=330,
    )
    return figure


def correlation_table(found: data.Explanation) -> describe.ChartTable:
    names = tuple(data.MEASURES.values())
    return describe.ChartTable(found.correlations, names, names, row_title="Spearman's ρ")


def file_part(name: str) -> str:
    """A model's name as part of a download's file name (a Hub id's "/" would make a folder)."""
    return name.replace("/", "-")
