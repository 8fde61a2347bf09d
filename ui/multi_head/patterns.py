"""What each head does: every head's pattern at once, their average, and per-head statistics
(entropy, largest weight, weight on the previous token, itself, the first token).

The head average is display-only, computed here because it is what the pictures show: what
nn.MultiheadAttention returns by default, and what this page warns against reading.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import attention_entropy, head_statistics
from ui.multi_head.labels import head_names
from ui.widgets import heatmaps, render, small_screens

STAT_COLUMNS = {
    "mean_entropy": "entropy (nats)",
    "mean_max_weight": "largest weight",
    "previous_token": "→ previous token",
    "self_token": "→ itself",
    "first_token": "→ first token",
}


def average_over_heads(weights: np.ndarray) -> np.ndarray:
    """The head-averaged pattern `(q_pos, k_pos)` of `(head, q_pos, k_pos)` weights.

    What `nn.MultiheadAttention` returns by default (`average_attn_weights=True`), and what many
    visualisations show: a mean, so it is still a distribution per query.
    """
    return np.asarray(weights, dtype=np.float64).mean(axis=0)


def pattern_grid(
    weights: np.ndarray,
    *,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    highlight: int,
) -> render.Panels:
    """Every head's `(q_pos, k_pos)` weights as small multiples, their average as the last panel,
    the zoomed head's title in bold: three a row on a wide screen, one on a phone."""
    num_heads = weights.shape[0]
    panels = np.concatenate([weights, average_over_heads(weights)[None]])
    return heatmaps.heatmap_grid(
        panels,
        titles=[*head_names(num_heads), "average of the heads"],
        row_labels=query_labels,
        col_labels=key_labels,
        columns=3,
        highlight=highlight,
    )


def averaging_note(table: pd.DataFrame) -> str:
    """Why the average pattern misleads, with this example's entropies from `table`."""
    entropy = table[STAT_COLUMNS["mean_entropy"]].to_numpy()
    heads, average = entropy[:-1], entropy[-1]
    if len(heads) == 1:
        return (
            "With one head the average is the head itself. Add heads to see what averaging hides."
        )
    return (
        f"**Averaging hides what heads do.** The heads' patterns have entropies from "
        f"{heads.min():.3f} to {heads.max():.3f} nats; their average has {average:.3f}, never "
        "below the heads' mean (entropy is concave). A head that looks at the previous token and "
        "one that looks at the first token average to a pattern that splits its weight between "
        "both, which neither head does: read single heads, not the average."
    )


def head_statistics_table(weights: np.ndarray) -> pd.DataFrame:
    """One row per head of `(head, q_pos, k_pos)` weights, then the head-averaged pattern."""
    per_head = head_statistics(weights)
    averaged = head_statistics(average_over_heads(weights)[None])
    num_heads = weights.shape[0]
    table = pd.DataFrame(
        {
            "head": [*head_names(num_heads), "average of the heads"],
            **{
                column: np.concatenate(
                    [np.asarray(getattr(per_head, field)), np.asarray(getattr(averaged, field))]
                )
                for field, column in STAT_COLUMNS.items()
            },
        }
    )
    return table


def show_statistics_table(table: pd.DataFrame) -> None:
    small_screens.table(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            column: st.column_config.NumberColumn(column, format="%.3f")
            for column in STAT_COLUMNS.values()
        },
    )


def entropy_figure(weights: np.ndarray, *, tokens: Sequence[str]) -> go.Figure:
    """Entropy of each query's weights, one row per head: which heads focus, on which tokens."""
    entropy = attention_entropy(weights)  # (head, q_pos)
    num_heads = weights.shape[0]
    return heatmaps.heatmap(
        entropy,
        row_labels=head_names(num_heads),
        col_labels=list(tokens),
        kind="sequential",
        title="Entropy per query (nats)",
        row_title="head",
        col_title="query",
        decimals=2,
        height=min(520, 140 + 34 * num_heads),
    )
