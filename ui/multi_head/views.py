"""The multi-head page's own pictures: head colours, the split into heads, shapes along the flow.

Every head has one colour everywhere on the page: the columns it owns in Q, K, V and the concat,
the rows it owns in W_Q, W_K, W_V, the columns it owns in W_O, and its box in the flow diagram.
Arrays come in computed (by attention_core); these functions only lay them out, plus the
display-only averages and differences that the pictures themselves show.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

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
from attention_core.reference import (
    TORCH_INSTALL_COMMAND,
    TorchComparison,
    TorchNotInstalledError,
    compare_with_torch,
    token_embeddings,
)
from ui.widgets import compare, describe, heatmaps, render, steps, theme
from ui.widgets.editors import MatrixInput, matrix_editor
from ui.widgets.state import PageState, write_url_after_fragment

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

# Okabe & Ito's palette, made to stay apart for protanopia, deuteranopia and tritanopia
# (tests/test_chart_access.py checks every pair; Tableau 10's red and green, used before, merge
# for deuteranopes). Its black is grey here, to show on the dark theme too.
HEAD_COLORS = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#999999",
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


@dataclass(frozen=True)
class TokenInput:
    """The widgets of one token list: a sentence box, or a count slider of numbered tokens."""

    sentence_name: str
    sentence_label: str
    default_sentence: str
    count_name: str
    count_label: str
    default_count: int
    prefix: str


QUERY_TOKENS = TokenInput(
    "sentence", "Sentence (queries)", DEFAULT_SENTENCE, "n", "Number of tokens", 6, "t"
)
KV_TOKENS = TokenInput(
    "kv_sentence",
    "Second sentence (keys and values)",
    DEFAULT_KV_SENTENCE,
    "n_kv",
    "Number of key/value tokens",
    4,
    "s",
)


def token_input(view: PageState, source: str, spec: TokenInput) -> list[str]:
    """The tokens typed as a sentence or counted (`source`), any problem shown under the box."""
    if source == "sentence":
        sentence = st.text_input(
            spec.sentence_label,
            key=view.text_key(spec.sentence_name, spec.default_sentence, max_chars=200),
            max_chars=200,
        )
        tokens, problem = tokens_from_sentence(sentence, spec.default_sentence)
    else:
        count = st.slider(
            spec.count_label,
            1,
            MAX_TOKENS,
            key=view.int_key(spec.count_name, spec.default_count, lo=1, hi=MAX_TOKENS),
        )
        tokens, problem = numbered_tokens(count, spec.prefix), None
    if problem:
        st.error(problem, icon=":material/edit_off:")
    return tokens


def numbered_tokens(count: int, prefix: str) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(count)]


def labelled_radio(
    view: PageState, label: str, name: str, labels: dict[str, str], default: str
) -> str:
    """A horizontal radio over `labels` (value → what it shows), kept in the link as `name`."""
    return st.radio(
        label,
        labels,
        format_func=labels.get,
        horizontal=True,
        key=view.choice_key(name, default, list(labels)),
    )


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
        render.show(
            render.cached(
                heatmaps.heatmap,
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
    stride: int | None = None,
) -> list[dict]:
    """Plotly shapes framing each head's `width // num_heads` columns (along="x") or rows ("y"),
    head h's starting at h · `stride` (default: right after the previous head's).

    Plain dicts, laid out with the rest of the figure: plotly's `add_shape` copies every
    existing shape on each call, which made this page's reruns slow.
    """
    d_head = width // num_heads
    step = stride or d_head
    boxes = []
    for h in range(num_heads):
        start, stop = h * step - 0.5, h * step + d_head - 0.5
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


def projections_figure(
    weights: Sequence[tuple[str, np.ndarray]], num_heads: int, *, heads_on: str
) -> go.Figure:
    """`(d_model, d_model)` projections side by side (nn.Linear layout), one shared scale,
    each head's part framed in its colour.

    W_Q, W_K, W_V: head h owns output rows h·d_head..(h+1)·d_head-1 (heads_on="rows");
    W_O: head h's concat features meet columns h·d_head.. (heads_on="cols").
    """
    count = len(weights)
    d_model = weights[0][1].shape[0]
    reach = max(float(np.abs(w).max()) for _, w in weights) or 1.0
    along = "y" if heads_on == "rows" else "x"
    panels = heatmaps.panel_domains(count, columns=count, x_gap=0.08, y_gap=0.0)
    traces, layout, shapes, titles = [], {}, [], []
    for index, ((name, matrix), (suffix, x_domain, _)) in enumerate(
        zip(weights, panels, strict=True)
    ):
        traces.append(_projection_trace(name, matrix, suffix))
        layout.update(_projection_axes(d_model, suffix, x_domain, first=index == 0))
        shapes += head_boxes(
            num_heads,
            d_model,
            along=along,
            span=(-0.5, d_model - 0.5),
            xref=f"x{suffix}",
            yref=f"y{suffix}",
        )
        titles.append(_title_below(f"<b>{name}</b> {shape_text(matrix.shape)}", x_domain))
    layout.update(
        coloraxis={
            "colorscale": theme.DIVERGING_COLORS,
            "cmin": -reach,
            "cmax": reach,
            "colorbar": {"thickness": 12, "len": 0.9},
        },
        shapes=shapes,
        annotations=titles,
        height=int(min(460, 200 + (300 if count == 1 else 220) * min(1.0, d_model / 16))),
        margin={"l": 10, "r": 10, "t": 60, "b": 40},
        font={"size": theme.font_size()},
    )
    return render.figure(traces, layout)


def _projection_trace(name: str, matrix: np.ndarray, suffix: str) -> dict:
    """One weight matrix `(out, in)` as a heatmap on axes `x{suffix}`, `y{suffix}`; the hover
    names the output and input feature (from 1), small matrices print their numbers."""
    rows, cols = matrix.shape
    annotate = rows <= 6
    trace = {
        "type": "heatmap",
        "z": matrix.astype(np.float32),
        "x": np.arange(cols),
        "y": np.arange(rows),
        "xaxis": f"x{suffix}",
        "yaxis": f"y{suffix}",
        "coloraxis": "coloraxis",
        "xgap": 1 if annotate else 0,
        "ygap": 1 if annotate else 0,
        "hovertemplate": (
            f"{name}: output feature %{{customdata[0]}}, input feature %{{customdata[1]}}"
            "<br>value: %{z:.4f}<extra></extra>"
        ),
        "customdata": np.stack(
            np.meshgrid(np.arange(1, rows + 1), np.arange(1, cols + 1), indexing="ij"), axis=-1
        ),
    }
    if annotate:
        trace["text"] = [[describe.format_number(v) for v in row] for row in matrix]
        trace["texttemplate"] = "%{text}"
        trace["textfont"] = {"size": theme.font_size()}
    return trace


def _projection_axes(d_model: int, suffix: str, x_domain: list[float], *, first: bool) -> dict:
    """A square panel's axes: input features across the top, output features down."""
    ticks = list(range(0, d_model, max(1, d_model // 16)))
    axis = {
        "tickvals": ticks,
        "ticktext": [str(t + 1) for t in ticks],
        "tickfont": {"size": theme.font_size() - 2},
    }
    return {
        f"xaxis{suffix}": {
            **axis,
            "domain": x_domain,
            "anchor": f"y{suffix}",
            "side": "top",
            "title": {"text": "input feature →"},
            "constrain": "domain",
        },
        f"yaxis{suffix}": {
            **axis,
            "anchor": f"x{suffix}",
            "autorange": "reversed",
            "scaleanchor": f"x{suffix}",
            "constrain": "domain",
            **({"title": {"text": "← output feature"}} if first else {}),
        },
    }


def _title_below(text: str, x_domain: list[float]) -> dict:
    """A panel title under the panel, centred on its x domain."""
    return {
        "text": text,
        "x": (x_domain[0] + x_domain[1]) / 2,
        "y": 0,
        "xref": "paper",
        "yref": "paper",
        "xanchor": "center",
        "yanchor": "top",
        "yshift": -4,
        "showarrow": False,
        "font": {"size": theme.font_size() + 1},
    }


def banded_matrix_figure(
    matrix: np.ndarray,
    num_heads: int,
    *,
    tokens: Sequence[str],
    title: str,
) -> go.Figure:
    """A `(pos, d_model)` matrix (rows = tokens) with each head's columns framed in its colour."""
    pos, d_model = matrix.shape
    fig = heatmaps.heatmap(
        matrix,
        row_labels=list(tokens),
        col_labels=[f"f{j + 1}" for j in range(d_model)],
        kind="values",
        title=title,
        row_title="query",
        col_title="feature",
        annotate=pos * d_model <= 96,
    )
    return fig.update_layout(
        shapes=head_boxes(num_heads, d_model, along="x", span=(-0.5, pos - 0.5))
    )


# The wide matrix on the left, its split into heads on the right (paper x coordinates).
SPLIT_DOMAINS = ([0.0, 0.55], [0.72, 0.92])


def head_split_figure(
    matrix: np.ndarray, heads: np.ndarray, *, tokens: Sequence[str], name: str
) -> go.Figure:
    """`matrix` `(pos, d_model)` beside `heads` `(head, pos, d_head)` = split_heads(matrix).

    Left: the wide matrix, each head's columns framed in its colour. Right: the same numbers as a
    stack of per-head blocks (the head axis moved in front), framed in the same colours.
    """
    pos, d_model = matrix.shape
    num_heads, _, d_head = heads.shape
    stacked, labels, stride = stack_heads(heads, tokens)
    reach = float(np.nanmax(np.abs(matrix))) or 1.0
    wide, split = _split_traces(matrix, stacked, name, reach)
    layout = {
        **_split_axes(tokens, d_model, d_head, labels),
        "shapes": [
            *head_boxes(num_heads, d_model, along="x", span=(-0.5, pos - 0.5)),
            *head_boxes(
                num_heads,
                num_heads * pos,
                along="y",
                span=(-0.5, d_head - 0.5),
                xref="x2",
                yref="y2",
                stride=stride,
            ),
        ],
        "annotations": [
            *_split_titles(name, matrix.shape, heads.shape),
            *_head_labels(num_heads, d_head, pos),
        ],
        "height": int(min(700, max(320, 120 + 18 * stacked.shape[0]))),
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
        "font": {"size": theme.font_size()},
    }
    return render.figure([wide, split], layout)


def stack_heads(heads: np.ndarray, tokens: Sequence[str]) -> tuple[np.ndarray, list[str], int]:
    """`(head, pos, d_head)` as one tall `(head·(pos+1) − 1, d_head)` matrix, a blank (NaN) row
    between heads so they stay visibly apart; its row labels `h2 · cat`; the rows per head
    block including the blank one."""
    num_heads, pos, d_head = heads.shape
    stride = pos + 1
    stacked = np.full((num_heads * stride - 1, d_head), np.nan)
    labels = []
    for h in range(num_heads):
        stacked[h * stride : h * stride + pos] = heads[h]
        labels += [f"h{h + 1} · {t}" for t in tokens] + ([""] if h < num_heads - 1 else [])
    return stacked, labels, stride


def _split_traces(
    matrix: np.ndarray, stacked: np.ndarray, name: str, reach: float
) -> tuple[dict, dict]:
    """The wide matrix (with the colour bar) and the stacked heads, on one diverging scale."""
    common = {
        "type": "heatmap",
        "colorscale": theme.DIVERGING_COLORS,
        "zmin": -reach,
        "zmax": reach,
        "xgap": 1,
        "ygap": 1,
    }
    wide = {
        **common,
        "z": matrix.astype(np.float32),
        "x": np.arange(matrix.shape[1]),
        "y": np.arange(matrix.shape[0]),
        "colorbar": {"thickness": 12, "len": 0.9},
        "hovertemplate": f"{name}: query %{{y}}, feature %{{x}} = %{{z:.4f}}<extra></extra>",
    }
    split = {
        **common,
        "z": stacked.astype(np.float32),
        "x": np.arange(stacked.shape[1]),
        "y": np.arange(stacked.shape[0]),
        "xaxis": "x2",
        "yaxis": "y2",
        "showscale": False,
        "hovertemplate": "%{z:.4f}<extra></extra>",
    }
    return wide, split


def _split_axes(tokens: Sequence[str], d_model: int, d_head: int, labels: list[str]) -> dict:
    few_rows = len(labels) <= 40
    return {
        "xaxis": _feature_axis("feature (d_model) →", d_model, SPLIT_DOMAINS[0]),
        "yaxis": {
            "autorange": "reversed",
            "tickvals": list(range(len(tokens))),
            "ticktext": list(tokens),
        },
        "xaxis2": {
            **_feature_axis("feature in the head (d_head) →", d_head, SPLIT_DOMAINS[1]),
            "anchor": "y2",
        },
        "yaxis2": {
            "anchor": "x2",
            "autorange": "reversed",
            "tickvals": list(range(len(labels))) if few_rows else [],
            "ticktext": labels if few_rows else [],
        },
    }


def _feature_axis(title: str, count: int, domain: list[float]) -> dict:
    """An x axis of `count` features numbered from 1 (numbers hidden past 24)."""
    return {
        "domain": domain,
        "title": {"text": title},
        "tickvals": list(range(count)),
        "ticktext": [str(j + 1) for j in range(count)],
        "showticklabels": count <= 24,
    }


def _split_titles(name: str, shape: Sequence[int], heads_shape: Sequence[int]) -> list[dict]:
    """The two panels' titles, each with the shape of what it shows."""
    return [
        {
            "text": text,
            "x": (domain[0] + domain[1]) / 2,
            "y": 1.0,
            "xref": "paper",
            "yref": "paper",
            "xanchor": "center",
            "yanchor": "bottom",
            "showarrow": False,
            "font": {"size": theme.font_size()},
        }
        for text, domain in zip(
            (
                f"{name}: (pos, d_model) = {shape_text(shape)}",
                f"split_heads({name}):<br>(head, pos, d_head) = {shape_text(heads_shape)}",
            ),
            SPLIT_DOMAINS,
            strict=True,
        )
    ]


def _head_labels(num_heads: int, d_head: int, pos: int) -> list[dict]:
    """h1, h2, ... under each head's columns of the wide matrix (up to 16 heads)."""
    if num_heads > 16:
        return []
    return [
        {
            # Yellow or sky-blue text would fail 4.5:1 on white: the colour goes in a swatch,
            # the label in the theme's text colour.
            "text": f"<span style='color:{head_color(h)}'>■</span> h{h + 1}",
            "x": (h + 0.5) * d_head - 0.5,
            "y": pos - 0.5,
            "xref": "x",
            "yref": "y",
            "yanchor": "top",
            "yshift": -4,
            "showarrow": False,
            "font": {"size": theme.font_size()},
        }
        for h in range(num_heads)
    ]


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
    """Every head's `(q_pos, k_pos)` weights as small multiples, their average as the last panel,
    the zoomed head's title in bold: one row when they fit in five panels, else four a row."""
    num_heads = weights.shape[0]
    panels = np.concatenate([weights, average_over_heads(weights)[None]])
    return heatmaps.heatmap_grid(
        panels,
        titles=[*head_names(num_heads), "average of the heads"],
        row_labels=query_labels,
        col_labels=key_labels,
        columns=len(panels) if len(panels) <= 5 else 4,
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


# -- the same as torch ----------------------------------------------------------------------------


def torch_installed() -> bool:
    """Whether torch can be imported, found out without importing it (190 MB and seconds)."""
    return importlib.util.find_spec("torch") is not None


@st.cache_resource(show_spinner="Importing torch, once for the whole server…")
def load_torch() -> ModuleType:
    """torch, imported once per process under the cache's lock: no session can meet it half
    imported, and a plain visit to the page never pays for it."""
    try:
        import torch
    except ImportError:
        raise TorchNotInstalledError() from None
    return torch


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
    load_torch()
    params = init_multi_head_params(d_model, num_heads, seed)
    k_len = (x_q if x_kv is None else x_kv).shape[0]
    mask = causal_mask(x_q.shape[0], k_len) if causal else None
    computed = multi_head_attention(x_q, x_kv, params=params, num_heads=num_heads, mask=mask)
    return compare_with_torch(computed, params, num_heads, mask)


@st.fragment
def compare_heads(
    view: PageState, weights: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str]
) -> None:
    """Two heads' weights, `weights` `(head, q_pos, k_pos)`, side by side and their difference."""
    box = compare.opened(view, label="Compare two heads")
    if box is not None:
        with box:
            heads = list(range(1, weights.shape[0] + 1))
            first, second = st.columns(2)
            a, b = (
                column.selectbox(
                    f"Head {letter}", heads, format_func=lambda h: f"head {h}",
                    key=view.choice_key(f"cmp_{letter.lower()}", min(default, len(heads)), heads),
                )
                for column, letter, default in ((first, "A", 1), (second, "B", 2))
            )  # fmt: skip
            compare.show(weights[a - 1], weights[b - 1], names=(f"head {a}", f"head {b}"),
                          query_labels=query_labels, key_labels=key_labels,
                          filename=f"multi-head-compare-{a}-{b}")  # fmt: skip
    write_url_after_fragment(view)


@st.fragment
def torch_parity(
    view: PageState,
    x_q: np.ndarray,
    x_kv: np.ndarray | None,
    sizes: tuple[int, int, int],
    causal: bool,
) -> None:
    """Our output and weights beside torch.nn.MultiheadAttention's, once the reader asks for it
    (`sizes` = d_model, heads, seed); how to install torch when it is missing."""
    if not torch_installed():
        _show_torch_missing(TorchNotInstalledError())
        return
    asked = st.toggle(
        "Compare with torch.nn.MultiheadAttention",
        key=view.key("torch"),
        help="Runs this example through torch. The server imports torch the first time anyone "
        "asks (a few seconds).",
    )
    if not asked:
        return
    try:
        comparison = torch_comparison(x_q, x_kv, *sizes, causal)
    except TorchNotInstalledError as error:
        _show_torch_missing(error)
        return
    st.markdown(
        "`torch.nn.MultiheadAttention(batch_first=True)` loaded with the same W_Q, W_K, W_V, "
        f"W_O and biases, run in {comparison.dtype} (torch {comparison.torch_version}), "
        "per-head weights with `average_attn_weights=False`:"
    )
    left, right = st.columns(2)
    left.metric("largest |ours − torch|, output", f"{comparison.output_difference:.1e}")
    right.metric("largest |ours − torch|, weights", f"{comparison.weights_difference:.1e}")
    st.caption("Differences near 1e-7 are float32 rounding: our NumPy code computes in float64.")


def _show_torch_missing(error: TorchNotInstalledError) -> None:
    st.info(str(error), icon=":material/download:")
    st.code(TORCH_INSTALL_COMMAND, language="bash")


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
    with st.expander(f"Write out one query's calculation in head {head + 1}"):
        explain_query(view, one, (q, k, v), query_labels, key_labels)


@st.fragment
def explain_query(
    view: PageState,
    one: AttentionSteps,
    qkv: tuple[np.ndarray, np.ndarray, np.ndarray],
    query_labels: Sequence[str],
    key_labels: Sequence[str],
) -> None:
    """One query's row of one head written out; picking another query reruns only this."""
    rows = list(range(1, len(query_labels) + 1))
    row = st.selectbox(
        "Query",
        rows,
        format_func=lambda i: f"{i} · {query_labels[i - 1]}",
        key=view.choice_key("row", 1, rows),
    )
    q, k, v = qkv
    steps.explain_row(one, row - 1, q=q, k=k, v=v, query_labels=query_labels, key_labels=key_labels)
    write_url_after_fragment(view)
