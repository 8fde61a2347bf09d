"""What if: the decoder's next token after one ablation (a token removed or hidden, a head
removed), before and after, with the KL divergence between the two distributions.

    next_token_change(model, ids, mode, ...)  the two distributions (`NextTokenChange`): two
                                              forward passes, cached per distinct choice
    change_sentence, change_table, change_figure  what the page shows of them
    take_one_away(view, model, state, ...)    the page's section (a fragment)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError
from attention_core.models import hiding
from attention_core.models.decoder import DecoderModel
from attention_core.models.generation import Generation
from attention_core.models.hiding import NextTokenChange
from ui.decoder.trace import PageTrace, labels
from ui.models import smollm
from ui.widgets import describe, render, small_screens, theme
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of
from ui.widgets.render import figure
from ui.widgets.state import PageState, write_url_after_fragment
from ui.widgets.tokens import fit_token

MODES = {
    "remove": "Remove a token",
    "mask": "Hide a token (mask)",
    "head": "Remove the head chosen above",
}
# " France" (token 4 of the default prompt): without it the model no longer says " Paris".
DEFAULT_TOKEN = 4
SHOWN = 8  # the likeliest tokens before, and after, in the table and the bars
# Before in the bar chart's plain colour; after, the reader's change, in the chosen colour.
BEFORE_COLOR, AFTER_COLOR = theme.BAR_COLOR, theme.CHOSEN_COLOR


def next_token_change(
    model: DecoderModel, ids: tuple[int, ...], mode: str, position: int, layer: int, head: int
) -> NextTokenChange:
    """The next-token distribution of `ids` before and after one ablation (all from 0): token
    `position` removed or hidden, or head (`layer`, `head`) removed. Two forward passes, once
    per distinct choice; raises AttentionInputError for a choice that cannot be made."""
    # The choices a mode ignores are fixed, so they do not split its cache entry.
    position, layer, head = (0, layer, head) if mode == "head" else (position, 0, 0)
    return _next_token_change(ids, mode, position, layer, head, id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="decoder.what_if", spinner="Running the model on the changed text…")
def _next_token_change(ids, mode, position, layer, head, model_id, _model) -> NextTokenChange:
    return hiding.next_token_change(
        _model, np.asarray(ids), mode, position=position, layer=layer, head=head
    )


def change_rows(change: NextTokenChange) -> np.ndarray:
    """Token ids to show: the SHOWN likeliest before, then any of the SHOWN likeliest after
    that were not among them."""
    before = np.argsort(-change.probs_before)[:SHOWN]
    after = np.argsort(-change.probs_after)[:SHOWN]
    return np.concatenate([before, after[~np.isin(after, before)]])


def change_table(model: DecoderModel, change: NextTokenChange) -> pd.DataFrame:
    """The shown tokens' probabilities before and after, and by how much they moved."""
    rows = change_rows(change)
    before, after = change.probs_before[rows], change.probs_after[rows]
    return pd.DataFrame(
        {
            "token": [_token(model, i) for i in rows],
            "id": rows.astype(int),
            "p before": np.round(before, 4),
            "p after": np.round(after, 4),
            "change": np.round(after - before, 4),
        }
    )


def change_sentence(model: DecoderModel, change: NextTokenChange) -> str:
    """One sentence: did the likeliest next token change, and with what probabilities."""
    b, a = change.top_before, change.top_after
    p, q = change.probs_before, change.probs_after
    if a == b:
        return f"The top token stayed “{_token(model, b)}”, p {p[b]:.3f} → {q[b]:.3f}."
    return (
        f"The top token changed from “{_token(model, b)}” (p={p[b]:.3f}) to "
        f"“{_token(model, a)}” (p={q[a]:.3f}); “{_token(model, b)}” now has p={q[b]:.3f}."
    )


def change_figure(change: NextTokenChange, tokens: tuple[str, ...], sentence: str) -> go.Figure:
    """The shown tokens' probabilities before and after, as pairs of bars; `tokens` are the
    texts of `change_rows(change)`, `sentence` the page's `change_sentence`."""
    rows = change_rows(change)
    names = [f"“{token}”" for token in tokens]
    series = {"before": change.probs_before[rows], "after": change.probs_after[rows]}
    data = [
        {
            "type": "bar",
            "name": name,
            "x": names,
            "y": values,
            "marker": {"color": color},
            "hovertemplate": f"%{{x}} {name}: p = %{{y:.4f}}<extra></extra>",
        }
        for (name, values), color in zip(series.items(), (BEFORE_COLOR, AFTER_COLOR), strict=True)
    ]
    layout = {
        "title": {"text": "Next-token probabilities", "font": {"size": theme.font_size() + 3}},
        "barmode": "group",
        "height": 340,
        "font": {"size": theme.font_size()},
        "xaxis": {"title": {"text": "next token"}, "tickangle": -45},
        "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.2},
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
    }
    summary = (
        f"Next-token probabilities before and after, for {len(rows)} tokens. "
        f"{sentence} KL divergence {change.kl:.4f} nats."
    )
    table = describe.ChartTable(
        np.column_stack(list(series.values())),
        tuple(names),
        tuple(series),
        row_title="next token",
        title="Next-token probabilities",
    )
    return describe.attach(figure(data, layout), summary, table)


@st.fragment
def take_one_away(
    view: PageState,
    model: DecoderModel,
    state: Generation,
    shown: PageTrace,
    layer: int,
    head: int,
) -> None:
    """The section: what to take away, the sentence, the KL divergence, the table and the bars."""
    # Two more forward passes per token: only for a reader who opens it (a link can).
    box = st.expander("Take one token or head away", icon=":material/content_cut:",
                      key=view.bool_key("whatif", False), on_change="rerun")  # fmt: skip
    if not box.open:
        return write_url_after_fragment(view)
    with box:
        n = len(state.ids)
        if moved := fit_token(view, "what_token", n):
            st.warning(moved, icon=":material/link_off:")
        mode_col, token_col = st.columns(2)
        names = labels(shown.tokens)
        mode = mode_col.radio(
            "What to take away", list(MODES), format_func=MODES.get, key=view.key("what")
        )
        position = token_col.selectbox(
            "Token", list(range(1, n + 1)), format_func=lambda i: names[i - 1],
            key=view.key("what_token"), disabled=mode == "head",
        ) - 1  # fmt: skip
        if mode == "head":
            token_col.caption(f"Removes layer {layer + 1}, head {head + 1} (the sliders above).")
        try:
            change = next_token_change(model, state.ids, mode, position, layer, head)
        except AttentionInputError as error:
            token_col.error(str(error), icon=":material/edit_off:")
            return write_url_after_fragment(view)
        sentence = change_sentence(model, change)
        st.markdown(sentence)
        st.metric("KL divergence, before ‖ after", f"{change.kl:.4f} nats")
        table_col, chart_col = st.columns(2)
        with table_col:
            small_screens.table(change_table(model, change), hide_index=True)
        with chart_col:
            # The change is the model's for these ids and this choice: that is its digest.
            digest = digest_of(id(model), state.ids, mode, position, layer, head)
            tokens = tuple(_token(model, i) for i in change_rows(change))
            render.show(
                render.cached(change_figure, render.digested(digest, change), tokens, sentence),
                filename="decoder-what-if",
            )
        write_url_after_fragment(view)


def _token(model: DecoderModel, token_id: int) -> str:
    """A token's text as Python writes it in quotes: whitespace and escapes visible."""
    return repr(model.token_text(token_id))[1:-1]
