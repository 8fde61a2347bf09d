"""A real pretrained model: every head of all-MiniLM-L6-v2, run by our own NumPy attention."""

import streamlit as st

from attention_core.models import BertModel
from ui.models import agreement, head_link, minilm, page_model
from ui.pretrained import (
    data,
    figures,
    head_view,
    inputs,
    model_view,
    patterns,
    questions,
    tables,
)
from ui.widgets import layout, render, small_screens, steps
from ui.widgets.layout import labelled_radio, page_intro, what_to_try
from ui.widgets.state import PageState, write_url_after_fragment

view = PageState("pretrained")
loaded = page_model.load_encoder(page_model.encoder_key(view))
num_layers, num_heads, max_tokens = loaded.shape
d_head = loaded.model.config.head_dim if isinstance(loaded.model, BertModel) else 32
page_intro(
    "Attention in a real pretrained model",
    f"Toy matrices show the mechanism; trained heads show what it is for. Type a sentence and "
    f"see all {num_layers * num_heads} heads ({num_layers} layers × {num_heads}) of "
    f"{loaded.name}, a BERT encoder, computed by this "
    "project's own NumPy attention code (it matches Hugging Face transformers to 1e-4).",
    r"\begin{aligned}\mathrm{head}_{\ell,h}(X) &= \mathrm{softmax}\!\left(\frac{Q_h K_h^\top}"
    rf"{{\sqrt{{{d_head}}}}}\right) V_h \\ Q = X W_Q^\top + b_Q,\quad K &= X W_K^\top + b_K,\quad"
    r" V = X W_V^\top + b_V\end{aligned}",
)
view.show_notices()

# Every part of the view is bound first, so a link keeps its state even when there is no model.
text_key, layer_key, head_key, token_key = minilm.sentence_view_keys(
    view, loaded.shape, text=minilm.DEFAULT_TEXT, layer=inputs.DEFAULT_LAYER,
    head=inputs.DEFAULT_HEAD, token=inputs.DEFAULT_QUERY, max_token=max_tokens,
)  # fmt: skip
view_key = view.choice_key("view", "head", list(inputs.VIEWS))
only_key = view.bool_key("only", False)
pipeline_key = view.bool_key("steps", False)

model = page_model.encoder_or_stop(view, loaded)
page_model.show_model_line(loaded, model)

# -- the text -------------------------------------------------------------------------------------

st.header(":material/edit_note: The text")
for column, (name, (title, _, _)) in zip(
    st.columns(len(minilm.PRESETS)), minilm.PRESETS.items(), strict=True
):
    column.button(
        title,
        key=f"pretrained.preset.{name}",
        on_click=inputs.use_preset,
        args=(view, name),
        width="stretch",
    )
text, trace = minilm.traced_text(view, text_key, lambda text: minilm.page_trace(model, text))
agreement.check(view, loaded, model, tuple(int(i) for i in model.tokenize(text).input_ids))
drawn = render.digested(trace.digest, trace)  # the trace for a figure, keyed by its digest

tokens = trace.labels()
n = trace.num_tokens
shown = " · ".join(layout.plain(t) for t in tokens[:80]) + (" · …" if n > 80 else "")
st.caption(f"{n} tokens (WordPiece; [CLS] and [SEP] are added by the model): {shown}")
if trace.truncated:
    st.warning(
        f"This text has {trace.num_input_tokens} tokens, but the model has only {max_tokens} "
        f"positions: it reads the first {max_tokens} (with [CLS] and [SEP]), and the last "
        f"{trace.num_input_tokens - n} tokens are cut off.",
        icon=":material/content_cut:",
    )
inputs.fit_query_token(view, tokens)

# -- which head -----------------------------------------------------------------------------------

layer_col, head_col, token_col = st.columns(3)
layer = layer_col.select_slider("Layer", list(range(1, num_layers + 1)), key=layer_key) - 1
head = head_col.select_slider("Head", list(range(1, num_heads + 1)), key=head_key) - 1
query = (
    token_col.selectbox(
        "Query token",
        list(range(1, n + 1)),
        format_func=lambda i: f"{i} · {tokens[i - 1]}",
        key=token_key,
    )
    - 1
)
query_token = layout.plain(tokens[query])
head_link.send_link(model, text, layer, head)


@st.fragment
def picture(layer: int, head: int, query: int) -> None:
    shown_view = labelled_radio("Picture", inputs.VIEWS, view_key)
    zoom = render.cached(figures.zoom_figure, drawn, layer, head, query)
    if shown_view == "head":
        st.header(f":material/linear_scale: Layer {layer + 1}, head {head + 1}: who looks at whom")
        too_long = n > head_view.MAX_HEAD_VIEW_TOKENS
        only = st.toggle(
            f"Only the lines of the query token “{query_token}”",
            key=only_key,
            disabled=too_long or n > head_view.MAX_ALL_LINES_TOKENS,
        )
        lines_col, heat_col = st.columns(2)
        with lines_col:
            if too_long:
                st.info(
                    "The line view is drawn for texts of up to "
                    f"{head_view.MAX_HEAD_VIEW_TOKENS} tokens; the heatmap beside it shows all "
                    "of them.",
                    icon=":material/info:",
                )
            else:
                only_lines = only or n > head_view.MAX_ALL_LINES_TOKENS
                lines = render.cached(
                    head_view.head_view_figure, drawn, layer, head, query, only_lines
                )
                render.show(lines, filename=f"bert-head-view-l{layer + 1}-h{head + 1}")
                st.caption(
                    "Each line joins a query (left) to a key (right); the thicker and darker, the "
                    f"more weight. Lines under {head_view.MIN_LINE_WEIGHT:.0%} are not "
                    f"drawn. Red: the query “{query_token}”; hover its keys for the weights."
                )
        with heat_col:
            render.show(zoom, filename=f"bert-weights-l{layer + 1}-h{head + 1}")
    elif shown_view == "model":
        st.header(":material/grid_view: Every head at once")
        model_view.show_model_view(view, trace, layer, head)
        if (view.value("layer") - 1, view.value("head") - 1) != (layer, head):
            st.rerun()  # a click on a tile picked another head: the whole page follows it
        st.caption(
            "One small map per head (rows queries, columns keys, as everywhere): layer down, head "
            f"across. Click a map to zoom into it; framed, the head chosen (layer {layer + 1}, "
            f"head {head + 1}), zoomed below. Early layers look at neighbours; many later heads "
            "park their weight on [CLS] or [SEP] (see the labels below)."
            + (
                " Long texts are averaged over blocks of tokens here."
                if n > model_view.MAX_TILE
                else ""
            )
        )
        render.show(zoom, filename=f"bert-weights-l{layer + 1}-h{head + 1}")
    else:
        st.header(":material/layers: Each layer, averaged over its heads")
        averages = render.cached(figures.averages_figure, drawn, layer)
        render.show(averages, filename="bert-layer-averages")
        st.caption(
            "The mean of the 12 heads of each layer. Averages blur heads with different jobs into "
            "one picture: compare with the single heads in the model view."
        )
    write_url_after_fragment(view)


picture(layer, head, query)
inputs.compare_heads(view, trace, layer, head)
questions.ask_questions(view, trace, layer, tokens)
label = patterns.PATTERN_TITLES[str(trace.patterns.labels[layer, head])]

# -- what the heads do ----------------------------------------------------------------------------

st.header(":material/label: What each head does")
st.markdown(
    "Simple detectors label each head by where its weight goes on this text: the score is the "
    f"mean over queries; a head gets a label when that share reaches "
    f"{trace.patterns.threshold:.0%}, *broad* when its weight is spread almost evenly "
    f"(normalised entropy ≥ {trace.patterns.broad_threshold:.0%}), otherwise *mixed*."
)
render.show(render.cached(figures.roles_figure, drawn), filename="bert-head-roles")
counts = tables.label_counts(trace)
st.caption("Heads per label: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
scores_col, sink_col = st.columns([3, 2])
with scores_col:
    st.markdown(f"**Layer {layer + 1}, head {head + 1}: {label}**")
    small_screens.table(
        tables.head_scores_table(trace, layer, head),
        hide_index=True,
        column_config={
            "score": st.column_config.NumberColumn(format="%.3f"),
            "what the score is": st.column_config.TextColumn(width="large"),
        },
        key="pretrained.head_scores",
    )
with sink_col:
    share = trace.patterns.special_share()
    st.markdown(
        f"**Why so much weight on [CLS] and [SEP]?** Here {share:.0%} of all attention weight "
        "(every head, every query) lands on those two tokens. A softmax row must sum to 1, so "
        "a head with nothing to look for in this sentence still has to put its weight "
        "somewhere; BERT models learn to park it on tokens that are always there. Studies of "
        "BERT found that the values these tokens pass on are small, so the parked weight "
        "changes the output little: an *attention sink*, a no-op (Clark et al. 2019; "
        "Kobayashi et al. 2020). In GPT-style models the first token plays this part (Xiao et "
        "al. 2023)."
    )

# -- one row, step by step ------------------------------------------------------------------------

st.header(
    f":material/calculate: Layer {layer + 1}, head {head + 1}, query “{query_token}”, step by step"
)
one, difference = data.head_steps(trace, layer, head)
q = trace.q_heads[layer, head]
k = trace.k_heads[layer, head]
v = trace.v_heads[layer, head]
agreement = (
    "exactly the model's own weights"
    if difference == 0
    else f"weights within {difference:.0e} of the model's own"
)
st.markdown(
    f"This head reads its own slice of the model's Q, K and V: q, k, v of shape "
    f"`({n}, {q.shape[-1]})` (one row per token). Scaled dot-product attention rerun on "
    f"them gives {agreement}; here is every step for the query “{query_token}”."
)
if n <= tables.MAX_WRITTEN_KEYS:
    steps.explain_row(one, query, q=q, k=k, v=v, query_labels=tokens, key_labels=tokens)
else:
    st.caption(
        f"{n} keys are too many to write out one by one: the row of query {query + 1} "
        f"“{query_token}”, key by key."
    )
    small_screens.table(
        tables.row_table(one, query, tokens),
        hide_index=True,
        column_config={
            name: st.column_config.NumberColumn(format="%.4f")
            for name in ("score q·k", "scaled", "weight")
        },
        key="pretrained.row",
    )


@st.fragment
def step_heatmaps(layer: int, head: int) -> None:
    if st.toggle("Show every step as a heatmap", key=pipeline_key):
        if n <= data.MAX_PIPELINE_TOKENS:
            steps.show_pipeline(
                one,
                q=q,
                k=k,
                v=v,
                query_labels=tokens,
                key_labels=tokens,
                key="pretrained.pipeline",
                filename=f"bert-l{layer + 1}-h{head + 1}",
            )
        else:
            st.info(
                "The step heatmaps are drawn for texts of up to "
                f"{data.MAX_PIPELINE_TOKENS} tokens; this one has {n}.",
                icon=":material/info:",
            )
    write_url_after_fragment(view)


step_heatmaps(layer, head)

what_to_try(
    [
        "Open “it” = animal?, layer 4, head 2, query “it”: most of its weight goes to "
        "“animal”. Then pick “it” = street? (“tired” becomes “wide”): the weight on “animal” "
        "drops and “street” gains.",
        "Step through the heads of layer 1 in the model view: find a previous-token head and a "
        "next-token head (their maps are one diagonal off the middle).",
        "Pick Repeated words: do the two “cat” tokens attend alike? They have the same word "
        "embedding but different positions.",
        "Count the [SEP] heads in the table, then read the note on attention sinks.",
        "Pick Over 512 tokens: the text is cut at the model's 512 positions.",
        "Follow **Edit layer 4, head 2 in the step-by-step page** and add 3 to one number of the "
        "query “it”: only its row of weights moves. Which key gains?",
    ]
)

view.sync_url()
