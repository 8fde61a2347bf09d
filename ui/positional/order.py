"""Order blindness: a sentence's attention before and after reordering it, its inputs
(embeddings + positions), and the same sentence under two encodings side by side.

The pictures are small annotated heatmaps, a few tokens × a few dimensions (or queries ×
keys), built from `data.blindness` and drawn through `figures.show`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.position_experiments import SENTENCE_ENCODINGS
from ui.positional.data import blindness
from ui.widgets import compare, heatmaps
from ui.widgets.state import PageState, write_url_after_fragment

BLINDNESS_FIGURES = (
    "weights",
    "permuted_weights",
    "output",
    "unpermuted_output",
    "difference",
    "token_embeddings",
    "positions",
    "inputs",
)


def _small_heatmap(
    values: np.ndarray,
    rows: Sequence[str],
    *,
    title: str,
    kind: heatmaps.Kind = "values",
    cols: Sequence[str] | None = None,
    row_title: str = "token",
    col_title: str = "dimension",
    decimals: int = 2,
) -> go.Figure:
    """An annotated heatmap of a few tokens × a few dimensions (or queries × keys)."""
    cols = [f"d{j}" for j in range(values.shape[1])] if cols is None else cols
    return heatmaps.heatmap(
        values,
        row_labels=rows,
        col_labels=cols,
        kind=kind,
        title=title,
        row_title=row_title,
        col_title=col_title,
        decimals=decimals,
    )


def blindness_figure(
    name: str,
    tokens: tuple[str, ...],
    order_kind: str,
    width: int,
    encoding: str,
    seed: int,
    base: float,
) -> go.Figure:
    """One of the order-blindness pictures (`BLINDNESS_FIGURES`): both weight patterns, both
    outputs, the difference, and the inputs (embeddings, positions, their sum)."""
    b = blindness(tokens, order_kind, width, encoding, seed, base)
    words, reordered = " ".join(tokens), " ".join(b.permuted.tokens)
    pattern = {"kind": "weights", "row_title": "query", "col_title": "key"}
    if name == "weights":
        return _small_heatmap(b.weights, tokens, cols=tokens, title=f"Weights: {words}", **pattern)
    if name == "permuted_weights":
        rows = b.permuted.tokens
        return _small_heatmap(
            b.permuted_weights, rows, cols=rows, title=f"Weights: {reordered}", **pattern
        )
    if name == "output":
        return _small_heatmap(b.output, tokens, title=f"Output: {words}")
    if name == "unpermuted_output":
        title = f"Output: {reordered}, rows put back"
        return _small_heatmap(b.unpermuted_output, tokens, title=title)
    if name == "difference":
        return _small_heatmap(b.difference, tokens, title="Difference", decimals=3)
    if name == "token_embeddings":
        return _small_heatmap(b.original.token_embeddings, tokens, title="Token embeddings E")
    if name == "positions":
        return _small_heatmap(
            b.original.positions,
            [f"{p}: {t}" for p, t in enumerate(tokens)],
            title="PE" if encoding == "sinusoidal" else f"Positions ({encoding})",
            row_title="position",
        )
    if name == "inputs":
        return _small_heatmap(b.original.inputs, tokens, title="Input X = E + PE")
    raise ValueError(f"no order-blindness figure called {name!r}")


@st.fragment
def compare_encodings(
    view: PageState, tokens: tuple[str, ...], order_kind: str, width: int, seed: int
) -> None:
    """The sentence's attention weights with two positional encodings, and their difference."""
    box = compare.opened(view, label="Compare two positional encodings")
    if box is not None:
        with box:
            first, second = st.columns(2)
            a, b = (
                column.selectbox(
                    f"Encoding {letter}", SENTENCE_ENCODINGS,
                    key=view.choice_key(f"cmp_{letter.lower()}", default, SENTENCE_ENCODINGS),
                )
                for column, letter, default in ((first, "A", "none"), (second, "B", "sinusoidal"))
            )  # fmt: skip
            try:
                weights = [blindness(tokens, order_kind, width, encoding, seed, 10000.0).weights
                           for encoding in (a, b)]  # fmt: skip
            except AttentionInputError as error:
                st.error(str(error), icon=":material/error:")
            else:
                compare.show(*weights, names=(f"{a} positions", f"{b} positions"),
                             query_labels=tokens, key_labels=tokens,
                             filename=f"positions-compare-{a}-{b}")  # fmt: skip
    write_url_after_fragment(view)
