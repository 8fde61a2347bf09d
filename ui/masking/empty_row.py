"""“A row with nothing to attend to”: block every key of one query and see the textbook
softmax's 0/0 = NaN beside this package's zero weights and `fully_masked` flag."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.lessons.mask_experiments import compare_mask, lab_mask
from ui.masking.inputs import position_picker
from ui.widgets import describe
from ui.widgets.state import PageState, write_url_after_fragment


@st.fragment
def nothing_to_attend_to(
    view: PageState, qkv: tuple[np.ndarray, np.ndarray, np.ndarray], tokens: Sequence[str]
) -> None:
    """Block every key of one query: the naive softmax's NaN beside this package's zeros."""
    n = len(tokens)
    empty_row = position_picker(
        st, "Block every key of query", tokens, view.int_key("empty_row", n, lo=1, hi=n)
    )
    r = empty_row - 1
    grid = np.ones((n, n), bool)
    grid[r] = False
    empty = compare_mask(*qkv, lab_mask(n, ["custom"], custom=grid))
    rows = {
        "masked scores": empty.masked.masked[r],
        "weights, naive softmax": empty.naive_weights[r],
        "weights, this package": empty.masked.weights[r],
    }
    st.dataframe(
        pd.DataFrame(
            [[describe.format_number(x, 4) for x in row] for row in rows.values()],
            # A named index: the header above the row names is not left empty for screen readers.
            index=pd.Index(list(rows), name=f"query {empty_row}"),
            columns=[f"{j + 1} {token}" for j, token in enumerate(tokens)],
        ),
        width="stretch",
    )
    naive_out = ", ".join(describe.format_number(x, 4) for x in empty.naive_output[r])
    safe_out = ", ".join(describe.format_number(x, 4) for x in empty.masked.output[r])
    st.markdown(
        f"Output of query {empty_row}: naive **[{naive_out}]**, this package **[{safe_out}]**, "
        f"fully_masked = **{bool(empty.masked.fully_masked[r])}**.\n\n"
        "Why it matters: padding queries (and left-padded rows under a causal mask) have nothing "
        "to attend to. A NaN there does not stay there: the next layer multiplies it into sums, a "
        "loss averaged over the batch becomes NaN, and so does every gradient."
    )
    write_url_after_fragment(view)
