"""What heads do: when the answer appears (the logit lens), who writes it (direct logit
attribution), what each head's job is (probes), and why attention is not an explanation."""

import streamlit as st

from attention_core import AttentionInputError
from ui.heads import data, explanation, figures, inputs, probes, reading, tables
from ui.models import agreement, page_model
from ui.widgets.layout import labelled_radio, page_intro, plain, what_to_try
from ui.widgets.state import PageState

view = PageState("heads")
# "minilm" runs the probes on the encoder; the prompt is still read by the shipped decoder.
model_key = page_model.decoder_key(view, also=("minilm",))
kind = view.value("model")
decoder = page_model.SHIPPED_DECODER if kind == "minilm" else kind
loaded = page_model.named_decoder(decoder)
page_intro(
    "What heads do",
    "A decoder's next-token logits read one vector: the residual stream, the sum of what the "
    "embedding, every attention head and every MLP wrote into it. Read it after each layer and "
    "you see when the answer appears; split it by writer and you see who wrote it; probe the "
    f"heads with built sequences and you see what each one does. On "
    f"{loaded.name}, run by this project's own code.",
    tables.STREAM_FORMULAS[page_model.final_norm_kind(loaded)],
)
view.show_notices()

prompt_key = view.text_key("prompt", inputs.DEFAULT_PROMPT, max_chars=inputs.MAX_PROMPT_CHARS)
position_key = view.int_key("position", 0, lo=0, hi=data.MAX_PROMPT_TOKENS)
token_key = view.text_key("token", "", max_chars=inputs.MAX_TOKEN_CHARS)
vs_key = view.text_key("vs", "", max_chars=inputs.MAX_TOKEN_CHARS)
layer_key, head_key = page_model.layer_head_keys(view, loaded, inputs.DEFAULT_LAYER,
                                                 inputs.DEFAULT_HEAD)  # fmt: skip
seed_key = view.int_key("seed", 0, lo=0, hi=inputs.MAX_SEED)
length_key = view.int_key("length", inputs.DEFAULT_LENGTH, lo=inputs.PROBE_LENGTHS[0],
                          hi=inputs.PROBE_LENGTHS[1])  # fmt: skip
query_key = view.int_key("query", 0, lo=0, hi=inputs.MAX_QUERY)

model = page_model.decoder_or_stop(view, loaded)
page_model.show_model_line(loaded, model)

# -- the prompt -----------------------------------------------------------------------------------

st.header(":material/edit_note: The prompt")
text = st.text_area("Prompt", key=prompt_key, height=68)
try:
    ids, cut = inputs.prompt_ids(model, text)
except AttentionInputError as error:
    st.error(str(error), icon=":material/edit_off:")
    view.sync_url()
    st.stop()
if cut:
    st.warning(cut, icon=":material/content_cut:")
inputs.fit_position(view, "position", len(ids))
shown = figures.labels(model.token_text(i) for i in ids)
position = st.selectbox(
    "Read the stream at token", [0, *range(1, len(ids) + 1)], key=position_key,
    format_func=inputs.token_choice_label(shown),
)  # fmt: skip
at = (position or len(ids)) - 1
readout = data.prompt_readout(model, ids, at)
agreement.check(view, loaded, model, ids)
best = int(readout.next_logits.argmax())
best_text = plain(figures.token_label(model.token_text(best)))
listed = " · ".join(f"`{plain(t)}`" for t in shown)
# Markdown, not a caption: code spans on a caption's grey miss WCAG's contrast.
st.markdown(f"{len(ids)} tokens: {listed}. After token {at + 1} the model's likeliest next "
            f"token is “{best_text}”.")  # fmt: skip


# -- when the answer appears, and who writes it ---------------------------------------------------

keys = {"token": token_key, "vs": vs_key, "layer": layer_key, "head": head_key}
reading.section(view, decoder, ids, at, keys)

# -- what each head does, found by probes ---------------------------------------------------------

st.header(":material/science: What each head does, found by probes")
st.markdown(
    "A probe is a sequence built so that one kind of head stands out: random tokens repeated "
    "twice. Nothing but the repetition lets a head know where to look, so a head that, in the "
    "second half, looks at the token that *followed* the same token in the first half is an "
    "**induction head** (Olsson et al. 2022): it copies what came next last time."
)
kind = labelled_radio("Model", page_model.decoder_labels(data.MODELS), model_key)
probes.section(view, kind, seed_key, length_key, text)

# -- attention is not explanation -----------------------------------------------------------------

st.header(":material/balance: Attention is not explanation")
st.markdown(
    "Where a head looks is not what it uses. For one token, four measures of which tokens its "
    "new vector comes from, in the model's last layer: the raw attention, attention rollout, "
    "the norm of what each token really adds (‖α·v·W_O‖, Kobayashi et al. 2020), and how much "
    "the output moves when the token is hidden. Spearman's ρ says how far they agree."
)
explanation.section(view, kind, query_key, text)

what_to_try(
    [
        "Follow “ Paris” after *The capital of France is*: it is not among the likeliest 1,000 "
        "tokens until layer 24, then climbs to the top at layer 30. Which heads and MLPs write "
        "it?",
        "Type *The capital of Italy is* and set the second token to “ Paris”: the logit "
        "difference shows who writes “ Rome” *against* “ Paris”.",
        "In the probe maps, find the induction heads (layers 18–19 of SmolLM2), then run the "
        "causal check: the repeat's loss jumps when they go, and barely moves for random heads.",
        "Switch the model to MiniLM: a sentence encoder has previous-token and [CLS] heads, "
        "but no induction heads.",
        "In *Attention is not explanation*, compare the first token's attention with its norm: "
        "a sink gets most of the weight and adds far less than its share.",
    ]
)
view.sync_url()
