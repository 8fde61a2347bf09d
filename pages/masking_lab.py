"""The masking lab: build any mask, see what it does to scores and weights, and why −∞."""

import numpy as np
import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.mask_experiments import compare_mask, example_qkv, lab_mask
from ui.masking import (
    additive_masks,
    batching,
    empty_row,
    example,
    figures,
    inputs,
    questions,
    value_change,
)
from ui.widgets.layout import page_intro, what_to_try
from ui.widgets.state import PageState

view = PageState("masking")
page_intro(
    "The masking lab",
    "A mask decides which keys each query may look at. A blocked score becomes **−∞** before "
    "the softmax, so its weight is exactly 0 and the allowed weights still sum to 1.",
    r"\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V,"
    r"\qquad M_{ij} = \begin{cases} 0 & \text{query } i \text{ may attend to key } j \\"
    r" -\infty & \text{otherwise} \end{cases}",
)
view.show_notices()

# -- the controls: they define the example, so every section below follows them -------------------

size_column, kind_column = st.columns([1, 3])
most = len(example.SENTENCE)
n = size_column.slider("Tokens", 2, most, key=view.int_key("n", 6, lo=2, hi=most))
seed = size_column.number_input(
    "Seed for Q, K, V",
    0,
    9999,
    key=view.int_key("seed", 0, lo=0, hi=9999),
    help=f"Q, K and V are random {n}×{example.D_K} matrices drawn from this seed.",
)
kinds = inputs.mask_kinds(view, kind_column)
# Each chosen kind's parameters (padding, window, prefix, the custom grid), one control each.
parameters = inputs.mask_parameters(view, kind_column, n, kinds)
padding = parameters.get("padding", [])
tokens = example.tokens(n, padding)

qkv = example_qkv(n, example.D_K, seed)
try:
    mask = lab_mask(n, kinds, **parameters)
    lab = compare_mask(*qkv, mask)
except AttentionInputError as error:
    st.error(str(error), icon=":material/error:")
    view.sync_url()
    st.stop()

mask_name = inputs.mask_name(kinds)

# -- side by side ---------------------------------------------------------------------------------

st.header("The mask, the masked scores, and the weights without and with it")
st.caption(f"Mask: **{mask_name}**. Rows are queries, columns are keys.")
figures.show_mask_effect(lab, np.ones((n, n), bool) if mask is None else mask, tokens)
st.markdown(figures.row_sum_badges(lab, tokens))
figures.compare_causal(view, qkv, kinds, tokens, **parameters)
questions.ask_questions(view, lab, tokens, mask_name)

# -- encoder versus decoder -----------------------------------------------------------------------

st.header("Encoder versus decoder")
st.markdown(
    "An **encoder** (BERT) reads the whole input at once, so every token sees every real token "
    "in both directions: it needs only the padding mask. A **decoder** (GPT) generates one "
    "token at a time and must not see tokens it has not produced yet: it adds the causal mask."
)
figures.show_encoder_and_decoder_masks(tokens, padding)
st.caption(
    "The pads are the positions chosen above."
    if "padding" in kinds
    else "Add the Padding kind above to see the pads in both masks."
)

# -- the future cannot leak -----------------------------------------------------------------------

st.header("The future cannot leak")
st.markdown(
    "Each output row is a weighted sum of value vectors, output_i = Σ_j w_ij v_j. Change the "
    "value vector of one token and only the rows that give it a non-zero weight can move."
)
value_change.future_cannot_leak(view, qkv, mask, mask_name, tokens)

# -- batching with padding ------------------------------------------------------------------------

st.header("Batching with padding")
short, long = " ".join(batching.SHORT), " ".join(batching.LONG)
st.markdown(
    f"A batch is one rectangular array, so “{short}” ({len(batching.SHORT)} tokens) is padded "
    f"to the length of “{long}” ({len(batching.LONG)} tokens). The padding mask hides the "
    "pad slots, and the real tokens get the same result as when each sentence runs alone."
)
batching.batching_with_padding(view, seed)

# -- a row with nothing to attend to --------------------------------------------------------------

st.header("A row with nothing to attend to")
st.markdown(
    "If every key of a query is blocked, its scores are all −∞. The textbook softmax then "
    "computes 0/0 = **NaN**; this package defines the row's weights and output as **zero** and "
    "flags it in `fully_masked`."
)
empty_row.nothing_to_attend_to(view, qkv, tokens)

# -- additive masks: −∞ versus a large negative number --------------------------------------------

st.header("Why −∞ and not −1e9?")
leak_keys = zip(additive_masks.LEAK_KEYS, additive_masks.LEAK_SCORES, strict=True)
st.markdown(
    "Many libraries mask by *adding* a bias: 0 for allowed keys, a large negative number for "
    "blocked ones. One query with keys "
    + ", ".join(f"{key} ({score:g})" for key, score in leak_keys)
    + " (score × scale); the two pads are blocked but would win the softmax. Every step below is "
    "computed in the chosen precision (NumPy float16 is real half precision)."
)
additive_masks.minus_infinity_versus_a_fill(view)

what_to_try(
    [
        "Combine **Causal** with **Padding**: the weights of a row are zero on its future and on "
        "the pads, and the row still sums to 1.",
        "In the **Custom grid**, untick a whole row: its badge turns orange and its weights are 0.",
        "**The future cannot leak**: change the last token's value vector: under the causal mask "
        "only its own row moves.",
        "**Batching**: turn the padding mask off, then pad on the left with the causal toggle on.",
        "**−∞ versus −1e9**: in float16 raise the scale from 1e3 to 6e4 and watch −1e4, then the "
        "float16 minimum, start to leak; switch on “Block every key”.",
    ]
)

view.sync_url()
