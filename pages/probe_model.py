"""Probe a real model: attention rollout, a joint query-key map, and what-if token ablation."""

import functools

import streamlit as st

from attention_core import AttentionInputError
from ui.models import minilm, page_model
from ui.probe import data, figures, inputs
from ui.widgets import layout, render
from ui.widgets.byte_cache import digest_of
from ui.widgets.layout import labelled_radio, page_intro, what_to_try
from ui.widgets.state import PageState, write_url_after_fragment
from ui.widgets.tokens import fit_token, token_options

view = PageState("probe")
page_intro(
    "Probe a real model",
    f"Seeing a head is not testing an idea about it. Ask {minilm.MODEL_NAME} where information "
    "comes from once every layer has mixed it (rollout), which keys sit near which queries "
    "(a joint map), and what changes when one token is taken away (ablation).",
    r"A'_\ell = \tfrac12\,\bar A_\ell + \tfrac12\,I,\qquad "
    r"R = A'_L\,A'_{L-1}\cdots A'_1",
)
view.show_notices()

loaded = page_model.load_encoder(page_model.encoder_key(view))
# Every part of the view is bound first, so a link keeps its state even when there is no model.
text_key, layer_key, head_key, token_key = minilm.sentence_view_keys(
    view, loaded.shape, text=inputs.DEFAULT_TEXT, layer=inputs.DEFAULT_LAYER,
    head=inputs.DEFAULT_HEAD, token=inputs.DEFAULT_TOKEN, max_token=data.MAX_PROBE_TOKENS,
)  # fmt: skip
num_layers, num_heads, _ = loaded.shape
pairs_key = view.int_key("pairs", 12, lo=0, hi=data.MAX_PROBE_TOKENS)
ablate_key = view.int_key("ablate", inputs.DEFAULT_ABLATE, lo=1, hi=data.MAX_PROBE_TOKENS)
mode_key = view.choice_key("mode", inputs.DEFAULT_MODE, list(inputs.MODES))
with_key = view.text_key("with", inputs.DEFAULT_REPLACEMENT, max_chars=40)
cut_layer_key = view.int_key("cut_layer", inputs.DEFAULT_ABLATED_LAYER, lo=1, hi=num_layers)
cut_head_key = view.int_key("cut_head", inputs.DEFAULT_ABLATED_HEAD, lo=1, hi=num_heads)

model = page_model.encoder_or_stop(view, loaded)
page_model.show_model_line(loaded, model)
text, trace = minilm.traced_text(view, text_key, lambda text: data.probe_trace(model, text))
# What the trace decides (the trace itself, its rollout) goes to a figure keyed by its digest.
of_trace = functools.partial(render.digested, trace.digest)

tokens = trace.labels()
n = trace.num_tokens
positions, token_label = token_options(tokens)
st.caption(f"{n} tokens: " + " · ".join(layout.plain(t) for t in tokens))
layer_col, head_col = st.columns(2)
layer = layer_col.select_slider("Layer", list(range(1, num_layers + 1)), key=layer_key) - 1
head = head_col.select_slider("Head", list(range(1, num_heads + 1)), key=head_key) - 1
st.caption(
    "The layer and head are those of the query-key map and of the ablation's heatmaps; "
    "rollout always uses every head of every layer."
)

# -- 1. rollout ---------------------------------------------------------------------------------

st.header(":material/stacked_line_chart: 1 · Attention rollout: all layers at once")
st.markdown(
    "One head's weights say where a layer looks, but the vector it looks at was already mixed "
    "by the layers below. **Rollout** (Abnar & Zuidema, 2020) follows the mixing down to the "
    "input: average each layer's heads, add the residual connection as ½ of the identity (each "
    "token keeps half of itself), and multiply the layers from the first upward. Row *i* of R "
    "then splits position *i*'s top vector among the input tokens; each row sums to 1."
)


@st.fragment
def rollout_section() -> None:
    moved = fit_token(view, "token", n)
    if moved:
        st.warning(moved, icon=":material/link_off:")
    token = st.selectbox("Token to follow", positions, format_func=token_label, key=token_key) - 1
    rollout = data.rollout_of(model, text)
    drawn = (of_trace(trace), of_trace(rollout))
    whole_col, one_col = st.columns(2)
    with whole_col:
        render.show(render.cached(figures.rollout_figure, *drawn), filename="probe-rollout")
    with one_col:
        render.show(
            render.cached(figures.token_rollout_figure, *drawn, token),
            filename=f"probe-rollout-token-{token + 1}",
        )
    top = int(rollout.rollout[token].argmax())
    st.caption(
        f"Token {token + 1} “{layout.plain(tokens[token])}” traces most to token {top + 1} "
        f"“{layout.plain(tokens[top])}” ({rollout.rollout[token, top]:.0%}), against "
        f"{rollout.head_mean[-1, token, top]:.0%} in the last layer's own attention. The rows on "
        "the right grow layer by layer: each multiplication spreads the mixture further."
    )
    write_url_after_fragment(view)


rollout_section()
with st.expander(":material/warning: What rollout does not mean", expanded=True):
    st.markdown(
        "- **Not an explanation of the output.** It tracks attention weights only. The value "
        "vectors, W_O, the feed-forward layers and LayerNorm are left out, so a token with a "
        "large share may still pass on little (see *attention sinks* on the real-model page).\n"
        "- **The ½ is an assumption.** Real residual streams are not an even split; with "
        "another share the picture changes. Averaging heads also blurs heads with different "
        "jobs into one.\n"
        "- **Shares, not causes.** Rollout says how weight is routed, not what would change if "
        "a token were gone: for that, ablate it (section 3) and compare.\n"
        "- **Mixing piles up.** After many layers the rows grow alike and lean on [CLS] and "
        "[SEP]; that is the multiplication at work, not evidence that those tokens matter.\n"
        "- **Attention flow**, the paper's other method, treats the layers as a network of "
        "pipes and solves a max-flow problem for every pair of tokens. It is not computed "
        "here: at these sizes it takes far longer than a page may, and the paper found it "
        "agrees with rollout on the broad picture."
    )

# -- 2. the joint query-key map -----------------------------------------------------------------

st.header(":material/scatter_plot: 2 · Queries and keys in one picture")
st.markdown(
    "A weight depends on how well a query lines up with a key. AttentionViz (Yeh et al., 2023) "
    "puts one head's queries and keys into the same plane, so a query lands near the keys it "
    "attends to. Two changes first, neither of which moves any weight: queries are scaled by "
    "*s* and keys by 1/*s* so their mean lengths match (q·k is unchanged), and the keys are "
    "shifted so both clouds share a centre (a shift adds the same q·c to every key of a row, "
    "and softmax ignores that). Then PCA, computed here with NumPy's SVD, keeps the two "
    "directions of largest spread."
)


@st.fragment
def query_key_section(layer: int, head: int) -> None:
    pairs = st.slider("Lines for the heaviest weights", 0, data.MAX_PROBE_TOKENS, key=pairs_key)
    projection = data.projection_of(model, text, layer, head)
    drawn = render.digested(digest_of(trace.digest, layer, head), projection)
    render.show(
        render.cached(figures.query_key_map_figure, of_trace(trace), drawn, layer, head, pairs),
        filename=f"probe-query-key-map-l{layer + 1}-h{head + 1}",
    )
    kept = projection.explained.sum()
    st.caption(
        f"Circles are queries, diamonds keys; a line joins a query to a key it gives much "
        f"weight. Scale s = {projection.scale:.3f}. The two axes keep {kept:.0%} of the spread of "
        f"the {2 * n} points in {projection.queries.shape[1]} dimensions: what the plane "
        "cannot show, it squeezes, so two points that look close may not be."
    )
    write_url_after_fragment(view)


query_key_section(layer, head)

# -- 3. what-if ablation ------------------------------------------------------------------------

st.header(":material/content_cut: 3 · What if a token were not there?")
st.markdown(
    "Run the model twice: on your text, and on it with one token removed, hidden by a mask, "
    "or replaced by another word, or with one head removed (its output multiplied by 0 before "
    "W_O, as Michel et al. 2019 did to ask whether sixteen heads are better than one). The "
    "difference of the two runs is a fact about the model, not an estimate. The sentence "
    "embedding is the model's own (mean of the last layer's vectors, normalised, as "
    "sentence-transformers computes it)."
)


@st.fragment
def ablation_section(layer: int, head: int) -> None:
    moved = fit_token(view, "ablate", n)
    if moved:
        st.warning(moved, icon=":material/link_off:")
    mode = labelled_radio("How", inputs.MODES, mode_key)
    token_col, with_col, cut_col, cut_head_col = st.columns(4)
    position = (
        token_col.selectbox(
            "Token to ablate", positions, format_func=token_label, key=ablate_key,
            disabled=mode == "head",
        ) - 1
    )  # fmt: skip
    layers, heads = list(range(1, num_layers + 1)), list(range(1, num_heads + 1))
    cut_layer = cut_col.selectbox(
        "Layer of the head to remove", layers, key=cut_layer_key, disabled=mode != "head"
    )
    cut_head = cut_head_col.selectbox(
        "Head to remove", heads, key=cut_head_key, disabled=mode != "head"
    )
    replacement = with_col.text_input(
        "Replace with",
        key=with_key,
        max_chars=40,
        disabled=mode != "replace",
        help="One word piece of the model's vocabulary (a common lower-case word); left empty, "
        "[MASK], the token BERT was trained to fill in.",
    )
    replacement = replacement.strip() if mode == "replace" else ""
    ablated = (cut_layer - 1, cut_head - 1)
    try:
        ablation = data.ablation_of(model, text, position, mode, replacement, ablated)
    except AttentionInputError as error:
        with_col.error(str(error), icon=":material/edit_off:")
        write_url_after_fragment(view)
        return
    digest = data.ablation_digest(trace, position, mode, replacement, ablated)
    drawn = render.digested(digest, ablation)  # the ablation, keyed by its digest
    args = (drawn, layer, head)
    change, (i, j) = data.largest_change(ablation, layer, head)
    sim_col, weight_col = st.columns(2)
    sim_col.metric("Sentence embeddings, cosine similarity", f"{ablation.cosine:.4f}")
    weight_col.metric(
        f"Largest weight change in layer {layer + 1}, head {head + 1}",
        f"{change:+.3f}",
        help=f"query {i + 1} “{tokens[i]}” → key {j + 1} “{tokens[j]}”",
    )
    if note := data.unchanged_layer_note(ablation, layer):
        st.info(note, icon=":material/info:")
    before_col, after_col = st.columns(2)
    with before_col:
        render.show(
            render.cached(figures.ablation_figure, *args, "before"), filename="probe-before"
        )
    with after_col:
        render.show(render.cached(figures.ablation_figure, *args, "after"), filename="probe-after")
    render.show(
        render.cached(figures.ablation_figure, *args, "difference"), filename="probe-difference"
    )
    st.caption(
        "Below zero a cell lost weight, above zero it gained some (the middle of the colour "
        "bar is no change). "
        + (
            "After a removal the tokens behind it move one position forward, so some change "
            "comes from the new positions, not only from the missing word."
            if mode == "remove"
            else "The positions are the same in both runs, so each cell compares like with like."
        )
        + (
            f" Layers 1 to {cut_layer} compute the same weights in both runs, the removed "
            "head's own pattern included (only its output is dropped); the layers above read "
            "a changed residual stream."
            if mode == "head"
            else ""
        )
    )
    render.show(
        render.cached(figures.token_change_figure, drawn),
        filename="probe-token-change",
    )
    write_url_after_fragment(view)


ablation_section(layer, head)

what_to_try(
    [
        "Keep the default: replacing “tired” by “wide” takes weight of “it” off “animal” in "
        "layer 4, head 2 (look at row 11 of the difference), and “street” gains some. Try "
        "“hungry” or “busy”.",
        "Hide [SEP] (mask it), then step through the heads: those that parked their weight "
        "on [SEP] must now put it elsewhere. How far does the sentence embedding move?",
        "Follow a token through rollout: by layer 6 most rows look alike. Compare the bottom "
        "row (last layer alone) with the rollout row above it.",
        "In the query-key map, move through layer 1's heads: find the head whose queries sit "
        "next to the key of the token before them.",
        "Remove layer 3, head 2 and look at layer 4, head 2: its weights move by up to 0.22, "
        "yet the sentence embedding barely turns. Which heads can go without a trace?",
    ]
)

view.sync_url()
