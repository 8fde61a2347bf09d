"""Why a head attends there: one head's attention score split exactly into the parts that made
it, by what wrote the residual stream it read, and by RoPE frequency."""

import streamlit as st

from attention_core import AttentionInputError
from ui.attends import data, figures, inputs, sections, subject
from ui.models import minilm, page_model, smollm
from ui.widgets.layout import labelled_radio, page_intro, plain, what_to_try
from ui.widgets.state import PageState

view = PageState("attends")
model_key = page_model.decoder_key(view, also=("minilm", subject.LEARNING))
page_intro(
    "Why a head attends there",
    "Every page shows where a head attends. This one shows why: the stream a head reads is a "
    "sum of what wrote it (the embeddings, every earlier head, every MLP), so its query and "
    "its key are sums of parts too, and each score splits exactly into one term per query "
    "part and key part. Which part of the key made it attractive to this query?",
    r"s_{ij} = \tfrac{1}{\sqrt{d_\mathrm{head}}}\, q_i \cdot k_j"
    r" = \sum_{c}\sum_{c'} \tfrac{1}{\sqrt{d_\mathrm{head}}}\, q_{c,i}\cdot k_{c',j},\qquad"
    r" q_{c,i} = R_i W_Q\, \mathrm{norm}_i(x_{c,i})",
)
view.show_notices()
prompt_key = view.text_key("prompt", inputs.DEFAULT_PROMPT, max_chars=inputs.MAX_PROMPT_CHARS)
query_key = view.int_key("query", 0, lo=0, hi=data.MAX_PROMPT_TOKENS)
key_key = view.int_key("key", 0, lo=0, hi=data.MAX_PROMPT_TOKENS)
view.text_key("run", "", max_chars=80)
labels = {**page_model.decoder_labels({"smollm2": smollm.MODEL_NAME}), "minilm": minilm.MODEL_NAME}
if view.value("run"):
    labels[subject.LEARNING] = "the learning page's model"
kind = labelled_radio("Model", labels, model_key)
chosen_model = subject.subject(view, kind)
layer_key, head_key = inputs.layer_head_keys(view, chosen_model.shape)

# -- the prompt and the head --------------------------------------------------------------------

st.header(":material/edit_note: The prompt and the head")
text = st.text_area("Prompt", key=prompt_key, height=68, disabled=kind == subject.LEARNING)
try:
    ids, tokens, cut = chosen_model.tokens(text)
except AttentionInputError as error:
    st.error(str(error), icon=":material/edit_off:")
    view.sync_url()
    st.stop()
if cut:
    st.warning(cut, icon=":material/content_cut:")
inputs.fit_position(view, "query", len(ids))
inputs.fit_position(view, "key", len(ids))
layers, heads = chosen_model.shape
layer_col, head_col = st.columns(2)
layer = layer_col.slider("Layer", 1, layers, key=layer_key)
head = head_col.slider("Head", 1, heads, key=head_key)
query_col, key_col = st.columns(2)
query = query_col.selectbox("Query (the token that looks)", range(len(ids) + 1), key=query_key,
                            format_func=inputs.query_label(tokens))  # fmt: skip
at = (query or len(ids)) - 1
reading = chosen_model.reading(ids, layer - 1, head - 1, at)
visible = [0, *(j + 1 for j in range(len(ids)) if reading.visible[j])]
chosen = key_col.selectbox("Key (the token looked at)", visible, key=key_key,
                           format_func=inputs.key_label(tokens))  # fmt: skip
key = (chosen or reading.attended + 1) - 1
digest = sections.reading_digest(chosen_model.identity, ids, layer - 1, head - 1, at)
name = f"Layer {layer}, head {head}"
st.markdown(
    f"{name} gives “{plain(figures.token_label(tokens[key]))}” (token {key + 1}) a weight of "
    f"**{reading.weights[key]:.3f}** from “{plain(figures.token_label(tokens[at]))}” (token "
    f"{at + 1})."
)

# -- what made this key attractive ----------------------------------------------------------------

st.header(":material/manage_search: What made this key attractive")
sections.cause(reading, tokens, key, name, chosen_model.norm, digest)
sections.question(view, reading, tokens, key, name)

st.header(":material/graphic_eq: Position or content: by frequency")
sections.frequencies(reading, tokens, key, name, digest)

st.header(":material/grid_on: Over the whole pattern")
sections.pattern(reading, tokens, chosen_model.previous_heads(), digest)

chosen_model.editor_link(text, layer - 1, head - 1)

what_to_try(
    [
        "The default: layer 19, head 7 of SmolLM2 is an induction head. From the last “ the” "
        "it attends to “ lazy”, the token after the first “ the”, mostly because of what a "
        "previous-token head (layer 17, head 1) wrote at “ lazy”: the token before it.",
        "Choose another query of the second sentence: the same previous-token head is the "
        "cause, each time at another key.",
        "Look at a layer-1 head: no earlier head exists, so the token embedding and the bias "
        "are the only parts; a positional head's pattern comes from its fast RoPE bands.",
        "Switch to MiniLM: its positions come with the embeddings, so a position head's "
        "score is the position × position term.",
    ]
)
view.sync_url()
