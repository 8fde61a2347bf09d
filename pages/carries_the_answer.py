"""What carries the answer: activation patching. Run a clean prompt and a corrupted one, then put
one activation of the clean run into the corrupted run and see how much of the answer comes
back: the residual stream, each attention and MLP output, each head."""

import streamlit as st

from ui.models import page_model
from ui.patching import inputs, sections
from ui.widgets.layout import page_intro, what_to_try
from ui.widgets.state import PageState

view = PageState("patching")
model_key, loaded = page_model.choose_decoder(view)
page_intro(
    "What carries the answer",
    "Give the model a prompt it answers right and a corrupted copy where it answers wrong. Run "
    "the corrupted one again with one activation taken from the clean run: if the answer comes "
    "back, that activation carried it. Patch the residual stream at each layer and token, each "
    "attention and MLP output, each head, and you see where the answer sits and who moves it. "
    f"On {loaded.name}, run by this project's own code.",
    r"\mathrm{LD} = \mathrm{logit}(\text{answer}) - \mathrm{logit}(\text{wrong}),\qquad "
    r"\text{restored} = \frac{\mathrm{LD}_{\text{patched}} - \mathrm{LD}_{\text{corrupt}}}"
    r"{\mathrm{LD}_{\text{clean}} - \mathrm{LD}_{\text{corrupt}}}",
)
view.show_notices()

keys = {
    "model": model_key,
    "clean": view.text_key("clean", inputs.DEFAULT_CLEAN, max_chars=inputs.MAX_PROMPT_CHARS),
    "corrupt": view.text_key("corrupt", inputs.DEFAULT_CORRUPT, max_chars=inputs.MAX_PROMPT_CHARS),
    "answer": view.text_key("answer", inputs.DEFAULT_ANSWER, max_chars=inputs.MAX_ANSWER_CHARS),
    "wrong": view.text_key("wrong", inputs.DEFAULT_WRONG, max_chars=inputs.MAX_ANSWER_CHARS),
    "blocks": view.bool_key("blocks", False),
    "kind": view.choice_key("kind", "attn_out", list(sections.BLOCK_KINDS)),
}
keys["layer"], keys["head"] = page_model.layer_head_keys(
    view, loaded, sections.DEFAULT_LAYER, sections.DEFAULT_HEAD
)

model = page_model.decoder_or_stop(view, loaded)
page_model.show_model_line(loaded, model)

# -- the two prompts ------------------------------------------------------------------------------

st.header(":material/compare_arrows: Two prompts, two answers")
left, right = st.columns(2)
texts = {
    "clean": left.text_area("Clean prompt (the model answers right)", key=keys["clean"], height=68),
    "corrupt": right.text_area(
        "Corrupted prompt (same number of tokens)", key=keys["corrupt"], height=68
    ),
}
left, right = st.columns(2)
space = "A word after a space starts with one: “ Mary”."
texts["answer"] = left.text_input("Answer (one token)", key=keys["answer"], help=space)
texts["wrong"] = right.text_input("Wrong answer (one token)", key=keys["wrong"])
read = inputs.read_pair(model, texts)
for note in read.notes.values():
    st.info(note, icon=":material/call_split:")
for problem in read.problems.values():
    st.error(problem, icon=":material/edit_off:")
if read.pair is None:
    view.sync_url()
    st.stop()
pair = read.pair
shares = sections.pair_and_residual(view, model, pair)
sections.blocks(view, pair, keys)

# -- heads ----------------------------------------------------------------------------------------

st.header(":material/hub: Which heads move it")
st.markdown(
    "Patch one head's output (what it writes into the stream through W_O) from the clean run, "
    "once at every position and once at the last position only. A head that restores the "
    "answer from the last position alone moved it there itself: it read it from an earlier "
    "token."
)
sections.heads(view, pair, keys)
sections.ask(view, shares)

what_to_try(
    [
        "In the residual map, follow the bright cell from the token where the prompts differ "
        "down to the last token: the layer where it jumps is where heads moved the answer.",
        "Switch the map to attention outputs: the cells that light up at the last token are "
        "the layers whose heads did the moving. The head map names them.",
        "Choose the top head and read its attention from the last token: on the clean prompt "
        "it looks at one name, on the corrupted prompt at the other.",
        "Try *The capital of France is the city of* against *The capital of Italy is the city "
        "of*, with “ Paris” against “ Rome”: a fact, not a name, is moved.",
        "Make the corrupted prompt one token longer: the page shows both token lists, so you "
        "can see where they part.",
    ]
)
view.sync_url()
