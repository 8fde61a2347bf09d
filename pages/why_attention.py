import streamlit as st

from ui import charts
from ui.layout import page_intro
from ui.state import PageState

view = PageState("home")
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

SENTENCE = "The cat sat on the mat because it was warm".split()
length = st.slider(
    "Tokens in the sentence", 2, len(SENTENCE), key=view.int("n", 6, lo=2, hi=len(SENTENCE))
)
charts.show(charts.rnn_vs_attention(SENTENCE[:length]), filename="rnn-vs-attention")
steps, pairs, ops = st.columns(3)
steps.metric("RNN: sequential steps, first → last token", length - 1)
pairs.metric("Attention: steps between any pair", 1)
ops.metric("Attention: query·key scores computed", length * length)
st.caption(
    "The price of the single step is the last number: attention scores every query against "
    "every key, n² of them. The cost page measures what that means for long inputs."
)

st.subheader("The concept pages")
st.page_link(
    "pages/sdpa_steps.py",
    label="Scaled dot-product attention, step by step",
    icon=":material/calculate:",
    help="Type Q, K and V and watch every step of the formula.",
)
st.page_link(
    "pages/masking_lab.py",
    label="The masking lab",
    icon=":material/visibility_off:",
    help="Causal, padding, sliding-window and custom masks, and why −∞.",
)
st.page_link(
    "pages/multi_head.py",
    label="Multi-head attention, head by head",
    icon=":material/view_column:",
    help="Projections, the split into heads, concatenation and W_O.",
)
st.page_link(
    "pages/positional_encoding.py",
    label="Positional encoding",
    icon=":material/waves:",
    help="Why attention ignores order, and sinusoids, RoPE and ALiBi.",
)
st.page_link(
    "pages/real_model.py",
    label="A real pretrained model",
    icon=":material/smart_toy:",
    help="Every layer and head of MiniLM, computed by this app's own code.",
)
st.page_link(
    "pages/attention_cost.py",
    label="The cost of attention",
    icon=":material/timer:",
    help="n² in time and memory, measured here, and the flash-attention idea.",
)

view.sync_url()
