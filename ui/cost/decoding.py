"""The cost page's KV-cache section: causal attention built one decoding step (one row) at a time,
checked against full causal attention on the same seeded queries, keys and values."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attention_core import causal_mask, incremental_causal_attention, scaled_dot_product_attention
from attention_core.cost import max_abs_difference
from attention_core.lessons.mask_experiments import example_qkv
from ui.widgets.byte_cache import MB, bounded_by_bytes, read_only
from ui.widgets.heatmaps import heatmap

WIDTH = 4  # d of the decoded example's queries, keys and values


# (12, 12) weights at most, 1.2 KB: a hundred settings.
@bounded_by_bytes(MB // 8, name="cost.decoding", lane=None)
def step_by_step(n_decode: int, seed: int) -> tuple[np.ndarray, float]:
    """Weights `(n, n)` built one decoding step at a time, and their outputs' largest
    difference from full causal attention on the same seeded q, k, v."""
    q, k, v = example_qkv(n_decode, WIDTH, seed)
    decoded = incremental_causal_attention(q, k, v)
    causal = scaled_dot_product_attention(q, k, v, mask=causal_mask(n_decode))
    return read_only((decoded.weights, max_abs_difference(decoded.output, causal.output)))


def weights_figure(n_decode: int, seed: int) -> go.Figure:
    """The decoded weights as the causal triangle; each cell's hover says which step made it."""
    tokens = [f"t{t + 1}" for t in range(n_decode)]
    return heatmap(
        step_by_step(n_decode, seed)[0],
        row_labels=tokens,
        col_labels=tokens,
        title="Weights built one decoding step (one row) at a time",
        hover=[
            [
                f"step {i + 1}: the new query against {i + 1} cached key(s)"
                if j <= i
                else "not in the cache yet"
                for j in range(n_decode)
            ]
            for i in range(n_decode)
        ],
        blocked=~causal_mask(n_decode),
    )
