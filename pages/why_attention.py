"""Why attention? An RNN's chain against attention's all pairs, and the way to every page."""

import streamlit as st

from ui.pages import PAGES
from ui.why import figures as why_figures
from ui.widgets import render
from ui.widgets.layout import page_intro
from ui.widgets.state import PageState

THIS_PAGE = "pages/why_attention.py"

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

SENTENCE = tuple("The cat sat on the mat because it was warm".split())


@st.fragment(key="why.chain_or_pairs")
def chain_or_pairs() -> None:
    """The slider, the diagram and the counts: moving the slider reruns only this."""
    length = st.slider(
        "Tokens in the sentence", 2, len(SENTENCE), key=view.int_key("n", 6, lo=2, hi=len(SENTENCE))
    )
    render.show(render.cached(why_figures.rnn_vs_attention, SENTENCE[:length]),
                filename="rnn-vs-attention")  # fmt: skip
    steps, pairs, ops = st.columns(3)
    steps.metric("RNN: sequential steps, first → last token", length - 1)
    pairs.metric("Attention: steps between any pair", 1)
    ops.metric("Attention: query·key scores computed", length * length)
    st.caption(
        "The price of the single step is the last number: attention scores every query against "
        "every key, n² of them. The cost page measures what that means for long inputs."
    )
    view.write_url()


chain_or_pairs()

st.header("The concept pages")
for record in PAGES:
    if record.path != THIS_PAGE:
        st.page_link(record.path, label=record.link_label, icon=record.icon, help=record.help)

view.sync_url()
