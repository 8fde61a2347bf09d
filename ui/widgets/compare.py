"""Two views of a pattern side by side: A, B on one fixed 0..1 scale, and B − A on a diverging
scale centred on 0, beside one sentence saying what differs most.

The comparison is opt-in: `opened` draws a closed expander (open in a link as `cmp=1`), and a
page draws its choices and `show` inside it, in a fragment, so a page that nobody compares on
draws no more charts than before.

    @st.fragment
    def compare_heads(view, weights, tokens):
        box = compare.opened(view)
        if box is not None:
            with box:
                a, b = ...  # the page's own two choices, keyed through `view`
                compare.show(weights[a], weights[b], names=(...), query_labels=tokens, ...)
        write_url_after_fragment(view)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError
from attention_core.compare import PatternComparison, compare_patterns
from ui.widgets import describe, heatmaps, render
from ui.widgets.byte_cache import MB, bounded_by_bytes, read_only
from ui.widgets.layout import plain
from ui.widgets.state import PageState

OPEN_PARAM = "cmp"
LABEL = "Compare two views"


def opened(view: PageState, *, label: str = LABEL):
    """A closed expander whose state is in the link (`cmp=1`); its container when open, else None.

    Nothing inside it is drawn (or computed) until a learner opens it.
    """
    box = st.expander(
        label,
        icon=":material/compare:",
        key=view.bool_key(OPEN_PARAM, False),
        on_change="rerun",
    )
    return box if box.open else None


def show(
    a: np.ndarray,
    b: np.ndarray,
    *,
    names: tuple[str, str],
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    filename: str,
) -> PatternComparison | None:
    """Weights `a` and `b`, `(q_pos, k_pos)`, side by side; below, b − a beside the sentence.

    Bad input (shapes that differ, say) shows its message here and returns None.
    """
    query_labels, key_labels = tuple(query_labels), tuple(key_labels)
    try:
        comparison = compared(a, b, query_labels, key_labels, names)
    except AttentionInputError as error:
        st.error(str(error), icon=":material/error:")
        return None
    # Half-width maps, as the pages' other pairs: a third of the page leaves no room for the
    # numbers in the cells.
    for column, pattern, letter, name in zip(
        st.columns(2), (comparison.a, comparison.b), "AB", names, strict=True
    ):
        with column:
            figure = render.cached(
                heatmaps.heatmap,
                pattern,
                row_labels=query_labels,
                col_labels=key_labels,
                kind="weights",
                title=f"{letter}: {name}",
            )
            render.show(figure, filename=f"{filename}-{letter.lower()}")
    difference, words = st.columns(2, vertical_alignment="center")
    with difference:
        render.show(render.cached(difference_figure, comparison), filename=f"{filename}-difference")
    with words:
        st.markdown(
            f":material/compare_arrows: **What differs most.** {plain(comparison.sentence)}"
        )
        st.caption(
            "A and B share the 0..1 colour scale of every weight map. In B − A, blue cells gained "
            "weight and orange cells lost it; white is no change."
        )
    return comparison


def compared(
    a: np.ndarray,
    b: np.ndarray,
    query_labels: tuple[str, ...],
    key_labels: tuple[str, ...],
    names: tuple[str, str],
) -> PatternComparison:
    """`compare_patterns`, kept per distinct input: a fragment rerun (another choice) or another
    viewer of the same link finds it made."""
    return _compared(np.asarray(a), np.asarray(b), query_labels, key_labels, tuple(names))


# A toy page's comparison holds a few KB; the real-model page's at 512 tokens holds three 512²
# float64 maps, 6 MB: two of those beside many small ones. No lane: elementwise arithmetic.
@bounded_by_bytes(16 * MB, name="compare.patterns", lane=None)
def _compared(a, b, query_labels, key_labels, names) -> PatternComparison:
    # Copies: the comparison keeps its patterns, and the caller's arrays stay the caller's
    # (writable if they were, and not changed under the cache by a later write).
    a, b = np.array(a), np.array(b)
    return read_only(compare_patterns(a, b, query_labels, key_labels, names=names))


def difference_figure(comparison: PatternComparison) -> go.Figure:
    """B − A on the diverging scale, symmetric around 0; its text alternative adds the sentence."""
    name_a, name_b = comparison.names
    rows, cols = comparison.difference.shape
    hover = None
    if rows * cols <= heatmaps.MAX_HOVER_TEXT_CELLS:
        a, b = comparison.a, comparison.b
        hover = [
            [f"{name_b} {b[i, j]:.4f} − {name_a} {a[i, j]:.4f}" for j in range(cols)]
            for i in range(rows)
        ]
    figure = heatmaps.heatmap(
        comparison.difference,
        row_labels=comparison.query_labels,
        col_labels=comparison.key_labels,
        kind="values",
        title="B − A",
        hover=hover,
    )
    return describe.attach(
        figure,
        f"{describe.summary(figure)} {comparison.sentence}",
        describe.table(figure),
    )
