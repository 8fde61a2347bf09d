"""The multi-head page's own pictures: head colours, the split into heads, shapes along the flow.

Every head has one colour everywhere on the page: the columns it owns in Q, K, V and the concat,
the rows it owns in W_Q, W_K, W_V, the columns it owns in W_O, and its box in the flow diagram.
Arrays come in computed (by attention_core); these functions only lay them out, plus the
display-only averages and differences that the pictures themselves show.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import (
    AttentionSteps,
    MultiHeadSteps,
    attention_entropy,
    causal_mask,
    head_statistics,
    init_multi_head_params,
    multi_head_attention,
)
from attention_core.reference import TorchComparison, compare_with_torch, token_embeddings
from ui import charts, steps
from ui.editors import MatrixInput, matrix_editor
from ui.state import PageState, is_presenting

DEFAULT_SENTENCE = "the cat sat on the mat"
DEFAULT_KV_SENTENCE = "a dog slept there"
# 12 tokens keep every pattern readable as a small multiple; 64 features is a small real model.
MAX_TOKENS = 12
MAX_SEED = 9_999
D_MODELS = (4, 8, 12, 16, 24, 32, 48, 64)
# X can be typed in when it fits in a link (ui.state.MAX_URL_MATRIX_CELLS) and on a screen.
MAX_EDITABLE_TOKENS = 8
MAX_EDITABLE_D_MODEL = 8
TOKEN_SOURCES = {"sentence": "from a sentence", "count": "a number of tokens"}
ATTENTION_KINDS = {"self": "self-attention", "cross": "cross-attention"}

# Tableau 10: distinct hues that stay apart for the common colour-vision deficiencies.
HEAD_COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
# Beyond this many heads the flow diagram draws the first and last ones and "…" between.
MAX_DRAWN_HEADS = 6

STAT_COLUMNS = {
    "mean_entropy": "entropy (nats)",
    "mean_max_weight": "largest weight",
    "previous_token": "→ previous token",
    "self_token": "→ itself",
    "first_token": "→ first token",
}


# -- controls -------------------------------------------------------------------------------------


def tokens_from_sentence(
    sentence: str, fallback: str = DEFAULT_SENTENCE
) -> tuple[list[str], str | None]:
    """The words of `sentence` and, if it had to be changed, a message saying how."""
    words = str(sentence).split()
    if not words:
        return fallback.split(), (
            f"The sentence is empty: type a few words separated by spaces. Showing “{fallback}” "
            "meanwhile."
        )
    if len(words) > MAX_TOKENS:
        return words[:MAX_TOKENS], (
            f"The sentence has {len(words)} words; this page shows at most {MAX_TOKENS}, so only "
            f"the first {MAX_TOKENS} are used."
        )
    return words, None


def numbered_tokens(count: int, prefix: str) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(count)]


def head_counts(d_model: int) -> list[int]:
    """The numbers of heads that split d_model evenly: its divisors."""
    return [h for h in range(1, d_model + 1) if d_model % h == 0]


def keep_heads_valid(view: PageState, name: str, options: Sequence[int]) -> None:
    """After d_model changes, move a head count that no longer divides it to the nearest one."""
    current = st.session_state.get(view.key(name))
    if current is not None and current not in options:
        view.set(name, min(options, key=lambda h: (abs(h - current), h)))


def editable(num_tokens: int, d_model: int) -> bool:
    return num_tokens <= MAX_EDITABLE_TOKENS and d_model <= MAX_EDITABLE_D_MODEL


def linked_matrix_editor(
    view: PageState,
    url_name: str,
    tokens: Sequence[str],
    d_model: int,
    seed: int,
    *,
    name: str,
    small: bool,
) -> MatrixInput:
    """The input matrix: token_embeddings(tokens, d_model, seed), typed over when `small`.

    A hand-edited matrix goes into the link as `url_name`; a link's matrix is used while the
    tokens, d_model and seed are the ones it was made for (other values start from the
    embeddings again).
    """
    generated = token_embeddings(tokens, d_model, seed)  # (tokens, d_model)
    labels = tuple(tokens)
    if not small:
        view.put_matrix(url_name, None)
        charts.show(
            cached(
                charts.heatmap,
                generated,
                row_labels=list(tokens),
                col_labels=[f"f{j + 1}" for j in range(d_model)],
                kind="values",
                title=f"{name} {shape_text(generated.shape)}",
                col_title="feature",
            ),
            filename=f"multi-head-{url_name}",
        )
        st.caption(
            f"{name} can be typed in for up to {MAX_EDITABLE_TOKENS} tokens and d_model up to "
            f"{MAX_EDITABLE_D_MODEL}."
        )
        return MatrixInput(generated, labels, None, stale=False)
    context = (labels, d_model, seed)
    link_key = f"{view.key(url_name)}.link"
    if link_key not in st.session_state:
        linked = view.matrix_from_url(
            url_name, max_rows=MAX_EDITABLE_TOKENS, max_cols=MAX_EDITABLE_D_MODEL
        )
        if linked is not None and linked.shape != generated.shape:
            view.notices.append(
                f"The link's `{url_name}` has shape {shape_text(linked.shape)} but {name} here is "
                f"{shape_text(generated.shape)} (tokens, d_model): it was ignored."
            )
            linked = None
        st.session_state[link_key] = (context, linked)
    linked_context, linked = st.session_state[link_key]
    default = linked if linked is not None and linked_context == context else generated
    st.caption(
        f"{name} {shape_text(generated.shape)}: type over any number; the link keeps your "
        "values. Reset goes back to the example's."
    )
    typed = matrix_editor(
        view.key(url_name),
        default,
        labels=list(tokens),
        name=name,
        column_prefix="f",
        editable_labels=False,
    )
    values = typed.values
    view.put_matrix(url_name, None if np.array_equal(values, generated) else values)
    return typed


def cached(builder: Callable[..., go.Figure], *args: Any, **options: Any) -> go.Figure:
    """`builder(*args, **options)`, built once per distinct input (and presenter mode).

    Plotly validates every property it is given, so a figure costs tens of milliseconds; when
    only the zoomed head or the causal toggle changes, the other figures come from here.
    """
    digest = hashlib.sha256(
        pickle.dumps((builder.__module__, builder.__name__, args, options, is_presenting()))
    ).hexdigest()
    return _cached_figure(digest, builder, args, options)


@st.cache_resource(max_entries=256, show_spinner=False)
def _cached_figure(
    digest: str, _builder: Callable[..., go.Figure], _args: tuple, _options: dict
) -> go.Figure:
    # Only `digest` is hashed. Sharing one figure is safe: st.plotly_chart only serialises it.
    return _builder(*_args, **_options)


def head_color(head: int) -> str:
    return HEAD_COLORS[head % len(HEAD_COLORS)]


def head_names(num_heads: int) -> list[str]:
    return [f"head {h + 1}" for h in range(num_heads)]


def shape_text(shape: Sequence[int]) -> str:
    """(6, 12) for a shape, the way the page writes shapes at every arrow."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def head_boxes(
    num_heads: int,
    width: int,
    *,
    along: str,
    span: tuple[float, float],
    xref: str = "x",
    yref: str = "y",
) -> list[dict]:
    """Plotly shapes framing each head's `width // num_heads` columns (along="x") or rows ("y").

    Built as plain dicts and added in one `update_layout`: plotly's `add_shape` copies every
    existing shape on each call, which made this page's reruns slow.
    """
    d_head = width // num_heads
    boxes = []
    for h in range(num_heads):
        start, stop = h * d_head - 0.5, (h + 1) * d_head - 0.5
        box = (
            {"x0": start, "x1": stop, "y0": span[0], "y1": span[1]}
            if along == "x"
            else {"x0": span[0], "x1": span[1], "y0": start, "y1": stop}
        )
        boxes.append(
            {
                "type": "rect",
                "xref": xref,
                "yref": yref,
                "line": {"color": head_color(h), "width": 3},
                "fillcolor": "rgba(0,0,0,0)",
                **box,
            }
        )
    return boxes


def _add_boxes(fig: go.Figure, boxes: list[dict]) -> go.Figure:
    fig.update_layout(shapes=[*fig.layout.shapes, *boxes])
    return fig


def projections_figure(
    weights: Sequence[tuple[str, np.ndarray]], num_heads: int, *, heads_on: str
) -> go.Figure:
    """`(d_model, d_model)` projections side by side (nn.Linear layout), one shared scale,
    each head's part framed in its colour.

    W_Q, W_K, W_V: head h owns output rows h·d_head..(h+1)·d_head-1 (heads_on="rows");
    W_O: head h's concat features meet columns h·d_head.. (heads_on="cols").
    Laid out in one layout dict (one `charts.heatmap` per matrix cost ~40 ms each).
    """
    count = len(weights)
    d_model = weights[0][1].shape[0]
    reach = max(float(np.abs(w).max()) for _, w in weights) or 1.0
    annotate = d_model <= 6
    font = charts.font_size()
    ticks = list(range(0, d_model, max(1, d_model // 16)))
    gap = 0.08
    width = (1 - gap * (count - 1)) / count
    along = "y" if heads_on == "rows" else "x"
    traces, layout, shapes, titles = [], {}, [], []
    for index, (name, matrix) in enumerate(weights):
        suffix = "" if index == 0 else str(index + 1)
        x0 = index * (width + gap)
        heat = go.Heatmap(
            z=matrix.astype(np.float32),
            x=np.arange(d_model),
            y=np.arange(d_model),
            xaxis=f"x{suffix}",
            yaxis=f"y{suffix}",
            coloraxis="coloraxis",
            xgap=1 if annotate else 0,
            ygap=1 if annotate else 0,
            hovertemplate=(
                f"{name}: output feature %{{customdata[0]}}, input feature %{{customdata[1]}}"
                "<br>value: %{z:.4f}<extra></extra>"
            ),
            customdata=np.stack(
                np.meshgrid(np.arange(1, d_model + 1), np.arange(1, d_model + 1), indexing="ij"),
                axis=-1,
            ),
        )
        if annotate:
            heat.text = [[charts.format_number(v) for v in row] for row in matrix]
            heat.texttemplate = "%{text}"
            heat.textfont = {"size": font}
        traces.append(heat)
        axis = {
            "tickvals": ticks,
            "ticktext": [str(t + 1) for t in ticks],
            "tickfont": {"size": font - 2},
        }
        layout[f"xaxis{suffix}"] = {
            **axis,
            "domain": [max(0.0, round(x0, 9)), min(1.0, round(x0 + width, 9))],
            "anchor": f"y{suffix}",
            "side": "top",
            "title": {"text": "input feature →"},
            "constrain": "domain",
        }
        layout[f"yaxis{suffix}"] = {
            **axis,
            "anchor": f"x{suffix}",
            "autorange": "reversed",
            "scaleanchor": f"x{suffix}",
            "constrain": "domain",
            **({"title": {"text": "← output feature"}} if index == 0 else {}),
        }
        shapes += head_boxes(
            num_heads,
            d_model,
            along=along,
            span=(-0.5, d_model - 0.5),
            xref=f"x{suffix}",
            yref=f"y{suffix}",
        )
        titles.append(
            {
                "text": f"<b>{name}</b> {shape_text(matrix.shape)}",
                "x": x0 + width / 2,
                "y": 0,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "center",
                "yanchor": "top",
                "yshift": -4,
                "showarrow": False,
                "font": {"size": font + 1},
            }
        )
    layout.update(
        coloraxis={
            "colorscale": charts.DIVERGING_COLORS,
            "cmin": -reach,
            "cmax": reach,
            "colorbar": {"thickness": 12, "len": 0.9},
        },
        shapes=shapes,
        annotations=titles,
        height=int(min(460, 200 + (300 if count == 1 else 220) * min(1.0, d_model / 16))),
        margin={"l": 10, "r": 10, "t": 60, "b": 40},
        font={"size": font},
    )
    return go.Figure(data=traces, layout=layout)


def banded_matrix_figure(
    matrix: np.ndarray,
    num_heads: int,
    *,
    tokens: Sequence[str],
    title: str,
) -> go.Figure:
    """A `(pos, d_model)` matrix (rows = tokens) with each head's columns framed in its colour."""
    pos, d_model = matrix.shape
    fig = charts.heatmap(
        matrix,
        row_labels=list(tokens),
        col_labels=[f"f{j + 1}" for j in range(d_model)],
        kind="values",
        title=title,
        row_title="query",
        col_title="feature",
        annotate=pos * d_model <= 96,
    )
    return _add_boxes(fig, head_boxes(num_heads, d_model, along="x", span=(-0.5, pos - 0.5)))


def head_split_figure(
    matrix: np.ndarray, heads: np.ndarray, *, tokens: Sequence[str], name: str
) -> go.Figure:
    """`matrix` `(pos, d_model)` beside `heads` `(head, pos, d_head)` = split_heads(matrix).

    Left: the wide matrix, each head's columns framed in its colour. Right: the same numbers as a
    stack of per-head blocks (the head axis moved in front), framed in the same colours.
    """
    pos, d_model = matrix.shape
    num_heads, _, d_head = heads.shape
    # One spare row between blocks keeps the heads visibly apart.
    stride = pos + 1
    stacked = np.full((num_heads * stride - 1, d_head), np.nan)
    labels = []
    for h in range(num_heads):
        stacked[h * stride : h * stride + pos] = heads[h]
        labels += [f"h{h + 1} · {t}" for t in tokens] + ([""] if h < num_heads - 1 else [])
    reach = float(np.nanmax(np.abs(matrix))) or 1.0
    common = {
        "colorscale": charts.DIVERGING_COLORS,
        "zmin": -reach,
        "zmax": reach,
        "xgap": 1,
        "ygap": 1,
    }
    wide = go.Heatmap(
        z=matrix.astype(np.float32),
        x=np.arange(d_model),
        y=np.arange(pos),
        colorbar={"thickness": 12, "len": 0.9},
        hovertemplate=f"{name}: query %{{y}}, feature %{{x}} = %{{z:.4f}}<extra></extra>",
        **common,
    )
    split = go.Heatmap(
        z=stacked.astype(np.float32),
        x=np.arange(d_head),
        y=np.arange(stacked.shape[0]),
        xaxis="x2",
        yaxis="y2",
        showscale=False,
        hovertemplate="%{z:.4f}<extra></extra>",
        **common,
    )
    few_rows = stacked.shape[0] <= 40
    font = charts.font_size()
    split_boxes = [
        {
            "type": "rect",
            "xref": "x2",
            "yref": "y2",
            "x0": -0.5,
            "x1": d_head - 0.5,
            "y0": h * stride - 0.5,
            "y1": h * stride + pos - 0.5,
            "line": {"color": head_color(h), "width": 3},
        }
        for h in range(num_heads)
    ]
    head_labels = [
        {
            "text": f"h{h + 1}",
            "x": (h + 0.5) * d_head - 0.5,
            "y": pos - 0.5,
            "xref": "x",
            "yref": "y",
            "yanchor": "top",
            "yshift": -4,
            "showarrow": False,
            "font": {"color": head_color(h), "size": font},
        }
        for h in range(num_heads)
        if num_heads <= 16
    ]
    titles = [
        {
            "text": text,
            "x": x,
            "y": 1.0,
            "xref": "paper",
            "yref": "paper",
            "xanchor": "center",
            "yanchor": "bottom",
            "showarrow": False,
            "font": {"size": font},
        }
        for text, x in (
            (f"{name}: (pos, d_model) = {shape_text(matrix.shape)}", 0.275),
            (f"split_heads({name}):<br>(head, pos, d_head) = {shape_text(heads.shape)}", 0.82),
        )
    ]
    layout = {
        "xaxis": {
            "domain": [0.0, 0.55],
            "title": {"text": "feature (d_model) →"},
            "tickvals": list(range(d_model)),
            "ticktext": [str(j + 1) for j in range(d_model)],
            "showticklabels": d_model <= 24,
        },
        "yaxis": {
            "autorange": "reversed",
            "tickvals": list(range(pos)),
            "ticktext": list(tokens),
        },
        "xaxis2": {
            "domain": [0.72, 0.92],
            "anchor": "y2",
            "title": {"text": "feature in the head (d_head) →"},
            "tickvals": list(range(d_head)),
            "ticktext": [str(j + 1) for j in range(d_head)],
            "showticklabels": d_head <= 24,
        },
        "yaxis2": {
            "anchor": "x2",
            "autorange": "reversed",
            "tickvals": list(range(len(labels))) if few_rows else [],
            "ticktext": labels if few_rows else [],
        },
        "shapes": [
            *head_boxes(num_heads, d_model, along="x", span=(-0.5, pos - 0.5)),
            *split_boxes,
        ],
        "annotations": [*titles, *head_labels],
        "height": int(min(700, max(320, 120 + 18 * stacked.shape[0]))),
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
        "font": {"size": font},
    }
    return go.Figure(data=[wide, split], layout=layout)


def flow_diagram(
    *, q_len: int, k_len: int, d_model: int, num_heads: int, cross: bool, causal: bool
) -> str:
    """Graphviz DOT of the whole computation, with the shape of what flows on every arrow."""
    d_head = d_model // num_heads
    q_shape, k_shape = shape_text((q_len, d_model)), shape_text((k_len, d_model))
    br = "\\n"  # a line break inside a DOT label
    lines = [
        "digraph {",
        "rankdir=LR; nodesep=0.15; ranksep=0.3;",
        'node [shape=box, style="rounded,filled", fillcolor="#f7fbff", fontname="Helvetica", '
        "fontsize=14, margin=0.08];",
        'edge [fontname="Helvetica", fontsize=12, color="#555555"];',
        f'xq [label="{"X (queries)" if cross else "X"}", fillcolor="#e8e8e8"];',
    ]
    kv_source = "xq"
    if cross:
        lines.append(f'xkv [label="X_kv{br}(keys, values)", fillcolor="#e8e8e8"];')
        kv_source = "xkv"
    lines += [
        f'Q [label="Q = X W_Qᵀ + b_Q"]; xq -> Q [label="{q_shape}"];',
        f'K [label="K = X W_Kᵀ + b_K"]; {kv_source} -> K [label="{k_shape}"];',
        f'V [label="V = X W_Vᵀ + b_V"]; {kv_source} -> V [label="{k_shape}"];',
        f'split [label="split_heads{br}(pos, d_model) →{br}(head, pos, d_head)"];',
        f'Q -> split [label="{q_shape}"]; K -> split [label="{k_shape}"]; '
        f'V -> split [label="{k_shape}"];',
    ]
    drawn = (
        list(range(num_heads))
        if num_heads <= MAX_DRAWN_HEADS
        else [*range(MAX_DRAWN_HEADS - 1), num_heads - 1]
    )
    mask_text = f"{br}causal mask" if causal else ""
    into_head = (
        f"q {shape_text((q_len, d_head))}{br}k, v {shape_text((k_len, d_head))}"
        if cross
        else f"q, k, v {shape_text((q_len, d_head))}"
    )
    for h in drawn:
        color = head_color(h)
        lines += [
            f'h{h} [label="head {h + 1}{br}softmax(q kᵀ/√{d_head}) v{mask_text}", '
            f'fillcolor="{color}33", color="{color}", penwidth=2];',
            f'split -> h{h} [label="{into_head}", color="{color}"];',
            f'h{h} -> concat [label="{shape_text((q_len, d_head))}", color="{color}"];',
        ]
    if len(drawn) < num_heads:
        lines.append(
            f'more [label="… {num_heads - len(drawn)} more heads", shape=plaintext, style=""];'
        )
        lines.append("split -> more -> concat [style=dotted];")
    lines += [
        f'concat [label="concat{br}{shape_text((num_heads, q_len, d_head))}{br}→ {q_shape}"];',
        f'out [label="output ={br}concat W_Oᵀ + b_O", fillcolor="#e8e8e8"];',
        f'concat -> out [label="{q_shape}"];',
        "}",
    ]
    return "\n".join(lines)


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
) -> go.Figure:
    """Every head's weights as small multiples, and their average as the last panel.

    The conventions of `charts.heatmap_grid` (one fixed 0..1 weight scale, the highlighted panel's
    title in bold, queries down and keys across), laid out by hand in one layout dict: building
    up to 65 subplots through `make_subplots` took most of this page's rerun time.
    """
    num_heads, q_len, k_len = weights.shape
    panels = np.concatenate([weights, average_over_heads(weights)[None]])
    count = panels.shape[0]
    columns = count if count <= 5 else 4
    grid_rows = -(-count // columns)
    titles = [*head_names(num_heads), "average of the heads"]
    small = q_len <= 12 and k_len <= 12
    font = charts.font_size()
    tick_font = {"size": max(8, font - 4)}
    gap_x, gap_y = 0.03, 0.25 / grid_rows
    width = (1 - gap_x * (columns - 1)) / columns
    height = (1 - gap_y * (grid_rows - 1)) / grid_rows
    traces, layout, annotations = [], {}, []
    for index, matrix in enumerate(panels):
        row, col = divmod(index, columns)
        suffix = "" if index == 0 else str(index + 1)
        x0 = col * (width + gap_x)
        y1 = 1 - row * (height + gap_y)
        traces.append(
            go.Heatmap(
                z=matrix.astype(np.float32),
                x=np.arange(k_len),
                y=np.arange(q_len),
                xaxis=f"x{suffix}",
                yaxis=f"y{suffix}",
                coloraxis="coloraxis",
                hovertemplate=(
                    f"{titles[index]}<br>query %{{y}} → key %{{x}}: %{{z:.4f}}<extra></extra>"
                ),
            )
        )
        last_in_column = index + columns >= count
        layout[f"xaxis{suffix}"] = {
            "domain": [max(0.0, round(x0, 9)), min(1.0, round(x0 + width, 9))],
            "anchor": f"y{suffix}",
            "tickvals": list(range(k_len)),
            "ticktext": list(key_labels),
            "showticklabels": small,
            "tickfont": tick_font,
            "constrain": "domain",
            **({"title": {"text": "key"}} if last_in_column else {}),
        }
        layout[f"yaxis{suffix}"] = {
            # Rounding keeps float error (-8e-17) inside plotly's [0, 1] check.
            "domain": [max(0.0, round(y1 - height, 9)), min(1.0, round(y1, 9))],
            "anchor": f"x{suffix}",
            "autorange": "reversed",
            "tickvals": list(range(q_len)),
            "ticktext": list(query_labels),
            # Token labels only on the left edge, so no panel's labels cover its neighbour.
            "showticklabels": small and col == 0,
            "tickfont": tick_font,
            **({"title": {"text": "query"}} if col == 0 else {}),
        }
        annotations.append(
            {
                "text": f"<b>{titles[index]}</b>" if index == highlight else titles[index],
                "x": x0 + width / 2,
                "y": y1,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "center",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": font},
            }
        )
    layout.update(
        coloraxis={
            "colorscale": charts.WEIGHT_COLORS,
            "cmin": 0.0,
            "cmax": 1.0,
            "colorbar": {"thickness": 12},
        },
        annotations=annotations,
        height=min(1800, 60 + grid_rows * (260 if small else 200)),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        font={"size": font},
    )
    return go.Figure(data=traces, layout=layout)


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
    st.dataframe(
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
    return charts.heatmap(
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


@st.cache_data(show_spinner=False, max_entries=64)
def torch_comparison(
    x_q: np.ndarray,
    x_kv: np.ndarray | None,
    d_model: int,
    num_heads: int,
    seed: int,
    causal: bool,
) -> TorchComparison:
    """The page's example run by torch.nn.MultiheadAttention and compared with ours (cached).

    Raises TorchNotInstalledError (not cached) when torch is missing.
    """
    params = init_multi_head_params(d_model, num_heads, seed)
    k_len = (x_q if x_kv is None else x_kv).shape[0]
    mask = causal_mask(x_q.shape[0], k_len) if causal else None
    computed = multi_head_attention(x_q, x_kv, params=params, num_heads=num_heads, mask=mask)
    return compare_with_torch(computed, params, num_heads, mask)


# -- zoom into one head ---------------------------------------------------------------------------


def head_steps(mha: MultiHeadSteps, head: int) -> AttentionSteps:
    """Head `head`'s own AttentionSteps, 2-D (scores `(q_pos, k_pos)`, output `(q_pos, d_head)`)."""
    a = mha.attention
    return AttentionSteps(
        scores=a.scores[head],
        scaled=a.scaled[head],
        masked=a.masked[head],
        weights=a.weights[head],
        output=a.output[head],
        fully_masked=a.fully_masked[head],
        scale=a.scale,
    )


def show_zoomed_head(
    view: PageState,
    mha: MultiHeadSteps,
    head: int,
    *,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
) -> None:
    """Head `head` (from 0) through the scaled dot-product page's step-by-step components."""
    one = head_steps(mha, head)
    q, k, v = mha.q_heads[head], mha.k_heads[head], mha.v_heads[head]
    st.markdown(
        f"Head {head + 1} is ordinary scaled dot-product attention on its slice: "
        f"q `{shape_text(q.shape)}`, k `{shape_text(k.shape)}`, v `{shape_text(v.shape)}`, "
        f"d_head = {q.shape[-1]}. Hover a cell to see how it was computed."
    )
    steps.show_pipeline(
        one,
        q=q,
        k=k,
        v=v,
        query_labels=query_labels,
        key_labels=key_labels,
        key=f"{view.key('zoom')}.h{head + 1}",
        filename=f"multi-head-head{head + 1}",
    )
    rows = list(range(1, len(query_labels) + 1))
    with st.expander(f"Write out one query's calculation in head {head + 1}"):
        row = st.selectbox(
            "Query",
            rows,
            format_func=lambda i: f"{i} · {query_labels[i - 1]}",
            key=view.choice("row", 1, rows),
        )
        steps.explain_row(
            one, row - 1, q=q, k=k, v=v, query_labels=query_labels, key_labels=key_labels
        )
