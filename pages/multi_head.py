import streamlit as st

from attention_core import (
    AttentionInputError,
    causal_mask,
    init_multi_head_params,
    multi_head_attention,
)
from attention_core.reference import TORCH_INSTALL_COMMAND, TorchNotInstalledError
from ui import charts
from ui import multihead_views as mv
from ui.layout import page_intro, stale_notice, what_to_try
from ui.state import PageState

view = PageState("mha")
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
    source = st.radio(
        "Tokens",
        mv.TOKEN_SOURCES,
        format_func=mv.TOKEN_SOURCES.get,
        horizontal=True,
        key=view.choice("source", "sentence", list(mv.TOKEN_SOURCES)),
    )
    if source == "sentence":
        sentence = st.text_input(
            "Sentence (queries)",
            key=view.text("sentence", mv.DEFAULT_SENTENCE, max_chars=200),
            max_chars=200,
        )
        q_tokens, problem = mv.tokens_from_sentence(sentence)
    else:
        n_q = st.slider(
            "Number of tokens", 1, mv.MAX_TOKENS, key=view.int("n", 6, lo=1, hi=mv.MAX_TOKENS)
        )
        q_tokens, problem = mv.numbered_tokens(n_q, "t"), None
    if problem:
        st.error(problem, icon=":material/edit_off:")
with sizes_col:
    d_model = st.select_slider(
        "d_model (features per token)", mv.D_MODELS, key=view.choice("d_model", 8, mv.D_MODELS)
    )
    head_options = mv.head_counts(d_model)
    mv.keep_heads_valid(view, "heads", head_options)
    num_heads = st.select_slider(
        "Number of heads (divisors of d_model)",
        head_options,
        key=view.choice("heads", 4, head_options),
    )
    seed = st.number_input(
        "Seed (embeddings and weights)", 0, mv.MAX_SEED, step=1, key=view.int("seed", 0, lo=0,
        hi=mv.MAX_SEED),
    )  # fmt: skip
with options_col:
    kind = st.radio(
        "Attention",
        mv.ATTENTION_KINDS,
        format_func=mv.ATTENTION_KINDS.get,
        horizontal=True,
        key=view.choice("attention", "self", list(mv.ATTENTION_KINDS)),
    )
    cross = kind == "cross"
    if cross and source == "sentence":
        kv_sentence = st.text_input(
            "Second sentence (keys and values)",
            key=view.text("kv_sentence", mv.DEFAULT_KV_SENTENCE, max_chars=200),
            max_chars=200,
        )
        kv_tokens, kv_problem = mv.tokens_from_sentence(kv_sentence, mv.DEFAULT_KV_SENTENCE)
        if kv_problem:
            st.error(kv_problem, icon=":material/edit_off:")
    elif cross:
        n_kv = st.slider(
            "Number of key/value tokens",
            1,
            mv.MAX_TOKENS,
            key=view.int("n_kv", 4, lo=1, hi=mv.MAX_TOKENS),
        )
        kv_tokens = mv.numbered_tokens(n_kv, "s")
    else:
        kv_tokens = q_tokens
    causal = st.toggle(
        "Causal mask",
        key=view.bool("causal", False),
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

st.graphviz_chart(
    mv.flow_diagram(
        q_len=len(q_tokens),
        k_len=len(kv_tokens),
        d_model=d_model,
        num_heads=num_heads,
        cross=cross,
        causal=causal,
    ),
    width="stretch",
)

# -- 1. the input -------------------------------------------------------------------------------

st.subheader(":material/input: 1 · The input X")
st.markdown(
    "One row per token, d_model numbers each: a seeded random embedding per token (a repeated "
    "word gets the same row). Untrained, so the patterns below are arbitrary, not linguistic."
)
x_q_input = mv.linked_matrix_editor(
    view, "x", q_tokens, d_model, seed, name="X", small=mv.editable(len(q_tokens), d_model)
)
x_kv_input = None
if cross:
    st.markdown("Keys and values come from the second sentence, X_kv:")
    x_kv_input = mv.linked_matrix_editor(
        view,
        "xkv",
        kv_tokens,
        d_model,
        seed,
        name="X_kv",
        small=mv.editable(len(kv_tokens), d_model),
    )
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
weights = steps.attention.weights  # (head, q_pos, k_pos)

# -- 2. projections -----------------------------------------------------------------------------

st.subheader(":material/transform: 2 · Project: Q, K, V")
st.markdown(
    f"Three learned `({d_model}, {d_model})` matrices, in torch's `nn.Linear` layout: "
    f"`Q = X W_Qᵀ + b_Q`, and the same for K and V"
    + (" from X_kv." if cross else ".")
    + " Head h uses only the rows of W_Q, W_K, W_V framed in its colour."
)
charts.show(
    mv.cached(
        mv.projections_figure,
        (("W_Q", params.w_q), ("W_K", params.w_k), ("W_V", params.w_v)),
        num_heads,
        heads_on="rows",
    ),
    filename="multi-head-w_q-w_k-w_v",
)

# -- 3. split into heads ------------------------------------------------------------------------

st.subheader(":material/view_column: 3 · Split into heads")
st.markdown(
    f"No new numbers: `split_heads` cuts the {d_model} columns into {num_heads} groups of "
    f"{d_head}, one per head, and moves the head axis in front: "
    f"`(pos, d_model) → (head, pos, d_head)`."
)
split_of = st.radio(
    "Show the split of",
    ("Q", "K", "V"),
    horizontal=True,
    key=view.choice("split", "Q", ("Q", "K", "V")),
)
split_matrix, split_heads_array, split_tokens = {
    "Q": (steps.q, steps.q_heads, q_tokens),
    "K": (steps.k, steps.k_heads, kv_tokens),
    "V": (steps.v, steps.v_heads, kv_tokens),
}[split_of]
charts.show(
    mv.cached(
        mv.head_split_figure,
        split_matrix,
        split_heads_array,
        tokens=split_tokens,
        name=split_of,
    ),
    filename=f"multi-head-split-{split_of.lower()}",
)

# -- 4. every head's pattern --------------------------------------------------------------------

st.subheader(":material/grid_view: 4 · Each head attends on its own")
st.markdown(
    f"Each head runs scaled dot-product attention on its slice: scores "
    f"`{mv.shape_text((num_heads, len(q_tokens), len(kv_tokens)))}` scaled by 1/√{d_head}, "
    f"softmax over keys, times its `{mv.shape_text((len(kv_tokens), d_head))}` values."
)
zoom = st.selectbox(
    "Zoom into head",
    list(range(1, num_heads + 1)),
    format_func=lambda h: f"head {h}",
    key=view.choice("head", 1, list(range(1, num_heads + 1))),
)
charts.show(
    mv.cached(
        mv.pattern_grid,
        weights,
        query_labels=q_tokens,
        key_labels=kv_tokens,
        highlight=zoom - 1,
    ),
    filename=f"multi-head-patterns-{num_heads}-heads",
)
st.caption(
    "Rows are queries, columns keys; every row sums to 1. The last panel averages the heads "
    "(what `nn.MultiheadAttention` returns by default); section 5 says why it misleads."
)

# -- 5. statistics ------------------------------------------------------------------------------

st.subheader(":material/analytics: 5 · What each head does, in numbers")
table = mv.head_statistics_table(weights)
mv.show_statistics_table(table)
st.caption(
    "Means over queries. Entropy: 0 when a query puts all its weight on one key, log(keys) when "
    "it spreads evenly. → previous token / itself / first token: the weight a query gives to "
    "key i−1, to key i, to key 1."
)
st.markdown(mv.averaging_note(table))
charts.show(mv.cached(mv.entropy_figure, weights, tokens=q_tokens), filename="multi-head-entropy")

# -- 6. zoom ------------------------------------------------------------------------------------

st.subheader(f":material/zoom_in: 6 · Head {zoom}, step by step")
mv.show_zoomed_head(view, steps, zoom - 1, query_labels=q_tokens, key_labels=kv_tokens)

# -- 7. concatenate and project -----------------------------------------------------------------

st.subheader(":material/merge: 7 · Concatenate, then mix with W_O")
st.markdown(
    f"The heads' outputs `{mv.shape_text(steps.attention.output.shape)}` are put side by side "
    f"again: concat `{mv.shape_text(steps.concat.shape)}`, each head's columns in its colour. "
    f"W_O `({d_model}, {d_model})` then mixes them: `output = concat W_Oᵀ + b_O`, "
    f"`{mv.shape_text(steps.output.shape)}`. Without W_O a head could only ever write into its "
    "own columns."
)
concat_col, wo_col = st.columns([3, 2])
with concat_col:
    charts.show(
        mv.cached(
            mv.banded_matrix_figure,
            steps.concat,
            num_heads,
            tokens=q_tokens,
            title=f"concat {mv.shape_text(steps.concat.shape)}",
        ),
        filename="multi-head-concat",
    )
with wo_col:
    charts.show(
        mv.cached(mv.projections_figure, (("W_O", params.w_o),), num_heads, heads_on="cols"),
        filename="multi-head-w_o",
    )
charts.show(
    mv.cached(
        charts.heatmap,
        steps.output,
        row_labels=q_tokens,
        col_labels=[f"f{j + 1}" for j in range(d_model)],
        kind="values",
        title=f"output {mv.shape_text(steps.output.shape)}",
        col_title="feature",
    ),
    filename="multi-head-output",
)

# -- 8. same as torch ---------------------------------------------------------------------------

st.subheader(":material/verified: 8 · Same as torch")
try:
    comparison = mv.torch_comparison(x_q, x_kv, d_model, num_heads, seed, causal)
except TorchNotInstalledError as error:
    st.info(str(error), icon=":material/download:")
    st.code(TORCH_INSTALL_COMMAND, language="bash")
else:
    st.markdown(
        "`torch.nn.MultiheadAttention(batch_first=True)` loaded with the same W_Q, W_K, W_V, "
        f"W_O and biases, run in {comparison.dtype} (torch {comparison.torch_version}), "
        "per-head weights with `average_attn_weights=False`:"
    )
    left, right = st.columns(2)
    left.metric("largest |ours − torch|, output", f"{comparison.output_difference:.1e}")
    right.metric("largest |ours − torch|, weights", f"{comparison.weights_difference:.1e}")
    st.caption("Differences near 1e-7 are float32 rounding: our NumPy code computes in float64.")

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
