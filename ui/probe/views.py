"""The probe page's helpers: rollout, the joint query-key map and token ablation, cached and drawn.

    probe_trace(model, text)        the real-model page's cached trace, refused past
                                    MAX_PROBE_TOKENS tokens (a learner-friendly error)
    rollout_of / projection_of /    attention_core.probing's results, one per distinct input,
    ablation_of                     shared by every session (bounded st.cache_resource)
    fit_token(view, name, n)        a token chosen by a link kept inside the text, with the
                                    message the page shows next to the control
    *_figure(text, ...)             figure builders for `render.cached`: keyed on the text and
                                    the choices, they fetch the cached results themselves

Nothing here computes attention: the numbers come from attention_core.probing and the model's
own forward pass (ui.model_views).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError
from attention_core.models import BertModel
from attention_core.probing import (
    Ablation,
    QueryKeyProjection,
    Rollout,
    ablate_head,
    ablate_token,
    attention_rollout,
    joint_query_key_projection,
)
from ui.models import minilm
from ui.widgets import heatmaps, theme
from ui.widgets.state import PageState, is_presenting

# Rollout, the map's lines and the ablation's second forward pass all grow with n²; a sentence
# or two is what a learner probes, and it keeps every picture readable.
MAX_PROBE_TOKENS = 64
DEFAULT_TEXT = minilm.DEFAULT_TEXT
# Layer 4, head 2 sends "it" (token 11) to "animal"; replacing "tired" (token 14) by "wide"
# takes 0.40 of that weight away, and "street" gains 0.07: the model's reading of "it" moves.
DEFAULT_LAYER, DEFAULT_HEAD, DEFAULT_TOKEN = 4, 2, 11
DEFAULT_ABLATE, DEFAULT_MODE, DEFAULT_REPLACEMENT = 14, "replace", "wide"
# Removing layer 3, head 2 moves layer 4, head 2's weights by up to 0.22 (the most of any head
# in layers 1 to 3), while the sentence embedding keeps a cosine of 0.997.
DEFAULT_ABLATED_LAYER, DEFAULT_ABLATED_HEAD = 3, 2
MODES = {
    "remove": "Remove it",
    "mask": "Hide it (mask)",
    "replace": "Replace it",
    "head": "Remove a head",
}
QUERY_COLOR, KEY_COLOR = "#1b9e77", "#d95f02"


# -- the numbers, cached ----------------------------------------------------------------------


def probe_trace(model: BertModel, text: str) -> minilm.PageTrace:
    """The model's trace of `text` (the real-model page's cache), for texts of at most
    MAX_PROBE_TOKENS tokens; longer or empty text raises AttentionInputError."""
    n = len(model.tokenize(text).tokens)
    if n > MAX_PROBE_TOKENS:
        raise AttentionInputError(
            f"This text has {n} tokens; the probes here take at most {MAX_PROBE_TOKENS} (about "
            "two sentences), so their pictures stay readable. Shorten the text, or open it on "
            "the real-model page, which reads up to 512."
        )
    return minilm.page_trace(model, text)


def rollout_of(text: str) -> Rollout:
    """Attention rollout of `text` through every layer (residual ½, as the paper)."""
    return _rollout(text)


@st.cache_resource(max_entries=4, show_spinner=False)
def _rollout(text: str) -> Rollout:
    return attention_rollout(minilm.trace_of(text).weights)


def projection_of(text: str, layer: int, head: int) -> QueryKeyProjection:
    """The joint query-key map of head (`layer`, `head`), both from 0."""
    return _projection(text, layer, head)


@st.cache_resource(max_entries=16, show_spinner=False)
def _projection(text: str, layer: int, head: int) -> QueryKeyProjection:
    trace = minilm.trace_of(text)
    return joint_query_key_projection(trace.q_heads[layer, head], trace.k_heads[layer, head])


def ablation_of(
    model: BertModel,
    text: str,
    position: int,
    mode: str,
    replacement: str,
    ablated: tuple[int, int] = (0, 0),
) -> Ablation:
    """`text` with token `position` (from 0) removed, hidden or replaced, or (mode "head") with
    head `ablated` = (layer, head) (from 0) removed: two forward passes, once per distinct
    choice. Raises AttentionInputError for a replacement that is not a word piece of the
    vocabulary."""
    replacement = replacement.strip() if mode == "replace" else ""
    # The choices a mode ignores are fixed, so they do not split its cache entry.
    position = 0 if mode == "head" else position
    ablated = tuple(ablated) if mode == "head" else (0, 0)
    return _ablation(text, position, mode, replacement, ablated, id(model), model)


@st.cache_resource(max_entries=4, show_spinner="Running the model on the changed text…")
def _ablation(
    text: str,
    position: int,
    mode: str,
    replacement: str,
    ablated: tuple[int, int],
    model_id: int,
    _model: BertModel,
) -> Ablation:
    if mode == "head":
        return ablate_head(_model, text, *ablated)
    return ablate_token(_model, text, position, mode, replacement=replacement or "[MASK]")


def largest_change(ablation: Ablation, layer: int, head: int) -> tuple[float, tuple[int, int]]:
    """The signed weight change of largest size in head (`layer`, `head`) and its (query, key)
    positions in the original text (a removed token's NaN row and column are skipped)."""
    difference = np.nan_to_num(ablation.difference[layer, head], nan=0.0)  # (q_pos, k_pos)
    i, j = np.unravel_index(int(np.abs(difference).argmax()), difference.shape)
    return float(difference[i, j]), (int(i), int(j))


def unchanged_layer_note(ablation: Ablation, layer: int) -> str | None:
    """For a removed head, the message when the shown `layer` (from 0) cannot have changed."""
    if ablation.head is None or layer > ablation.head[0]:
        return None
    removed = ablation.head[0] + 1
    own = "its own layer" if layer + 1 == removed else f"layer {layer + 1}, below it"
    above = (
        f"Its effect shows in the layers above: move the Layer slider to {removed + 1} or higher."
        if removed < ablation.weights_before.shape[0]
        else "No layer reads it after the last one: only the final vectors below can change."
    )
    return (
        f"The removed head sits in layer {removed}, so {own} computes exactly the same weights "
        "(the difference below is 0 everywhere, and the removed head's own pattern is unchanged: "
        f"only its output is dropped). {above}"
    )


def fit_token(view: PageState, name: str, n: int) -> str | None:
    """Keep the token parameter `name` (from 1) inside a text of `n` tokens. Returns the message
    to show next to its control when it was past the end (a link for a longer text)."""
    asked = view.value(name)
    if asked <= n:
        return None
    view.set(name, n)
    return (
        f"Token {asked} does not exist: this text has {n} tokens (1 to {n}). Showing token {n} "
        "instead; pick another below."
    )


def token_options(tokens: list[str]) -> tuple[list[int], Callable[[int], str]]:
    """Positions from 1 and how a selectbox writes them: "11 · it"."""
    return list(range(1, len(tokens) + 1)), lambda i: f"{i} · {tokens[i - 1]}"


# -- rollout figures ----------------------------------------------------------------------------


def rollout_figure(text: str) -> go.Figure:
    """R_L as a heatmap: row i, how much of position i's top vector traces to each input."""
    trace = minilm.trace_of(text)
    return heatmaps.heatmap(
        rollout_of(text).rollout,
        row_labels=trace.labels(),
        col_labels=trace.labels(),
        kind="weights",
        title=f"Rollout through all {trace.num_layers} layers",
        row_title="query (top layer)",
        col_title="key (input token)",
        height=None if trace.num_tokens <= 24 else 720,
    )


def token_rollout_figure(text: str, token: int) -> go.Figure:
    """One token's rollout row after each layer, and the last layer's own attention beneath."""
    trace = minilm.trace_of(text)
    rollout = rollout_of(text)
    rows = np.vstack([rollout.cumulative[:, token], rollout.head_mean[-1, token][None]])
    labels = [f"rollout to layer {layer + 1}" for layer in range(trace.num_layers)]
    labels.append(f"layer {trace.num_layers} attention alone")
    return heatmaps.heatmap(
        rows,
        row_labels=labels,
        col_labels=trace.labels(),
        kind="weights",
        title=f"Token {token + 1} “{trace.tokens[token]}”, layer by layer",
        row_title="layer",
        col_title="key (input token)",
        # Seven rows of numbers in half the page overlap past a few tokens; hover keeps them.
        annotate=trace.num_tokens <= 8,
    )


# -- the joint query-key map --------------------------------------------------------------------


def query_key_map_figure(text: str, layer: int, head: int, pairs: int) -> go.Figure:
    """Queries (circles) and keys (diamonds) in one PCA plane, each labelled with its token, and
    a line for each of the `pairs` heaviest query→key weights of the head."""
    trace = minilm.trace_of(text)
    projection = projection_of(text, layer, head)
    w = trace.weights[layer, head]  # (q_pos, k_pos)
    tokens = trace.labels()
    n = len(tokens)
    heaviest = np.argsort(w, axis=None)[::-1][:pairs]
    qi, kj = np.unravel_index(heaviest, w.shape)
    qxy, kxy = projection.query_xy, projection.key_xy
    lines = {
        "type": "scatter",
        "x": np.column_stack([qxy[qi, 0], kxy[kj, 0], np.full(qi.size, np.nan)]).ravel(),
        "y": np.column_stack([qxy[qi, 1], kxy[kj, 1], np.full(qi.size, np.nan)]).ravel(),
        "mode": "lines",
        "line": {"color": "#7f7f7f", "width": 1},
        "opacity": 0.6,
        "name": f"{qi.size} heaviest weights",
        "hoverinfo": "skip",
    }
    size = 14 if is_presenting() else 10

    def points(xy: np.ndarray, role: str, name: str, symbol: str, color: str) -> dict:
        return {
            "type": "scatter",
            "x": xy[:, 0],
            "y": xy[:, 1],
            "mode": "markers+text",
            "name": name,
            "text": tokens,
            "textposition": "top center",
            "marker": {"symbol": symbol, "size": size, "color": color, "opacity": 0.85},
            "hovertext": [f"{role} {i + 1} “{tokens[i]}”" for i in range(n)],
            "hoverinfo": "text",
        }

    explained = projection.explained
    layout = {
        "title": {
            "text": f"Layer {layer + 1}, head {head + 1}: queries and keys in one plane",
            "font": {"size": theme.font_size() + 3},
        },
        "height": 560,
        "font": {"size": theme.font_size()},
        "xaxis": {"title": {"text": f"PC 1 ({explained[0]:.0%} of the variance)"}},
        "yaxis": {
            "title": {"text": f"PC 2 ({explained[1]:.0%})"},
            "scaleanchor": "x",
            "scaleratio": 1,
        },
        "legend": {"orientation": "h", "y": -0.15},
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
    }
    data = [
        lines,
        points(qxy, "query", "queries", "circle", QUERY_COLOR),
        points(kxy, "key", "keys", "diamond", KEY_COLOR),
    ]
    return go.Figure({"data": data, "layout": layout}, _validate=False)


# -- ablation figures ---------------------------------------------------------------------------


def ablation_figure(
    text: str,
    position: int,
    mode: str,
    replacement: str,
    ablated: tuple[int, int],
    layer: int,
    head: int,
    which: str,
) -> go.Figure:
    """Head (`layer`, `head`) before, after, or their difference (`which`), on the positions
    that exist in both texts (a removed token has no row or column after)."""
    ablation = ablation_of(minilm.load_model().model, text, position, mode, replacement, ablated)
    kept = [i for i in range(len(ablation.tokens)) if mode != "remove" or i != position]
    ix = np.ix_(kept, kept)
    # A replaced token's row and column say both words: "tired→wide".
    before_labels = [
        f"{ablation.tokens[i]}→{ablation.tokens_after[i]}"
        if mode == "replace" and i == position
        else ablation.tokens[i]
        for i in kept
    ]
    after_labels = list(ablation.tokens_after)
    options = {
        "before": (
            ablation.weights_before[layer, head],
            list(ablation.tokens),
            "Before",
            "weights",
        ),
        "after": (ablation.weights_after[layer, head][ix], after_labels, "After", "weights"),
        "difference": (
            ablation.difference[layer, head][ix],
            before_labels,
            "After − before",
            "scores",
        ),
    }
    values, labels, title, kind = options[which]
    if ablation.head is not None:
        title += f" removing layer {ablation.head[0] + 1}, head {ablation.head[1] + 1}"
    return heatmaps.heatmap(
        values,
        row_labels=labels,
        col_labels=labels,
        kind=kind,
        title=f"{title}: layer {layer + 1}, head {head + 1}",
        height=None if len(labels) <= 24 else 720,
    )


def token_change_figure(
    text: str, position: int, mode: str, replacement: str, ablated: tuple[int, int]
) -> go.Figure:
    """How far each token's last-layer vector turned: 1 - cosine(before, after)."""
    ablation = ablation_of(minilm.load_model().model, text, position, mode, replacement, ablated)
    change = np.nan_to_num(ablation.token_change, nan=0.0)
    labels = [f"{i + 1} · {t}" for i, t in enumerate(ablation.tokens)]
    colors = ["#e15759" if i == ablation.position else "#4e79a7" for i in range(len(labels))]
    data = [
        {
            "type": "bar",
            "x": labels,
            "y": change,
            "marker": {"color": colors},
            "hovertemplate": "%{x}: 1 − cos = %{y:.4f}<extra></extra>",
        }
    ]
    layout = {
        "title": {
            "text": "How much each token's final vector turned (1 − cosine)",
            "font": {"size": theme.font_size() + 3},
        },
        "height": 320,
        "font": {"size": theme.font_size()},
        "xaxis": {"title": {"text": "token"}, "tickangle": -45},
        "yaxis": {"title": {"text": "1 − cos(before, after)"}, "rangemode": "tozero"},
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
    }
    return go.Figure({"data": data, "layout": layout}, _validate=False)
