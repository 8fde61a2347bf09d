"""Why divide by √d_k: the sharp-vs-flat pair, the experiment over widths d_k, and the same
example's weights scaled and unscaled side by side.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError, attention_entropy
from attention_core.lessons.presets import (
    attention_for,
    fit_example,
    sharp_flat_pair,
)
from attention_core.lessons.scaling import scaling_experiment
from ui.widgets import compare, heatmaps, lines, render
from ui.widgets.byte_cache import MB, bounded_by_bytes, read_only
from ui.widgets.state import PageState, write_url_after_fragment


def show_sharp_vs_flat(
    sizes: tuple[int, int, int, int], *, scoring: str, tau: float, causal: bool, key: str
) -> None:
    """The same keys against queries 20× longer: weights side by side, their peak and entropy.

    `sizes` (n_q, n_k, d_k, d_v) fit the pair to the page's example; the settings are the page's.
    """
    st.subheader("Sharp vs flat: the same keys, queries 20× longer")
    pair = [fit_example(e, *sizes) for e in sharp_flat_pair()]
    pair_steps = [attention_for(e.q, e.k, e.v, scoring=scoring, temperature=tau, causal=causal)
                  for e in pair]  # fmt: skip
    render.show(
        render.cached(
            heatmaps.heatmap_grid,
            np.stack([s.weights for s in pair_steps]),
            titles=("flat (queries × 0.5)", "sharp (queries × 10)"),
            row_labels=pair[0].query_labels,
            col_labels=pair[0].key_labels,
            columns=2,
        ),
        filename=f"{key}-sharp-vs-flat",
        key=f"{key}.sharp_flat",
    )
    for column, label, s in zip(st.columns(2), ("Flat", "Sharp"), pair_steps, strict=True):
        column.metric(f"{label}: mean largest weight", f"{s.weights.max(axis=-1).mean():.4f}")
        column.metric(f"{label}: mean entropy (nats)", f"{attention_entropy(s.weights).mean():.4f}")
    st.caption(
        "Large scores push the softmax towards one-hot: almost all weight on one key, entropy "
        "near 0, and (see below) almost no gradient. Small scores give a nearly even spread."
    )


SCALING_D_K = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


# Nine lines of ten numbers, 720 bytes a setting: twenty settings. No lane: random vectors, no
# model, so no waiting behind another viewer's forward pass.
@bounded_by_bytes(MB // 64, name="scaled_dot_product.scaling", lane=None)
def scaling_results(num_keys: int = 16, num_samples: int = 2000, seed: int = 0):
    """`attention_core.scaling_experiment` over SCALING_D_K, cached (it takes ~0.2 s)."""
    return read_only(
        scaling_experiment(SCALING_D_K, num_samples=num_samples, num_keys=num_keys, seed=seed)
    )


def scaling_figure(field: str, num_keys: int, seed: int) -> go.Figure:
    """One figure of the √d_k experiment: "variance", or a SCALING_PANELS field."""
    result = scaling_results(num_keys=num_keys, seed=seed)
    d_k = np.asarray(result.d_k)
    if field == "variance":
        return lines.line_plot(
            d_k,
            {
                "measured Var(q·k)": result.dot_variance,
                "y = d_k": d_k.astype(np.float64),
                "measured Var(q·k / √d_k)": result.scaled_dot_variance,
            },
            x_title="d_k (width of q and k)",
            y_title="variance of the score",
            title="Var(q·k) grows like d_k; dividing by √d_k keeps it at 1",
            log_x=True,
            log_y=True,
            dashed=("y = d_k",),
            markers=True,
        )
    label, note = {field: (label, note) for field, label, note in SCALING_PANELS}[field]
    return lines.line_plot(
        d_k,
        {
            "without scaling": getattr(result, f"{field}_unscaled"),
            "with 1/√d_k": getattr(result, f"{field}_scaled"),
        },
        x_title="d_k",
        y_title=label,
        title=note.format(num_keys=num_keys, log_keys=math.log(num_keys)),
        log_x=True,
        markers=True,
    )


SCALING_PANELS = (
    ("max_weight", "largest weight in a row", "1 = all weight on one key"),
    ("entropy", "entropy of a row (nats)", "uniform = log {num_keys} = {log_keys:.2f}"),
    ("gradient_norm", "softmax gradient size ‖J‖", "0 = no gradient reaches the scores"),
)


@st.fragment
def why_scale(view: PageState, *, key: str) -> None:
    """The "Why divide by √d_k?" expander; its experiment is drawn once opened (links can)."""
    why = st.expander("Why divide by √d_k?", icon=":material/functions:",
                      key=view.bool_key("why", False), on_change="rerun")  # fmt: skip
    if why.open:
        with why:
            show_scaling_experiment(key=key)
    write_url_after_fragment(view)


def show_scaling_experiment(*, key: str, num_keys: int = 16, seed: int = 0) -> None:
    """Why divide by √d_k: measured Var(q·k) against d_k with the line y = d_k, and the softmax
    over `num_keys` random keys (max weight, entropy, gradient size) with and without scaling.
    """
    st.markdown(
        "If the entries of q and k are independent with mean 0 and variance 1, then "
        "q·k = Σᵢ qᵢkᵢ is a sum of d_k terms of variance 1, so its variance is d_k. Wide "
        "heads give large scores, and the softmax of large scores is nearly one-hot, "
        "which passes almost no gradient back. Measured here over random vectors:"
    )
    result = scaling_results(num_keys=num_keys, seed=seed)
    render.show(
        render.cached(scaling_figure, "variance", num_keys, seed),
        filename="why-sqrt-dk-variance",
        key=f"{key}.variance",
    )
    for column, (field, _, _) in zip(st.columns(3), SCALING_PANELS, strict=True):
        with column:
            render.show(
                render.cached(scaling_figure, field, num_keys, seed),
                filename=f"why-sqrt-dk-{field.replace('_', '-')}",
                key=f"{key}.{field}",
            )
    d_k = np.asarray(result.d_k)
    last = len(d_k) - 1
    st.caption(
        f"{result.num_samples:,} random queries against {num_keys} keys, entries N(0, 1). At "
        f"d_k = {d_k[last]}: Var(q·k) = {result.dot_variance[last]:.1f}, and the largest weight "
        f"is {result.max_weight_unscaled[last]:.3f} without scaling against "
        f"{result.max_weight_scaled[last]:.3f} with it."
    )


@st.fragment
def compare_scaling(
    view: PageState, example: Any, scoring: str, temperature: float, causal: bool
) -> None:
    """`example`'s weights with the dot product divided by √d_k (A) and not (B), at the page's
    temperature and mask; `scoring` is the page's choice, which must be the dot product."""
    box = compare.opened(view, label="Compare: scaled and unscaled")
    if box is not None:
        with box:
            if scoring != "dot_product":
                st.info("Only the dot product is divided by √d_k: choose it as the scoring "
                        "function to compare.", icon=":material/info:")  # fmt: skip
            else:
                try:
                    a, b = (
                        attention_for(example.q, example.k, example.v, scoring=name,
                                      temperature=temperature, causal=causal).weights
                        for name in ("scaled_dot", "dot")
                    )  # fmt: skip
                except AttentionInputError as error:
                    st.error(str(error), icon=":material/error:")
                else:
                    d_k = example.q.shape[1]
                    compare.show(a, b, names=(f"divided by √{d_k}", "not scaled"),
                                 query_labels=example.query_labels, key_labels=example.key_labels,
                                 filename="sdpa-scaling-compare")  # fmt: skip
    write_url_after_fragment(view)
