"""The long-context page's KV-cache section: what MHA, GQA, MQA and MLA cache per token and at a
chosen context length, on SmolLM2 and on well-known models, and SmolLM2 run with a smaller cache
(its KV heads pooled into one, its cache quantized to 8 and 4 bits) over the page's text.

    section(view, text_ids)    draws it all; the context length is `?context=` in the link

Nothing here computes a formula: the bytes come from attention_core.kv_cache, the experiments
from attention_core.models.kv_experiments.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core.kv_cache import (
    KNOWN_SHAPES,
    LLAMA_3_8B,
    SMOLLM2_135M,
    VARIANTS,
    AttentionShape,
    cache_bytes,
    variant_bytes_per_token,
)
from attention_core.models.decoder import DecoderModel
from attention_core.models.kv_experiments import KVExperiment, kv_experiment
from server.kept_process import run_where_kept
from server.lane import LONG_RUNS
from ui.long_context import data
from ui.long_context.figures import SMOOTHING, running_mean
from ui.models import page_model, smollm
from ui.widgets import describe, lines, render, small_screens, theme
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of
from ui.widgets.state import PageState, write_url_after_fragment
from ui.widgets.tables import number_columns

CONTEXTS = (1_024, 4_096, 8_192, 32_768, 131_072)
DEFAULT_CONTEXT = 32_768
# The experiments read the text four times (full cache and three smaller ones), its first this
# many tokens: past it the means barely move while every pass grows longer
# (bench/bench_page_long_context.py times them).
MAX_EXPERIMENT_TOKENS = 256
# SmolLM2 as this app runs it: float32 keys and values, twice the bytes of its bfloat16 release.
SMOLLM2_HERE = dataclasses.replace(SMOLLM2_135M, name="SmolLM2-135M here (float32)", bits=32)
SHAPES = (SMOLLM2_HERE, *KNOWN_SHAPES)
VARIANT_COLORS = dict(zip(VARIANTS, theme.HEAD_COLORS, strict=False))
UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB")
MEMORY_COLUMNS = {
    "whole cache": st.column_config.TextColumn(
        help="At the chosen context length: the model's own variant (the “uses” column), "
        "its window applied."
    ),
}
EFFECT_COLUMNS = number_columns(
    {
        "bytes": "localized",
        "smaller by": "%.2f×",
        "mean KL (nats)": "%.3g",
        "top-1 agreement": "percent",
        "mean loss (nats)": "%.3f",
    }
)


def section(view: PageState, text_ids: tuple[int, ...], decoder: str) -> None:
    """The KV-cache section: bytes by variant and context length, then the experiments of the
    decoder named `decoder` (``page_model.named_decoder``)."""
    llama_cache = cache_bytes(variant_bytes_per_token(LLAMA_3_8B, "GQA"), CONTEXTS[-1])
    st.markdown(
        "Every token a decoder has read leaves a key and a value in every layer, for every KV "
        "head: the **KV cache**, which lets the next token cost one row of attention. It grows "
        "with the context until it rivals the weights: a model shaped like Llama-3-8B holds 16 GB "
        f"of bfloat16 weights and, at {CONTEXTS[-1]:,} tokens (Llama 3.1's context, same shapes), "
        f"{bytes_text(llama_cache)} of cache per sequence. Models save "
        "on it by sharing K and V among query heads (**GQA**: groups of heads; **MQA**: all of "
        "them), by caching a compressed **latent** from which every head's K and V are re-made "
        "(DeepSeek-V2's **MLA**), by a sliding window (Mistral-7B caches only its last 4,096 "
        "tokens), or by storing fewer bits per number."
    )
    st.latex(
        r"\text{bytes per token} = 2 \cdot L \cdot n_{kv} \cdot d_h \cdot b, \qquad"
        r"\text{MLA: } L \cdot (d_c + d_h^R) \cdot b"
    )
    st.caption(
        "2 for K and V, L layers, n_kv KV heads (H, every query head, for MHA; G groups for GQA; "
        "1 for MQA), d_h numbers per head, b bytes per number (2 for bfloat16); d_c the latent's "
        "width and d_h^R the RoPE key all heads share."
    )
    st.subheader("Bytes per token, and at a context length", anchor="kv-bytes")
    _memory(view)
    loaded = page_model.named_decoder(decoder)
    name = loaded.name
    st.subheader(f"{name} with a smaller cache", anchor="kv-experiments")
    _experiments(text_ids, loaded.model, name)


# -- bytes by variant ------------------------------------------------------------------------------


@st.fragment
def _memory(view: PageState) -> None:
    context = st.select_slider(
        "Context length (tokens)",
        options=CONTEXTS,
        format_func=lambda n: f"{n:,}",
        key=view.choice_key("context", DEFAULT_CONTEXT, CONTEXTS),
    )
    small_screens.table(
        memory_table(context),
        hide_index=True,
        width="stretch",
        key="long_context.kv_table",
        column_config=MEMORY_COLUMNS,
    )
    render.show(render.cached(memory_figure, context), filename=f"kv-cache-at-{context}",
                key="long_context.kv_bytes")  # fmt: skip
    capped = [shape for shape in SHAPES if shape.window is not None and context > shape.window]
    notes = [
        f"{shape.name} attends to its last {shape.window:,} tokens only, so its cache stops "
        f"growing there: at {context:,} tokens it holds {shape.window:,}."
        for shape in capped
    ]
    st.caption(
        " ".join(notes)
        + " DeepSeek-V2's MHA and MQA bars are what its 128 heads of 128 numbers would cache "
        "that way (the paper's comparison): its MLA caches as much as MQA would with 2.25 KV "
        "heads, and the paper reports it stronger than MHA."
    )
    write_url_after_fragment(view)


def _bytes_at(shape: AttentionShape, variant: str, context: int) -> int | None:
    per_token = variant_bytes_per_token(shape, variant)
    return None if per_token is None else cache_bytes(per_token, context, shape.window)


def memory_table(context: int) -> pd.DataFrame:
    """One row per model: what each variant caches per token ("—" where the model has no such
    variant), the variant it uses, and its cache at `context` tokens."""
    rows = []
    for shape in SHAPES:
        row = {"model": shape.name, "uses": shape.published}
        for variant in VARIANTS:
            row[f"{variant} / token"] = bytes_text(variant_bytes_per_token(shape, variant))
        row["whole cache"] = bytes_text(_bytes_at(shape, shape.published, context))
        rows.append(row)
    return pd.DataFrame(rows)


def memory_figure(context: int) -> go.Figure:
    """Each model's cache at `context` tokens, one bar per variant it defines (log scale)."""
    names = [shape.name for shape in SHAPES]
    values = np.array(
        [[_bytes_at(shape, v, context) or np.nan for v in VARIANTS] for shape in SHAPES],
        dtype=np.float64,
    )  # (model, variant) bytes
    gib = values / 2**30
    data = [
        {
            "type": "bar",
            "name": variant,
            "x": names,
            "y": gib[:, column],
            "marker": {"color": VARIANT_COLORS[variant]},
            "text": [bytes_text(v) if np.isfinite(v) else "" for v in values[:, column]],
            "textposition": "outside",
            # Full size even over a phone's narrow bars, where those that would meet are left
            # to the hover (ui.small_screens): shrunk to the bar, they were 3 px high.
            "constraintext": "none",
            "hovertemplate": f"%{{x}}, {variant}: %{{text}}<extra></extra>",
        }
        for column, variant in enumerate(VARIANTS)
    ]
    title = f"The KV cache at {context:,} tokens"
    layout = {
        "title": {"text": title, "font": {"size": theme.font_size() + 3}},
        "barmode": "group",
        "height": 440,
        "font": {"size": theme.font_size()},
        "xaxis": {"title": {"text": "model"}},
        "yaxis": {"title": {"text": "cache (GiB, log scale)"}, "type": "log"},
        "legend": {"orientation": "h", "y": 1.1},
        "margin": {"l": 10, "r": 10, "t": 80, "b": 10},
    }
    used = [
        f"{shape.name} ({shape.published}) {bytes_text(_bytes_at(shape, shape.published, context))}"
        for shape in SHAPES
    ]
    summary = (
        f"{title}, for each model with multi-head (MHA), grouped-query (GQA), multi-query (MQA) "
        f"and latent (MLA) attention where it defines them. What each model uses: "
        + "; ".join(used)
        + "."
    )
    table = describe.ChartTable(gib, tuple(names), VARIANTS, row_title="model",
                                title=f"{title} (GiB)")  # fmt: skip
    return describe.attach(render.figure(data, layout), summary, table)


def bytes_text(n: float | None) -> str:
    """`131072` -> "128 KiB": binary units, three significant digits."""
    if n is None:
        return "—"
    unit = 0
    while n >= 1024 and unit < len(UNITS) - 1:
        n, unit = n / 1024, unit + 1
    return f"{n:.3g} {UNITS[unit]}"


# -- SmolLM2's experiments -------------------------------------------------------------------------


def experiment(model: DecoderModel, text_ids: tuple[int, ...]) -> KVExperiment:
    """The full cache against the three smaller ones over the text's first
    MAX_EXPERIMENT_TOKENS tokens (once per text, for every viewer)."""
    return _experiment(text_ids, id(model), model)


@smollm.let_go_with_model
# ~7 KB an entry at 256 tokens
@bounded_by_bytes(MB, name="long_context.kv_experiment", lane=LONG_RUNS)
def _experiment(text_ids, model_id, _model: DecoderModel) -> KVExperiment:
    ids = np.asarray(text_ids[:MAX_EXPERIMENT_TOKENS])
    # The full cache's read is the page's full pass over the whole text, made above this
    # section, at these first positions: one read of the text fewer.
    full = data.full_pass(_model, text_ids).final[: ids.shape[0]]
    return run_where_kept(kv_experiment, _model, ids, full=full)


def _experiments(text_ids: tuple[int, ...], model: DecoderModel | None, name: str) -> None:
    ids = tuple(text_ids[:MAX_EXPERIMENT_TOKENS])
    if len(ids) < 2:
        st.info("The experiments need a text of at least two tokens.", icon=":material/edit:")
        return
    if model is None:
        st.info(f"{name} is not loaded: the experiments need it.", icon=":material/cloud_off:")
        return
    config = model.config
    heads = (
        f"{config.num_attention_heads} query heads sharing {config.num_key_value_heads} KV heads"
        if config.group_size > 1
        else f"{config.num_attention_heads} heads, each with its own keys and values,"
    )
    st.markdown(
        f"{name} has {heads} in each of its {config.num_hidden_layers} layers. "
        "Here it reads the text with its full cache and then with three smaller ones, made "
        f"without retraining: the {config.num_key_value_heads} KV heads **mean-pooled into one** "
        "(MQA), and every cached "
        "key and value **quantized** to 8 or 4 bits, each vector with its own scale. Each "
        "is compared with the full cache at every position: the KL divergence between the two "
        "next-token distributions, and whether the most likely next token stays the same."
    )
    st.latex(
        r"\mathrm{KL}(p \,\|\, q) = \sum_v p_v \log \frac{p_v}{q_v}, \qquad"
        r"\hat x = s \cdot \mathrm{round}(x / s),\quad s = \frac{\max_i |x_i|}{2^{b-1} - 1}"
    )
    with st.spinner(f"Reading {len(ids)} tokens with four caches (a few seconds each, once per "
                    "text)…"):  # fmt: skip
        found = experiment(model, text_ids)
    cut = f" (its first {len(ids)} tokens)" if len(text_ids) > len(ids) else ""
    columns = st.columns(1 + len(found.effects))
    columns[0].metric("Full cache (float32)", bytes_text(found.cache_bytes),
                      help=f"Mean loss {found.mean_loss:.3f} nats")  # fmt: skip
    for column, effect in zip(columns[1:], found.effects, strict=True):
        column.metric(effect.label, bytes_text(effect.cache_bytes),
                      delta=f"{effect.agreement:.0%} same top-1", delta_color="off",
                      delta_arrow="off", help=f"Mean KL {effect.mean_kl:.3g} nats")  # fmt: skip
    small_screens.table(experiment_table(found), hide_index=True, width="stretch",
                 key="long_context.kv_effects", column_config=EFFECT_COLUMNS)  # fmt: skip
    # Keyed by the digest of what computed it (the model and the text), not by its arrays.
    drawn = render.digested(digest_of(id(model), text_ids), found)
    render.show(render.cached(kl_figure, drawn), filename="kv-cache-kl",
                key="long_context.kv_kl")  # fmt: skip
    pooled = next((e for e in found.effects if e.name == "mqa"), None)
    st.caption(
        f"Over the text{cut}: {len(ids)} positions, each predicting the next token. The bytes "
        "are computed from the shapes and the bits (a float32 scale per quantized vector), for "
        "this many tokens." + pooling_sentence(pooled, found.mean_loss)
    )


def pooling_sentence(pooled: object, mean_loss: float) -> str:
    """What pooling the KV heads did to this model on this text, said only as strongly as the
    losses say it (a model trained with its heads apart loses much; a random one may not)."""
    if pooled is None:
        return ""
    losses = f"mean loss {pooled.mean_loss:.2f} nats against {mean_loss:.2f}"
    if pooled.mean_loss < mean_loss * 1.1:
        return f" Pooling the heads costs this model little on this text ({losses})."
    return (
        f" Pooling the heads of a trained model breaks it ({losses}): each head's keys live in "
        "their own subspace, and their mean matches none. The GQA paper (Ainslie et al. 2023) "
        "pools the heads the same way, then trains on for 5% of the pre-training steps to "
        "recover."
    )


def experiment_table(found: KVExperiment) -> pd.DataFrame:
    """One row per cache: its bytes, how much smaller than the full one, the mean KL (nats),
    the share of positions whose most likely next token is unchanged, and the mean loss."""
    rows = [
        {"cache": "full (float32)", "bytes": found.cache_bytes, "smaller by": 1.0,
         "mean KL (nats)": 0.0, "top-1 agreement": 1.0, "mean loss (nats)": found.mean_loss}
    ]  # fmt: skip
    rows += [
        {
            "cache": effect.label,
            "bytes": effect.cache_bytes,
            "smaller by": found.cache_bytes / effect.cache_bytes,
            "mean KL (nats)": effect.mean_kl,
            "top-1 agreement": effect.agreement,
            "mean loss (nats)": effect.mean_loss,
        }
        for effect in found.effects
    ]
    return pd.DataFrame(rows)


def kl_figure(found: KVExperiment) -> go.Figure:
    """Each smaller cache's KL from the full one along the text (running mean, log scale)."""
    figure = lines.line_plot(
        np.arange(len(found.ids)),
        {effect.label: running_mean(effect.kl, SMOOTHING) for effect in found.effects},
        x_title="position (the token it predicts is the next one)",
        y_title=f"KL(full ‖ smaller), nats (mean of the last {SMOOTHING})",
        title="How far each smaller cache moves the next-token distribution",
        log_y=True,
    )
    figure.layout.yaxis.exponentformat = "power"  # 10⁻⁴ nats, not the SI "100µ"
    return figure
