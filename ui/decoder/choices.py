"""The decoder page's "attention choices": what the loaded family does in attention besides
Llama's recipe, each choice shown where it acts on the chosen head's last query (QK-norm, local
and global layers, the soft cap, NoPE layers), and a table of every layer's settings.

    head_steps(model, trace, layer, head)   the head's choices (``head_choices``) from the
                                            page's trace, None for a model without them (GPT-2)
    section(model, trace, layer, head)      the section: a sentence per choice, its figure
    layers_table(config)                    layer, attention (local W or global), RoPE base
    no_rotation(layer)                      what the RoPE view says of a NoPE layer
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core.models.llama import LlamaModel
from attention_core.models.llama.choices import HeadChoices, head_choices
from ui.decoder.trace import PageTrace
from ui.widgets import lines, render, small_screens

# A soft cap's curve is drawn this far past the largest score on each side.
CURVE_MARGIN = 1.2


def has_choices(model: object) -> bool:
    """Whether the model's family departs from Llama's attention in a way this section shows."""
    if not isinstance(model, LlamaModel):
        return False
    c = model.config
    return bool(
        c.qk_norm or c.windows or c.rope_bases or c.attn_softcap or c.query_scale is not None
    )


def head_steps(model: object, trace: PageTrace, layer: int, head: int) -> HeadChoices | None:
    if not isinstance(model, LlamaModel) or trace.q is None:
        return None
    return head_choices(model, layer, head, trace.q[layer], trace.k[layer])


def layers_table(config) -> pd.DataFrame:
    """Every layer's attention: local (its window) or global, and its RoPE base (or none)."""
    rows = []
    for layer in range(config.num_hidden_layers):
        window, base = config.window(layer), config.rope_base(layer)
        rows.append(
            {
                "layer": layer + 1,
                "attention": "global" if window is None else f"local: last {window} tokens",
                "RoPE base": "none (NoPE)" if base is None else f"{base:,.0f}",
            }
        )
    return pd.DataFrame(rows)


def qk_norm_figure(shown: HeadChoices, layer: int, head: int) -> go.Figure:
    """The last query's d_head numbers as projected, after QK-norm and after RoPE."""
    series = {"q as projected": shown.q, "after QK-norm": shown.q_normed}
    if shown.rope_base is not None:
        series["after RoPE"] = shown.q_rot
    return lines.line_plot(
        np.arange(1, shown.q.shape[0] + 1),
        series,
        x_title="dimension of the head",
        y_title="value",
        title=f"Layer {layer + 1}, head {head + 1}: the last token's query, step by step",
        dashed=("q as projected",),
    )


def soft_cap_figure(shown: HeadChoices, layer: int, head: int) -> go.Figure:
    """Each key's score before and after the cap, on the curve c·tanh(x/c)."""
    cap = shown.softcap
    reach = CURVE_MARGIN * max(float(np.abs(shown.raw).max()), cap)
    x = np.linspace(-reach, reach, 201)
    fig = lines.line_plot(
        x,
        {"c·tanh(x / c)": cap * np.tanh(x / cap), "no cap: y = x": x},
        x_title="score before the cap: q·k · scale",
        y_title="score the softmax reads",
        title=f"Layer {layer + 1}, head {head + 1}: the last token's scores, capped at ±{cap:g}",
        dashed=("no cap: y = x",),
    )
    fig.add_trace(
        go.Scatter(
            x=shown.raw,
            y=shown.scaled,
            mode="markers",
            name="this query's keys",
            marker={"size": 9},
        )
    )
    return fig


def _norm(x: np.ndarray) -> str:
    return f"{float(np.linalg.norm(x)):.2f}"


def section(model: LlamaModel, trace: PageTrace, layer: int, head: int) -> None:
    """The attention choices of the loaded family, on the chosen layer and head."""
    config = model.config
    shown = head_steps(model, trace, layer, head)
    key = render.digested(f"{trace.digest}-l{layer}-h{head}", shown)
    st.markdown(
        f"Scores here are multiplied by **{shown.scale:.4f}**"
        + (
            f" (1/√{1 / shown.scale**2:.0f}, set in the configuration rather than 1/√d_head = "
            f"1/√{config.head_dim})."
            if config.query_scale is not None
            else f" = 1/√d_head (d_head = {config.head_dim})."
        )
    )
    if config.qk_norm:
        what = (
            "each head's q and k are"
            if config.qk_norm == "head"
            else "the whole projection (all heads' q together, and all k together) is"
        )
        st.subheader("QK-norm: q and k normalised before the rotation")
        st.markdown(
            f"Before RoPE, {what} RMS-normalised and multiplied by a learned gain, so "
            "a score can no longer grow just because the projections grew: the softmax stays "
            f"out of saturation. The last query's length goes from {_norm(shown.q)} to "
            f"{_norm(shown.q_normed)}; its keys' from {_norm(shown.k[-1])} (the last) to "
            f"{_norm(shown.k_normed[-1])}."
        )
        render.show(render.cached(qk_norm_figure, key, layer, head),
                    filename=f"decoder-qk-norm-l{layer + 1}-h{head + 1}")  # fmt: skip
    if config.windows or config.rope_bases:
        st.subheader("Local and global layers, and where positions come from")
        local = [i for i in range(config.num_hidden_layers) if config.window(i) is not None]
        nope = [i for i in range(config.num_hidden_layers) if config.rope_base(i) is None]
        if local:
            st.markdown(
                f"{len(local)} of the {config.num_hidden_layers} layers are **local**: a query "
                f"there reads only the last {config.window(local[0])} tokens (the pattern above "
                "greys out the rest). The global layers read everything, so a long context costs "
                "their cache alone."
            )
        if nope:
            st.markdown(
                f"{len(nope)} layers use **no positional rotation** (NoPE): their scores see "
                "order only through the causal mask, and can match a word however far back."
            )
        small_screens.table(layers_table(config), hide_index=True)
    if config.attn_softcap:
        st.subheader("Soft-capping: scores bent below a ceiling")
        st.markdown(
            f"Each score passes through c·tanh(x/c) with c = {config.attn_softcap:g}: a small "
            "score is kept, a large one is bent towards ±c, so no key can take all of a row's "
            f"weight by a huge score. Here the scores span {shown.raw.min():.2f} to "
            f"{shown.raw.max():.2f} before the cap and {shown.scaled.min():.2f} to "
            f"{shown.scaled.max():.2f} after."
        )
        render.show(render.cached(soft_cap_figure, key, layer, head),
                    filename=f"decoder-soft-cap-l{layer + 1}-h{head + 1}")  # fmt: skip
    if config.final_softcap:
        st.caption(
            f"The logits are capped the same way, at ±{config.final_softcap:g}, before the "
            "softmax that gives the next-token probabilities above."
        )


def no_rotation(layer: int) -> None:
    st.info(
        f"Layer {layer + 1} uses no rotation (NoPE): its q and k reach the scores as they were "
        "projected, so there is no RoPE to show here. Choose a layer the table above gives a "
        "RoPE base.",
        icon=":material/block:",
    )
