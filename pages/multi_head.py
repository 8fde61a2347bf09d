"""Multi-head attention, head by head: split, attend, concatenate, mix with W_O."""

import streamlit as st

from attention_core import (
    AttentionInputError,
    causal_mask,
    init_multi_head_params,
    multi_head_attention,
)
from ui.multi_head import figures, flow, heads, inputs, patterns, questions, torch_parity
from ui.multi_head.labels import shape_text
from ui.widgets import heatmaps, render
from ui.widgets.layout import page_intro, stale_notice, what_to_try
from ui.widgets.state import PageState, write_url_after_fragment

view = PageState("multi_head")
page_intro(
    "Multi-head attention, head by head",
    "One attention head gives each query one pattern of weights over the keys. Multi-head "
    "attention runs several smaller heads side by side, each on its own slice of the features, "
    "so one head can follow the previous word while another looks elsewhere; their outputs are "
    "put side by side again and mixed by one more projection, W_O.",
    r"\begin{aligned}\mathrm{MultiHead}(X) &= \mathrm{Concat}(\mathrm{head}_1, \dots,"
    r" \mathrm{head}_h)\,W_O^\top + b_O \\ \mathrm{head}_i &= \mathrm{softmax}\!\left("
    r"\frac{Q_i K_i^\top}{\sqrt{d_\mathrm{head}}}\right) V_i \\ Q &= X W_Q^\top + b_Q,"
    r"\quad K = X W_K^\top + b_K,\quad V = X W_V^\top + b_V\end{aligned}",
)
view.show_notices()

# -- controls -------------------------------------------------------------------------------------

tokens_col, sizes_col, options_col = st.columns(3)
with tokens_col:
    source = inputs.labelled_radio(view, "Tokens", "source", inputs.TOKEN_SOURCES, "sentence")
    q_tokens = inputs.token_input(view, source, inputs.QUERY_TOKENS)
with sizes_col:
    d_model = st.select_slider(
        "d_model (features per token)",
        inputs.D_MODELS,
        key=view.choice_key("d_model", 8, inputs.D_MODELS),
    )
    num_heads = inputs.head_count(view, "heads", d_model)
    seed = st.number_input(
        "Seed (embeddings and weights)",
        0,
        inputs.MAX_SEED,
        step=1,
        key=view.int_key("seed", 0, lo=0, hi=inputs.MAX_SEED),
    )
with options_col:
    kind = inputs.labelled_radio(view, "Attention", "attention", inputs.ATTENTION_KINDS, "self")
    cross = kind == "cross"
    kv_tokens = inputs.token_input(view, source, inputs.KV_TOKENS) if cross else q_tokens
    causal = st.toggle(
        "Causal mask",
        key=view.bool_key("causal", False),
        help="Aligned to the top-left corner, as torch's is_causal=True, also when the number "
        "of keys differs: query i sees keys 1..i.",
    )

params = init_multi_head_params(d_model, num_heads, seed)
d_head = d_model // num_heads
st.caption(
    f"d_head = d_model / heads = {d_model} / {num_heads} = {d_head}. Parameters: "
    f"4·d_model² + 4·d_model = 4·{d_model}² + 4·{d_model} = **{params.num_parameters:,}**, "
    "the same for any number of heads (W_Q, W_K, W_V, W_O and their biases)."
)
metric_cols = st.columns(4)
metric_cols[0].metric("d_model", d_model)
metric_cols[1].metric("heads", num_heads)
metric_cols[2].metric("d_head", d_head)
metric_cols[3].metric("parameters", f"{params.num_parameters:,}")

st.markdown(
    flow.flow_diagram(
        q_len=len(q_tokens),
        k_len=len(kv_tokens),
        d_model=d_model,
        num_heads=num_heads,
        cross=cross,
        causal=causal,
    ),
    unsafe_allow_html=True,
)

# -- 1. the input -------------------------------------------------------------------------------

st.header(":material/input: 1 · The input X")
st.markdown(
    "One row per token, d_model numbers each: a seeded random embedding per token (a repeated "
    "word gets the same row). Untrained, so the patterns below are arbitrary, not linguistic."
)
x_q_input = inputs.linked_matrix_editor(view, "x", q_tokens, d_model, seed, name="X")
x_kv_input = None
if cross:
    st.markdown("Keys and values come from the second sentence, X_kv:")
    x_kv_input = inputs.linked_matrix_editor(view, "xkv", kv_tokens, d_model, seed, name="X_kv")
stale = x_q_input.stale or (x_kv_input is not None and x_kv_input.stale)
if stale:
    stale_notice("X" if x_q_input.stale else "X_kv")
x_q = x_q_input.values
x_kv = None if x_kv_input is None else x_kv_input.values

mask = causal_mask(len(q_tokens), len(kv_tokens)) if causal else None
try:
    steps = multi_head_attention(x_q, x_kv, params=params, num_heads=num_heads, mask=mask)
except AttentionInputError as error:
    st.error(str(error), icon=":material/error:")
    view.sync_url()
    st.stop()

# -- 2. projections -----------------------------------------------------------------------------

st.header(":material/transform: 2 · Project: Q, K, V")
st.markdown(
    f"Three learned `({d_model}, {d_model})` matrices, in torch's `nn.Linear` layout: "
    f"`Q = X W_Qᵀ + b_Q`, and the same for K and V"
    + (" from X_kv." if cross else ".")
    + " Head h uses only the rows of W_Q, W_K, W_V framed in its colour."
)
render.show(
    render.cached(
        figures.projections_figure,
        (("W_Q", params.w_q), ("W_K", params.w_k), ("W_V", params.w_v)),
        num_heads,
        heads_on="rows",
    ),
    filename="multi-head-w_q-w_k-w_v",
)

# -- 3. split into heads ------------------------------------------------------------------------


@st.fragment
def split_into_heads(view: PageState, steps, q_tokens: list[str], kv_tokens: list[str]):
    split_of = st.radio(
        "Show the split of",
        ("Q", "K", "V"),
        horizontal=True,
        key=view.choice_key("split", "Q", ("Q", "K", "V")),
    )
    matrix, per_head, tokens = {
        "Q": (steps.q, steps.q_heads, q_tokens),
        "K": (steps.k, steps.k_heads, kv_tokens),
        "V": (steps.v, steps.v_heads, kv_tokens),
    }[split_of]
    render.show(
        render.cached(figures.head_split_figure, matrix, per_head, tokens=tokens, name=split_of),
        filename=f"multi-head-split-{split_of.lower()}",
    )
    write_url_after_fragment(view)


st.header(":material/view_column: 3 · Split into heads")
st.markdown(
    f"No new numbers: `split_heads` cuts the {d_model} columns into {num_heads} groups of "
    f"{d_head}, one per head, and moves the head axis in front: "
    f"`(pos, d_model) → (head, pos, d_head)`."
)
split_into_heads(view, steps, q_tokens, kv_tokens)

# -- 4 to 6: every head's pattern, their statistics, one head zoomed (the zoom drives 4 and 6) ----


@st.fragment
def each_head(view: PageState, steps, q_tokens: list[str], kv_tokens: list[str]):
    weights = steps.attention.weights  # (head, q_pos, k_pos)
    num_heads, _, k_len = weights.shape
    d_head = steps.q_heads.shape[-1]
    st.header(":material/grid_view: 4 · Each head attends on its own")
    st.markdown(
        f"Each head runs scaled dot-product attention on its slice: scores "
        f"`{shape_text(weights.shape)}` scaled by 1/√{d_head}, softmax over keys, times its "
        f"`{shape_text((k_len, d_head))}` values."
    )
    head_numbers = list(range(1, num_heads + 1))
    zoom = st.selectbox(
        "Zoom into head",
        head_numbers,
        format_func=lambda h: f"head {h}",
        key=view.choice_key("head", 1, head_numbers),
    )
    pattern = render.cached(
        patterns.pattern_grid,
        weights,
        query_labels=q_tokens,
        key_labels=kv_tokens,
        highlight=zoom - 1,
    )
    render.show(pattern, filename=f"multi-head-patterns-{num_heads}-heads")
    st.caption(
        "Rows are queries, columns keys; every row sums to 1. The last panel averages the heads "
        "(what `nn.MultiheadAttention` returns by default); section 5 says why it misleads."
    )

    st.header(":material/analytics: 5 · What each head does, in numbers")
    table = patterns.head_statistics_table(weights)
    patterns.show_statistics_table(table)
    st.caption(
        "Means over queries. Entropy: 0 when a query puts all its weight on one key, log(keys) "
        "when it spreads evenly. → previous token / itself / first token: the weight a query "
        "gives to key i−1, to key i, to key 1."
    )
    st.markdown(patterns.averaging_note(table))
    entropy = render.cached(patterns.entropy_figure, weights, tokens=q_tokens)
    render.show(entropy, filename="multi-head-entropy")

    st.header(f":material/zoom_in: 6 · Head {zoom}, step by step")
    heads.show_zoomed_head(view, steps, zoom - 1, query_labels=q_tokens, key_labels=kv_tokens)
    write_url_after_fragment(view)


each_head(view, steps, q_tokens, kv_tokens)
heads.compare_heads(view, steps.attention.weights, q_tokens, kv_tokens)
questions.ask_questions(view, steps, q_tokens)

# -- 7. concatenate and project -----------------------------------------------------------------

st.header(":material/merge: 7 · Concatenate, then mix with W_O")
st.markdown(
    f"The heads' outputs `{shape_text(steps.attention.output.shape)}` are put side by side "
    f"again: concat `{shape_text(steps.concat.shape)}`, each head's columns in its colour. "
    f"W_O `({d_model}, {d_model})` then mixes them: `output = concat W_Oᵀ + b_O`, "
    f"`{shape_text(steps.output.shape)}`. Without W_O a head could only ever write into its "
    "own columns."
)
concat_col, wo_col = st.columns([3, 2])
with concat_col:
    render.show(
        render.cached(
            figures.banded_matrix_figure,
            steps.concat,
            num_heads,
            tokens=q_tokens,
            title=f"concat {shape_text(steps.concat.shape)}",
        ),
        filename="multi-head-concat",
    )
with wo_col:
    render.show(
        render.cached(
            figures.projections_figure, (("W_O", params.w_o),), num_heads, heads_on="cols"
        ),
        filename="multi-head-w_o",
    )
render.show(
    render.cached(
        heatmaps.heatmap,
        steps.output,
        row_labels=q_tokens,
        col_labels=[f"f{j + 1}" for j in range(d_model)],
        kind="values",
        title=f"output {shape_text(steps.output.shape)}",
        col_title="feature",
    ),
    filename="multi-head-output",
)

# -- 8. same as torch ---------------------------------------------------------------------------

st.header(":material/verified: 8 · Same as torch")
torch_parity.panel(view, x_q, x_kv, (d_model, num_heads, seed), causal)

what_to_try(
    [
        "Go from 1 head to many at the same d_model: the parameter count stays the same, each "
        "head gets fewer features (d_head), and the patterns become more varied.",
        "Type the same word twice in the sentence: both rows of X, Q, K, V are identical, so "
        "their rows in every pattern are too. Nothing here knows about word order (see the "
        "positional-encoding page).",
        "Turn on the causal mask and compare the heads' → first token numbers: early keys "
        "collect more weight when later ones are hidden.",
        "Switch to cross-attention with a longer second sentence: the patterns become "
        "rectangles, one row per query and one column per key.",
        "Change the seed: different random weights give different patterns. Trained heads "
        "learn roles; see them on the pretrained-model page.",
    ]
)

view.sync_url()
