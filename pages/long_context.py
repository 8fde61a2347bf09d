"""Long context and the KV cache: what a sliding window costs a real model, what attention sinks
give back, and what each way of storing keys and values costs in memory and in accuracy."""

import streamlit as st

from attention_core.lessons.passages import ALICE
from ui.long_context import data, figures, inputs, kv_cache
from ui.models import page_model
from ui.widgets import render
from ui.widgets.layout import page_intro, what_to_try
from ui.widgets.state import PageState

view = PageState("long_context")
model_key, loaded = page_model.choose_decoder(view)
page_intro(
    "Long context and the KV cache",
    "A model that reads a long text keeps every token's keys and values: memory grows with the "
    "text. A sliding window keeps only the last W tokens, and a small model falls apart once its "
    "first tokens leave the window, because many heads park their attention there (attention "
    f"sinks). Keeping the first S tokens in view brings it back. Here {loaded.name} reads a text "
    "three ways, by masking: every token keeps its position (RoPE's rotation, or GPT-2's "
    "learned vector), the window only hides keys.",
    r"\mathrm{PPL} = \exp\Big(\frac{1}{n - W}\sum_{i \ge W} -\log p(t_{i+1} \mid \text{keys "
    r"query } i \text{ sees})\Big)",
)
view.show_notices()

text_key = view.text_key("text", ALICE, max_chars=inputs.MAX_TEXT_CHARS)
window_key = view.int_key("window", inputs.DEFAULT_WINDOW, lo=inputs.WINDOWS[0],
                          hi=inputs.WINDOWS[1])  # fmt: skip
sinks_key = view.int_key("sinks", inputs.DEFAULT_SINKS, lo=0, hi=inputs.MAX_SINKS)

model = page_model.decoder_or_stop(view, loaded)
page_model.show_model_line(loaded, model)

# -- the text, the window, the sinks --------------------------------------------------------------

st.header(":material/article: The text")
text = st.text_area(f"Text (up to {inputs.MAX_TEXT_CHARS:,} characters)", key=text_key,
                    height=160)  # fmt: skip
ids, cut = inputs.text_ids(model, text)
if len(ids) < 3:
    st.error("The text is empty or too short: type or paste a few sentences (the page shows "
             "the default passage until then).", icon=":material/edit_off:")  # fmt: skip
    ids, cut = inputs.text_ids(model, ALICE)
if cut:
    st.warning(cut, icon=":material/content_cut:")
window_col, sinks_col = st.columns(2)
window_col.slider("Window W: the last W tokens each token sees", *inputs.WINDOWS, key=window_key)
sinks_col.slider("Sinks S: the first S tokens, always in view", 0, inputs.MAX_SINKS,
                 key=sinks_key)  # fmt: skip
window, sinks, notes = inputs.fitted(view, len(ids))
inputs.show_notes(notes)

# -- what the window costs ------------------------------------------------------------------------

st.header(":material/trending_up: What the window costs")
with st.spinner(f"Reading {len(ids)} tokens three ways (a few seconds, once per text)…"):
    passes = data.three_passes(model, ids, window, sinks)
full = passes.perplexity["full"]
for column, (name, title) in zip(st.columns(3), data.TITLES.items(), strict=True):
    value = passes.perplexity[name]
    column.metric(f"Perplexity, {title}", f"{value:.2f}",
                  delta=None if name == "full" else f"{value / full:.2f}× full",
                  delta_color="inverse")  # fmt: skip
st.caption(
    f"Over the {len(ids) - 1 - window} tokens predicted from a query at position {window} or "
    f"later (of {len(ids)} tokens), where the window has started to drop the beginning. Lower is "
    "better: the exponent of the mean loss, the number of equally likely tokens it amounts to."
)
if note := inputs.local_layers_note(loaded.name, model, window):
    st.info(note, icon=":material/view_week:")
setting = f"W{window}-S{sinks}"
drawn = render.digested(passes.digest, passes)  # the three passes, keyed by their digest
render.show(render.cached(figures.loss_figure, drawn),
            filename=f"long-context-loss-{setting}", key="long_context.loss")  # fmt: skip
render.show(render.cached(figures.share_figure, drawn),
            filename=f"long-context-sinks-{setting}", key="long_context.share")  # fmt: skip
st.caption(
    "With full attention many heads put much of their weight on the first token, whatever it "
    "is: it is where a head looks when it has nothing better to do. The window takes it away "
    "from every query past W, and the weight has to go somewhere else; the sinks give it back."
)

# -- the KV cache ---------------------------------------------------------------------------------

st.header(":material/memory: What the KV cache costs, and what saving on it costs")
kv_cache.section(view, ids, st.session_state[model_key])

what_to_try(
    [
        "Set the sinks to 0: the window alone. Then 1: the first token alone brings most of the "
        "perplexity back, though it is only the word “Alice”.",
        "Shrink the window to 8: even with sinks the model cannot see the sentence it is in.",
        "Paste a text of your own: code, a list, a poem. Where does the window hurt most?",
        "In the KV cache section, compare the 8-bit and 4-bit caches: which moves the "
        "next-token distribution more, and what does each save?",
    ]
)
view.sync_url()
