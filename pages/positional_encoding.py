import streamlit as st

from attention_core import AttentionInputError
from attention_core.position_lab import PERMUTATIONS, POSITION_FAMILIES, SENTENCE_ENCODINGS
from ui import charts
from ui import positional_views as pv
from ui.layout import page_intro, what_to_try
from ui.state import PageState

MAX_WORDS = 8
BASES = [2, 10, 100, 1000, 10000, 100000, 500000, 1000000]
DEFAULT_SENTENCE = "I love AI"

view = PageState("pe")
page_intro(
    "Positional encoding",
    "Attention compares every token with every other token, but nothing in "
    "softmax(QKᵀ/√d)V says **where** a token stands: shuffle the sentence and each word gets "
    "the same result as before. Positional encodings put order back, either by adding a "
    "position vector to each embedding, or by making the query·key score depend on the distance.",
    r"PE_{p,\,2i} = \sin\!\left(\frac{p}{\text{base}^{2i/d_{\text{model}}}}\right),\qquad "
    r"PE_{p,\,2i+1} = \cos\!\left(\frac{p}{\text{base}^{2i/d_{\text{model}}}}\right)",
)
view.show_notices()

# -- 1. order blindness ------------------------------------------------------------------------

st.header("Attention alone ignores order", divider="gray")
st.markdown(
    "Run the same self-attention layer on a sentence and on a reordering of it. Without "
    "positions, every word gets exactly the output it had before, just in another row: "
    "attention treats the sentence as a bag of words."
)
left, middle, right = st.columns([5, 3, 4])
sentence = left.text_input(
    "Sentence", key=view.text("sentence", DEFAULT_SENTENCE, max_chars=200), max_chars=200
)
order_kind = middle.selectbox(
    "Reorder it", PERMUTATIONS, key=view.choice("order", "reverse", PERMUTATIONS)
)
encoding = right.segmented_control(
    "Positions added to the embeddings",
    SENTENCE_ENCODINGS,
    key=view.choice("family", "none", SENTENCE_ENCODINGS),
    required=True,
)
words = sentence.split()
if not words:
    left.error("The sentence is empty: type a few words separated by spaces.")
    words = DEFAULT_SENTENCE.split()
elif len(words) > MAX_WORDS:
    left.error(f"Only the first {MAX_WORDS} words are used: attention tables stay readable.")
    words = words[:MAX_WORDS]
tokens = tuple(words)
width_column, seed_column = st.columns(2)
width = width_column.slider(
    "Embedding width for the sentence (d_model)",
    2,
    16,
    step=2,
    key=view.int("width", 4, lo=2, hi=16),
    help="Kept small so every number fits; the sliders below go up to 1024.",
)
seed = seed_column.number_input(
    "Random seed (embeddings, attention weights, learned table)",
    min_value=0,
    max_value=999,
    key=view.int("seed", 0, lo=0, hi=999),
)

try:
    blind = pv.blindness(tokens, order_kind, width, encoding, seed, 10000.0)
    figures = pv.blindness_figures(tokens, order_kind, width, encoding, seed, 10000.0)
except AttentionInputError as error:
    st.error(str(error))
    blind = None
if blind is not None:
    st.markdown(f"**{' '.join(tokens)}** → **{' '.join(blind.permuted.tokens)}**")
    a, b = st.columns(2)
    with a:
        charts.show(figures["weights"], filename="order-blindness-weights")
    with b:
        charts.show(figures["permuted_weights"], filename="order-blindness-weights-reordered")
    a, b = st.columns(2)
    with a:
        charts.show(figures["output"], filename="order-blindness-output")
    with b:
        charts.show(figures["unpermuted_output"], filename="order-blindness-output-reordered")
    difference_column, figure_column = st.columns([2, 3])
    difference_column.metric(
        "max |difference|",
        f"{blind.max_abs_difference:.2e}",
        help="max over tokens and dimensions of |output − reordered output put back in order|",
    )
    if encoding == "none":
        difference_column.success(
            "Zero, up to floating-point rounding: without positions, reordering the words "
            "only reorders the rows of the output.",
            icon=":material/check_circle:",
        )
    else:
        difference_column.info(
            f"With {encoding} positions the same word sits at another position, gets another "
            "input vector, and so another output.",
            icon=":material/info:",
        )
    with figure_column:
        charts.show(figures["difference"], filename="order-blindness-difference")

# -- 2. the sinusoidal table -------------------------------------------------------------------

st.header("Sinusoidal encoding", divider="gray")
st.markdown(
    "Each pair of dimensions (2i, 2i+1) is a point going round a circle as the position grows: "
    "fast for the first pairs, ever slower for the last, like the hands of a clock. Together "
    "they give every position a unique pattern of values between −1 and 1."
)
d_key = view.int("d_model", 64, lo=2, hi=1024)
if view.value("d_model") % 2:
    odd = view.value("d_model")
    view.set("d_model", odd - 1)
    view.notices.append(
        f"The link's `d_model={odd}` was rounded to {odd - 1}: the encodings use (sin, cos) "
        "pairs, so d_model is even here."
    )
a, b, c = st.columns(3)
d_model = a.slider("d_model (dimensions)", 2, 1024, step=2, key=d_key)
n = b.slider("Positions", 2, 2048, key=view.int("positions", 128, lo=2, hi=2048))
base = c.select_slider(
    "Base", BASES, key=view.choice("base", 10000, BASES), help="10000 in the original paper."
)

charts.show(pv.pe_figure(n, d_model, base), filename=f"sinusoidal-pe-{n}x{d_model}")
if max(n, d_model) > charts.MAX_SIDE:
    st.caption(
        f"The table has {n:,} × {d_model:,} entries, more than a screen has pixels: the picture "
        "averages blocks of cells (see its title); the plots and the table below use exact "
        "values."
    )

st.subheader("Dimensions across positions")
st.latex(r"\lambda_i = 2\pi \cdot \text{base}^{2i/d_{\text{model}}}")
default_dims = [j for j in (0, 1, 8, 32) if j < d_model]
dims = st.multiselect(
    "Dimensions to plot",
    list(range(d_model)),
    key=pv.keep(view.multi("dims", default_dims, list(range(d_model)))),
    help="Even dimensions are sines, odd ones cosines; the legend gives each wavelength.",
)
if len(dims) > 8:
    st.caption("The first 8 chosen dimensions are plotted.")
if dims:
    charts.show(pv.dimensions_figure(n, d_model, base, dims[:8]), filename="sinusoidal-dimensions")
else:
    st.info("Choose at least one dimension to plot.", icon=":material/info:")

st.subheader("The exact values at one position")
position = st.slider(
    "Position p",
    0,
    n - 1,
    key=pv.keep(view.int("position", 1, lo=0, hi=n - 1)),
)
st.markdown(
    "Check a hand calculation: with d_model = 4 and p = 1 the row is "
    "(sin 1, cos 1, sin 0.01, cos 0.01), because ω₁ = 10000^(−2/4) = 0.01."
)
st.dataframe(
    pv.breakdown_frame(pv.breakdown(position, d_model, base)),
    hide_index=True,
    height=260,
    column_config={
        "ω_i = base^(-2i/d)": st.column_config.NumberColumn(format="%.6g"),
        "angle p·ω_i": st.column_config.NumberColumn(format="%.6g"),
        "wavelength 2π/ω_i": st.column_config.NumberColumn(format="%.6g"),
        "PE[p, dimension]": st.column_config.NumberColumn(format="%.10f"),
    },
)

# -- 3. similarity and rotation ----------------------------------------------------------------

st.header("Similar positions, and a shift that is a rotation", divider="gray")
st.markdown(
    "The dot product of two rows depends only on how far apart they are: "
    "PE(p)·PE(p+k) = Σᵢ cos(ωᵢ k), the same for every p. Near positions are alike, far ones "
    "less so (though not monotonically)."
)
charts.show(pv.similarity_figure(n, d_model, base), filename=f"pe-similarity-{n}x{d_model}")
profile = pv.similarity_profile(n, d_model, base)
charts.show(pv.similarity_profile_figure(n, d_model, base), filename="pe-dot-by-distance")
st.caption(
    f"Largest spread over p at any distance: {profile.spread:.1e} (rounding), so the three lines "
    "coincide: the similarity is a function of the distance alone."
)

st.subheader("PE(p+k) is a rotation of PE(p)")
st.markdown(
    "For a fixed offset k one matrix M_k, made of a 2×2 rotation by ωᵢk for each pair, maps "
    "every PE(p) to PE(p+k): sin(a+b) = sin a cos b + cos a sin b, and "
    "cos(a+b) = cos a cos b − sin a sin b. A linear layer can therefore learn to look "
    "“k tokens back”."
)
a, b = st.columns(2)
offset = a.slider("Offset k", 0, n - 1, key=pv.keep(view.int("offset", 4, lo=0, hi=n - 1)))
pair_key = pv.keep(view.int("pair", 0, lo=0, hi=d_model // 2 - 1))
if d_model > 2:
    pair = b.slider("Frequency pair i", 0, d_model // 2 - 1, key=pair_key)
else:
    pair = 0
    b.caption("d_model = 2 has a single frequency pair, i = 0.")
try:
    example = pv.rotation(position, offset, pair, d_model, base)
    check = pv.shift(n, d_model, offset, base)
except AttentionInputError as error:
    st.error(str(error))
else:
    st.latex(pv.rotation_latex(example))
    values, error_column = st.columns(2)
    values.markdown(
        f"Table value PE({position + offset})"
        f"<sub>{2 * pair},{2 * pair + 1}</sub> = "
        f"({example.actual[0]:.6f}, {example.actual[1]:.6f})",
        unsafe_allow_html=True,
    )
    error_column.metric(
        f"Largest |PE(p+{offset}) − M·PE(p)| over all p and dimensions",
        f"{check.max_abs_error:.1e}",
        help=f"Measured over the {n - offset:,} positions p with p+k in the table.",
    )
    error_column.caption(
        "Rounding only: about 1e-16 per operation, growing with p because the angles p·ω are "
        "themselves rounded."
    )

# -- 4. adding to the embeddings ---------------------------------------------------------------

st.header("Token embedding + position = the model's input", divider="gray")
st.markdown(
    f"The sentence from the top, with d_model = {width}: each word's embedding (the same "
    "wherever the word stands) plus the sinusoidal row of its position (base 10000). Set "
    "“Positions added” above to *sinusoidal* to see these very inputs change the outputs."
)
try:
    added = pv.blindness_figures(tokens, order_kind, width, "sinusoidal", seed, 10000.0)
except AttentionInputError as error:
    st.error(str(error))
else:
    for column, name in zip(
        st.columns(3), ("token_embeddings", "positions", "inputs"), strict=True
    ):
        with column:
            charts.show(added[name], filename=f"sentence-{name.replace('_', '-')}")

# -- 5. the families ---------------------------------------------------------------------------

st.header("Four ways to give attention positions", divider="gray")
st.markdown(
    "Give every position the **same** content vector c and look at the query·key scores: "
    "whatever varies comes from position alone. If a score depends only on the offset between "
    "query and key, each diagonal is constant (a *Toeplitz* matrix)."
)
a, b, c = st.columns(3)
compare_n = a.slider("Positions to compare", 4, 64, key=view.int("compare_n", 16, lo=4, hi=64))
heads = b.slider("ALiBi heads", 1, 16, key=view.int("heads", 8, lo=1, hi=16))
head_key = pv.keep(view.int("head", 1, lo=1, hi=heads))
if heads > 1:
    head = c.slider("ALiBi head shown", 1, heads, key=head_key)
else:
    head = 1
    c.caption("One head: its slope is 2⁻⁸.")
columns = st.columns(2)
for index, family in enumerate(POSITION_FAMILIES):
    with columns[index % 2]:
        try:
            scores = pv.family_scores(family, compare_n, d_model, seed, base, heads, head - 1)
        except AttentionInputError as error:
            st.error(str(error))
            continue
        charts.show(
            pv.family_figure(family, compare_n, d_model, seed, base, heads, head - 1),
            filename=f"same-content-{family}",
        )
        st.metric(
            f"{pv.FAMILY_TITLES[family]}: largest spread along a diagonal",
            f"{pv.deviation(scores):.1e}",
        )
st.caption(
    "Sinusoidal and learned: (c + P[m])·(c + P[n]) contains c·P[n], which depends on where "
    "the key is, not only on n − m. Rotary: rotating q by m·θ and k by n·θ leaves an angle "
    "(m − n)·θ between them. ALiBi: c·c plus m_h·(n − m), with the later keys masked (−∞) "
    "as in a causal model. All scores are divided by √d_model."
)

learned_tab, rope_tab, alibi_tab = st.tabs(
    [
        ":material/grid_on: Learned",
        ":material/rotate_right: Rotary (RoPE)",
        ":material/trending_down: ALiBi",
    ]
)
with learned_tab:
    st.markdown(
        "BERT and GPT-2 keep a table with one trainable row per position. Here it is random "
        f"(N(0, ½), the sinusoids' size), {n} × {d_model} like the table above. Trained tables "
        "look much smoother: neighbouring rows become similar, and GPT-2's even show "
        "wave-like patterns. Nothing links row p to row p + k, and there is no row past "
        "the last one."
    )
    charts.show(pv.learned_figure(n, d_model, seed), filename=f"learned-pe-{n}x{d_model}")
with rope_tab:
    st.markdown(
        "RoPE (Llama, Mistral, GPT-NeoX) rotates q and k instead of adding anything: each pair "
        "of dimensions turns by p·θᵢ. The score rot(q, m)·rot(k, n) depends on m − n only. Below,"
        " the score at each offset for identical content, over every pair of positions."
    )
    st.latex(r"\mathrm{rot}(q, m)^\top \mathrm{rot}(k, n) = q^\top R_{(n-m)\theta}\, k")
    charts.show(
        pv.rope_profile_figure(compare_n, d_model, seed, base), filename="rope-score-by-offset"
    )
with alibi_tab:
    st.markdown(
        "ALiBi (BLOOM, MPT) adds nothing to the tokens: each head adds m_h·(j − i) to the "
        "score of query i and key j ≤ i, a penalty growing with distance, steep for the first "
        "heads and gentle for the last. For 2ⁿ heads the slopes are 2^(−8/n), 2^(−16/n), …"
    )
    st.dataframe(
        pv.slopes_frame(heads),
        hide_index=True,
        column_config={"slope m": st.column_config.NumberColumn(format="%.8g")},
    )
    charts.show(pv.alibi_grid(heads, compare_n), filename=f"alibi-bias-{heads}-heads")

# -- 6. extrapolation --------------------------------------------------------------------------

st.header("Beyond the training length", divider="gray")
st.markdown(
    "A model trained on sequences of length L meets longer inputs. The dashed square marks "
    "the positions it was trained on."
)
train = st.slider("Training length L", 4, 256, key=view.int("train", 32, lo=4, hi=256))
total = 2 * train
columns = st.columns(2)
for index, family in enumerate(POSITION_FAMILIES):
    length = train if family == "learned" else total
    with columns[index % 2]:
        try:
            fig = pv.family_figure(
                family, length, d_model, seed, base, heads, head - 1, train_length=train
            )
        except AttentionInputError as error:
            st.error(str(error))
            continue
        charts.show(fig, filename=f"extrapolation-{family}")
        if family == "learned":
            st.caption(
                f"The table has {train} rows: position {train} has no vector at all, so the "
                "model cannot even be run on a longer input."
            )
share = pv.unseen_share(train, 8 * train, d_model, base)
charts.show(pv.unseen_figure(train, 8 * train, d_model, base), filename="unseen-angles")
st.markdown(
    f"Sinusoidal and rotary encodings are defined everywhere, but the slow pairs, whose "
    f"wavelength exceeds L, never complete a turn in training. Past L they reach angles the "
    f"model has never seen: {100 * share[-1]:.0f}% of the pairs at position {8 * train - 1}. "
    "That is why RoPE models are stretched with position interpolation or a larger base "
    "before long inputs. ALiBi only adds a straight line: far keys get ever larger penalties "
    "and fade out, so it degrades gently (its paper trains on 1024 tokens and tests on 2048)."
)

what_to_try(
    [
        "Reorder the sentence with **none** and then **sinusoidal** positions: the difference "
        "goes from 0 to clearly non-zero.",
        "Set d_model = 4 and p = 1 and check the table against sin 1, cos 1, sin 0.01, cos 0.01.",
        "Lower the base to 100: the slow dimensions turn faster and the heatmap fills with "
        "stripes; positions far apart start to look alike.",
        "Pick the last frequency pair: its rotation angle for k = 4 is tiny, so that pair "
        "barely tells nearby positions apart, while pair 0 turns a full radian per position.",
        "Push positions to 2048 and d_model to 1024: the picture is block-averaged, the numbers "
        "stay exact.",
        "Raise L and watch the share of unseen angles shrink: more of the pairs finish a turn.",
    ]
)

view.sync_url()
