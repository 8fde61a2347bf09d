"""“The future cannot leak”: change one token's value vector and see which output rows move,
without a mask, under the causal mask and under the mask built on the page."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import causal_mask
from attention_core.lessons.mask_experiments import value_change_effect
from ui.masking.inputs import position_picker
from ui.widgets import theme
from ui.widgets.state import PageState, write_url_after_fragment


@st.fragment
def future_cannot_leak(
    view: PageState,
    qkv: tuple[np.ndarray, np.ndarray, np.ndarray],
    mask: np.ndarray | None,
    mask_name: str,
    tokens: Sequence[str],
) -> None:
    """Change one value vector; the table shows which output rows move, per mask."""
    n = len(tokens)
    pick, amount = st.columns(2)
    changed = position_picker(
        pick,
        "Change the value vector of token",
        tokens,
        view.int_key("change_at", min(4, n), lo=1, hi=n),
    )
    delta = amount.slider(
        "by adding to each of its entries",
        -5.0,
        5.0,
        step=0.5,
        key=view.float_key("delta", 2.0, lo=-5.0, hi=5.0),
    )
    masks = {"no mask": None, "causal": causal_mask(n), f"your mask ({mask_name})": mask}
    effects = {
        name: value_change_effect(*qkv, changed - 1, delta, mask=shown)
        for name, shown in masks.items()
    }
    change_table = pd.DataFrame(
        {name: effect.row_change for name, effect in effects.items()},
        index=pd.Index([f"{i + 1} {token}" for i, token in enumerate(tokens)], name="query"),
    )
    st.dataframe(
        change_table.style.format("{:.3g}").map(
            lambda value: theme.CHANGED_ROW_STYLE if value > 0 else ""
        ),
        width="stretch",
    )
    causal_changed = np.flatnonzero(effects["causal"].changed) + 1
    if causal_changed.size:
        st.markdown(
            "Largest change of each output row (max over its features of |Δoutput|); highlighted "
            f"rows changed. With the causal mask, rows {', '.join(map(str, causal_changed))} "
            f"changed and the {changed - 1} earlier row(s) stayed **bit-for-bit identical**: "
            f"their weight on key {changed} is exactly 0, not merely small. Without a mask, "
            f"{int(effects['no mask'].changed.sum())} of {n} rows changed."
        )
    else:
        st.markdown("Adding 0 changes nothing: move the slider.")
    write_url_after_fragment(view)
