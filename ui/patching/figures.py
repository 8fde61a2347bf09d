"""The patching page's figures. Each builder takes what it draws (a map of restored shares, the
two passes' attention patterns: ``ui.patching.data``'s results, passed to ``render.cached``
with their digest for the key) and the view's plain settings, so a figure is built once per
distinct view for every viewer and never runs the model. Restored shares use the diverging
scale: a patch can restore less than nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ui.patching.inputs import shown
from ui.widgets import heatmaps


def position_labels(clean: Sequence[str], corrupt: Sequence[str]) -> list[str]:
    """Tick labels: position, and the token (clean → corrupted where the prompts differ)."""
    return [
        f"{i + 1} {shown(a)}" if a == b else f"{i + 1} {shown(a)}→{shown(b)}"
        for i, (a, b) in enumerate(zip(clean, corrupt, strict=True))
    ]


def row_labels(kind: str, rows: int) -> list[str]:
    """A stream map's rows: boundaries (the embedding, then after each layer) or layers."""
    if kind == "resid":
        return ["embedding", *(f"after layer {i}" for i in range(1, rows))]
    return [f"layer {i + 1}" for i in range(rows)]


def stream_figure(shares: np.ndarray, rows: Sequence[str], columns: Sequence[str],
                  title: str) -> go.Figure:  # fmt: skip
    """Restored share `(rows, n)`: one corrupted pass per cell, its point patched there."""
    return _restored(shares, rows, columns, title, ("where the patch goes in", "position patched"))


def head_figure(shares: np.ndarray, title: str) -> go.Figure:
    """Restored share `(layer, head)`: one corrupted pass per head, its output patched."""
    layers, heads = shares.shape
    rows = [f"layer {i + 1}" for i in range(layers)]
    return _restored(shares, rows, [f"h{h + 1}" for h in range(heads)], title, ("layer", "head"))


def _restored(shares: np.ndarray, rows: Sequence[str], columns: Sequence[str], title: str,
              axes: tuple[str, str]) -> go.Figure:  # fmt: skip
    # Diverging around 0: a patch can restore less than nothing, or more than all.
    return heatmaps.heatmap(shares, row_labels=rows, col_labels=columns, kind="scores",
                            title=title, row_title=axes[0], col_title=axes[1], annotate=False,
                            decimals=2, height=640)  # fmt: skip


def head_attention_figure(weights: np.ndarray, labels: Sequence[str], title: str) -> go.Figure:
    """One head's weights `(n, n)` on one prompt: rows are queries, columns keys, the future
    masked."""
    n = weights.shape[-1]
    return heatmaps.heatmap(
        weights,
        row_labels=labels,
        col_labels=labels,
        blocked=np.triu(np.ones((n, n), dtype=bool), k=1),
        title=title,
        annotate=False,
        decimals=2,
    )
