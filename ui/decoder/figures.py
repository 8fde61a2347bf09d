"""The decoder page's figures: one head's causal triangle, a layer's heads grouped by KV head, the
first-token (sink) shares, RoPE's effect on the last token's scores, and (for a model that
learned its positions, GPT-2) how alike its position vectors are.

Each builder takes the page's trace (`ui.decoder.generation.continuation`), passed to
`render.cached` with its digest for the key (`render.digested`), and the view's layer and head:
a figure is built once per distinct view for every viewer, and never runs the model.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attention_core.masks import causal_mask, sliding_window_mask
from attention_core.models.llama.choices import HeadChoices
from ui.decoder.trace import PageTrace, labels
from ui.widgets import heatmaps, lines

# A layer's heads a row of the grid when none share their keys and values (multi-head attention).
MHA_COLUMNS = 4


def _kv_head(trace: PageTrace, head: int) -> str:
    """The title's note of the KV head a head shares ("" when every head has its own)."""
    return f" (KV head {head // trace.group_size + 1})" if trace.group_size > 1 else ""


def head_figure(trace: PageTrace, layer: int, head: int, window: int | None = None) -> go.Figure:
    """One head's weights `(n, n)`: the causal triangle, the future masked grey (and, in a
    local layer, every key more than ``window`` - 1 tokens back)."""
    n = trace.weights.shape[-1]
    names = labels(trace.tokens)
    blocked = ~causal_mask(n) if window is None else ~sliding_window_mask(n, window)
    local = "" if window is None else f" · local: the last {window} tokens"
    return heatmaps.heatmap(
        trace.weights[layer, head],
        row_labels=names,
        col_labels=names,
        blocked=blocked,
        title=f"Layer {layer + 1}, head {head + 1}{_kv_head(trace, head)}{local}",
        annotate=n <= 12,
    )


def layer_grid_figure(trace: PageTrace, layer: int, head: int) -> go.Figure:
    """Every head of `layer`, one row per KV head (MHA_COLUMNS a row when no head shares its
    keys and values), with `head` framed."""
    names = labels(trace.tokens)
    g, heads = trace.group_size, trace.weights.shape[1]
    if g > 1:
        titles = [f"KV {h // g + 1} · head {h + 1}" for h in range(heads)]
    else:
        titles = [f"head {h + 1}" for h in range(heads)]
    return heatmaps.heatmap_grid(
        trace.weights[layer],
        titles=titles,
        row_labels=names,
        col_labels=names,
        # One row of the grid per KV head: the heads that share its keys and values.
        columns=g if g > 1 else min(heads, MHA_COLUMNS),
        highlight=head,
    )


def sink_figure(trace: PageTrace) -> go.Figure:
    """The first token's share of attention `(layer, head)`, every layer and head at once."""
    layers, heads = trace.sink.shape
    return heatmaps.heatmap(
        trace.sink,
        row_labels=[f"layer {i + 1}" for i in range(layers)],
        col_labels=[f"h{h + 1}" for h in range(heads)],
        row_title="layer",
        col_title="head",
        title="Share of attention on the first token",
        annotate=False,
        height=620,
    )


def rope_figure(shown: HeadChoices, layer: int, head: int) -> go.Figure:
    """The last token's q·k · scale with every earlier key, by offset, with and without RoPE
    (after QK-norm where the family has it, before any soft cap)."""
    q = shown.q if shown.q_normed is None else shown.q_normed
    k = shown.k if shown.k_normed is None else shown.k_normed
    offsets = np.arange(k.shape[0])[::-1]  # key j sits n-1-j tokens back
    return lines.line_plot(
        offsets,
        {
            "with RoPE (what the model computes)": shown.raw,
            "without RoPE (same q and k, unrotated)": k @ q * shown.scale,
        },
        x_title="offset: how many tokens back the key is",
        y_title="q·k · scale",
        title=f"Layer {layer + 1}, head {head + 1}: the last token's scores",
        dashed=("without RoPE (same q and k, unrotated)",),
        markers=True,
    )


def position_figure(table: np.ndarray, tokens: tuple[str, ...]) -> go.Figure:
    """How alike the learned position vectors of the text's positions are: `table` `(n,
    d_model)`, row p the vector added to the token at position p; S[p, p'] = P_p · P_p'."""
    return heatmaps.similarity_heatmap(
        table, labels(tokens), "Learned position vectors: P_p · P_p′", annotate=len(tokens) <= 12
    )
