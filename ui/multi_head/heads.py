"""One head at a time: a head zoomed through the scaled dot-product steps, one query's row of it
written out, and two heads compared side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

from attention_core import AttentionSteps, MultiHeadSteps
from ui.multi_head.labels import shape_text
from ui.widgets import compare, steps
from ui.widgets.state import PageState, write_url_after_fragment


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


@st.fragment
def compare_heads(
    view: PageState, weights: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str]
) -> None:
    """Two heads' weights, `weights` `(head, q_pos, k_pos)`, side by side and their difference."""
    box = compare.opened(view, label="Compare two heads")
    if box is not None:
        with box:
            head_numbers = list(range(1, weights.shape[0] + 1))
            first, second = st.columns(2)
            a, b = (
                column.selectbox(
                    f"Head {letter}",
                    head_numbers,
                    format_func=lambda h: f"head {h}",
                    key=view.choice_key(
                        f"cmp_{letter.lower()}", min(default, len(head_numbers)), head_numbers
                    ),
                )
                for column, letter, default in ((first, "A", 1), (second, "B", 2))
            )
            compare.show(
                weights[a - 1],
                weights[b - 1],
                names=(f"head {a}", f"head {b}"),
                query_labels=query_labels,
                key_labels=key_labels,
                filename=f"multi-head-compare-{a}-{b}",
            )
    write_url_after_fragment(view)
