"""Why attention? An RNN's chain against attention's all pairs, and the way to every page."""

import streamlit as st

from ui.pages import PAGES
from ui.why import counts, figures, inputs
from ui.widgets import render
from ui.widgets.layout import page_intro
from ui.widgets.state import PageState

view = PageState("why")
page_intro(
    "Why attention?",
    "Attention lets every token look at every other token and take a weighted average of what "
    "it finds there. Each token asks a question (its **query**), every token offers a label "
    "(its **key**) and a content (its **value**); how well a query matches each key decides "
    "how much of each value flows into the answer. Because every pair is compared at once, "
    "the first word of a sentence can inform the last in a single step, where a recurrent "
    "network has to pass the information along the chain, one token at a time.",
    r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V",
)
view.show_notices()


@st.fragment(key="why.chain_or_pairs")
def chain_or_pairs() -> None:
    """The slider, the diagram and the counts: moving the slider reruns only this."""
    tokens = inputs.choose_tokens(view)
    render.show(render.cached(figures.rnn_vs_attention, tokens), filename="rnn-vs-attention")
    count = counts.path_counts(len(tokens))
    steps, pairs, ops = st.columns(3)
    steps.metric("RNN: sequential steps, first → last token", count.rnn_steps)
    pairs.metric("Attention: steps between any pair", count.attention_steps)
    ops.metric("Attention: query·key scores computed", count.scores)
    st.caption(
        "The price of the single step is the last number: attention scores every query against "
        "every key, n² of them. The cost page measures what that means for long inputs."
    )
    view.write_url()


chain_or_pairs()

st.header("The concept pages")
for record in PAGES:
    if record.id != view.page:
        st.page_link(record.path, label=record.link_label, icon=record.icon, help=record.help)

view.sync_url()
