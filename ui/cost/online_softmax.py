"""The cost page's online-softmax demo: one query read block by block, as chunked attention (and
FlashAttention) reads the keys, with the running max m, sum l and output o after each block.

    demo(n_keys, block, seed)            the blocks (`ChunkedAttention`) and the full softmax's
                                         output, cached per choice (read-only: shared)
    block_table, output_table            the running numbers per block; both outputs side by side
    weights_figure(n_keys, block, seed)  the weights each block's running state implies, then
                                         the full softmax's, as a heatmap
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core import chunked_attention, scaled_dot_product_attention
from attention_core.chunked import ChunkedAttention, online_softmax_weights
from attention_core.lessons.mask_experiments import example_qkv
from ui.widgets.byte_cache import MB, bounded_by_bytes, read_only
from ui.widgets.describe import format_number
from ui.widgets.heatmaps import color_scale
from ui.widgets.state import is_presenting
from ui.widgets.theme import font_size

WIDTH = 2  # d of the demo's query, keys and values: two numbers per output stay readable
BLOCK_COLUMNS = {
    name: st.column_config.NumberColumn(format="%.4f")
    for name in ("block max", "running max m", "rescale exp(m_old − m)", "running sum l")
}
OUTPUT_COLUMNS = {name: st.column_config.NumberColumn(format="%.8f") for name in ("d1", "d2")}
# Keys a block has not read yet are left out of the heatmap: its background shows through.
UNREAD_COLOR = "#eeeeee"


# One query against at most 12 keys, read in at most 12 blocks: under 2 KB a choice, 64 of them.
@bounded_by_bytes(MB // 8, name="cost.online_softmax", lane=None)
def demo(n_keys: int, block: int, seed: int) -> tuple[ChunkedAttention, np.ndarray]:
    """One query of the seeded example read block by block, and the full softmax output `(1, 2)`.

    Raises AttentionInputError for a block size the keys cannot take."""
    q_all, k, v = example_qkv(n_keys, WIDTH, seed)
    q = q_all[:1]  # one query keeps every running number readable
    online = chunked_attention(q, k, v, block_size=block, return_blocks=True)
    return read_only((online, scaled_dot_product_attention(q, k, v).output))


def block_table(online: ChunkedAttention) -> list[dict]:
    """One row per block: its keys, scores and the three running numbers after it."""
    return [
        {
            "block": t + 1,
            "keys": _span(b.start, b.stop),
            "scores s = q·k/√d": ", ".join(f"{s:.3f}" for s in b.scores[0]),
            "block max": float(b.block_max[0]),
            "running max m": float(b.running_max[0]),
            "rescale exp(m_old − m)": float(b.rescale[0]),
            "running sum l": float(b.running_sum[0]),
            "output estimate o / l": ", ".join(f"{x:.4f}" for x in b.output[0]),
        }
        for t, b in enumerate(online.blocks)
    ]


def output_table(online: ChunkedAttention, full_output: np.ndarray) -> list[dict]:
    """The chunked output o_T / l_T beside the full softmax's, one row each."""
    return [
        {"output": "chunked, o_T / l_T", **dict(zip(("d1", "d2"), online.output[0], strict=True))},
        {"output": "full softmax", **dict(zip(("d1", "d2"), full_output[0], strict=True))},
    ]


def weights_figure(n_keys: int, block: int, seed: int) -> go.Figure:
    """Rows: the weights the running state implies after each block, then the full softmax."""
    online, _ = demo(n_keys, block, seed)
    q_all, k, v = example_qkv(n_keys, WIDTH, seed)
    reference = scaled_dot_product_attention(q_all[:1], k, v).weights[0]  # (k_pos,)
    weights = online_softmax_weights(online)[:, 0, :]  # (n_blocks, k_pos), NaN = not read yet
    key_labels = [f"k{j + 1}" for j in range(n_keys)]
    block_labels = [
        f"after block {t + 1} ({_span(b.start, b.stop)})" for t, b in enumerate(online.blocks)
    ]
    matrix = np.vstack([weights, reference[None, :]])  # (n_blocks + 1, k_pos)
    rows = [*block_labels, "full softmax"]
    unread = np.isnan(matrix)
    text = [
        ["not read" if unread[i, j] else format_number(matrix[i, j], 3) for j in range(len(row))]
        for i, row in enumerate(matrix)
    ]
    hover = [
        [
            f"{rows[i]}, key {key_labels[j]}: "
            + (
                "not read yet"
                if unread[i, j]
                else f"exp(s − m) / l = {matrix[i, j]:.6f}"
                if i < len(block_labels)
                else f"softmax weight {matrix[i, j]:.6f}"
            )
            for j in range(matrix.shape[1])
        ]
        for i in range(matrix.shape[0])
    ]
    look = color_scale("weights").trace()
    fig = go.Figure(
        go.Heatmap(
            z=np.where(unread, np.nan, matrix),
            x=list(range(matrix.shape[1])),
            y=list(range(matrix.shape[0])),
            **look,
            text=text,
            texttemplate="%{text}",
            textfont={"size": font_size()},
            hovertext=hover,
            hoverinfo="text",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_traces(colorbar_title_text="weight", colorbar_title_side="right")
    fig.update_xaxes(
        title_text="key →",
        side="top",
        tickangle=0,  # flat: the browser keeps every k-th where they would meet (small_screens)
        tickvals=list(range(len(key_labels))),
        ticktext=list(key_labels),
    )
    fig.update_yaxes(
        title_text="← state after each block",
        autorange="reversed",
        tickvals=list(range(len(rows))),
        ticktext=rows,
    )
    per_row = 56 if is_presenting() else 40
    fig.update_layout(
        title={
            "text": "The weights the running state implies, block by block",
            "font": {"size": font_size() + 3},
            # At the top, above the key axis (in the middle of the margin, it met the axis).
            "y": 0.99,
            "yanchor": "top",
        },
        height=int(min(640, 140 + len(rows) * per_row)),
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
        font={"size": font_size()},
        plot_bgcolor=UNREAD_COLOR,
    )
    return fig


def _span(start: int, stop: int) -> str:
    """The keys of a block, from 1: "k1–k3", or "k4" alone."""
    return f"k{start + 1}–k{stop}" if stop - start > 1 else f"k{stop}"
