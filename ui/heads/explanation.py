"""The heads page's "attention is not explanation" section: four measures of where one token's
vector comes from, side by side, their rank correlations, and a prediction to make first."""

from __future__ import annotations

import streamlit as st

from attention_core import AttentionInputError
from ui.heads import data, figures, inputs, questions, tables
from ui.models import minilm, page_model
from ui.widgets import render
from ui.widgets.state import PageState, write_url_after_fragment


def model_ids(kind: str, text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The prompt as the chosen model reads it: its ids and tokens."""
    if kind != "minilm":
        model = page_model.named_decoder(kind).model
        ids, _ = inputs.prompt_ids(model, text)
        return ids, tuple(model.token_text(i) for i in ids)
    tokenized = minilm.load_model().model.tokenize(text)
    return tuple(int(i) for i in tokenized.input_ids), tokenized.tokens


@st.fragment
def section(view: PageState, kind: str, query_key: str, text: str) -> None:
    # On demand (a link can ask for it): hiding each token costs a forward pass per token.
    if not st.toggle("Compare the four measures (runs the model once per token)",
                     key=view.bool_key("explain", False)):  # fmt: skip
        write_url_after_fragment(view)
        return
    if kind == "minilm" and minilm.load_model().model is None:
        st.error(minilm.load_model().error, icon=":material/cloud_off:")
        write_url_after_fragment(view)
        return
    try:
        ids, tokens = model_ids(kind, text)
    except AttentionInputError as error:
        st.error(str(error), icon=":material/edit_off:")
        write_url_after_fragment(view)
        return
    inputs.fit_position(view, "query", len(tokens))
    shown = figures.labels(tokens)
    query = st.selectbox(
        "Token", [0, *range(1, len(tokens) + 1)], key=query_key,
        format_func=inputs.token_choice_label(shown),
    )  # fmt: skip
    at = (query or len(tokens)) - 1
    if kind != "minilm" and at == 0:
        # A decoder's first token sees one key: every measure gives it everything, and a rank
        # correlation of one value is undefined.
        st.info("The first token of a decoder sees only itself: all four measures give it the "
                "whole weight, so there is no order of tokens to compare. Choose a later token.",
                icon=":material/looks_one:")  # fmt: skip
        write_url_after_fragment(view)
        return
    layers = data.model_of(kind).config.num_hidden_layers
    with st.spinner("Hiding each token in turn (one forward pass each)…"):
        found = data.explanation(kind, ids, layers - 1, at)
    questions.ask_questions(view, found)
    drawn = render.digested(found.digest, found)  # the four measures, keyed by their digest
    render.show(
        render.cached(figures.explanation_figure, drawn, layers - 1),
        filename=f"heads-explanation-{figures.file_part(kind)}",
        key="heads.explanation",
    )
    names = list(data.MEASURES.values())
    st.markdown("**Rank correlations** (Spearman's ρ; 1 = the same order of tokens):")
    st.dataframe(tables.correlation_frame(names, found.correlations),
                 key="heads.correlations")  # fmt: skip
    hiding = "next-token KL divergence" if kind != "minilm" else "1 − cos of its last vector"
    st.caption(
        f"Each row is one measure's share per token, of its own total, so the rows can be "
        f"compared. Hiding a token means no query of any layer may attend to it; the effect "
        f"is the {hiding}."
    )
    write_url_after_fragment(view)
