import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.position_experiments import PERMUTATIONS, SENTENCE_ENCODINGS
from ui.positional import data, families, figures, inputs, order, questions
from ui.widgets import heatmaps, small_screens
from ui.widgets.layout import page_intro, what_to_try
from ui.widgets.state import PageState, write_url_after_fragment

view = PageState("positional")
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


@st.fragment
def order_blindness(tokens: tuple[str, ...], order_kind: str, width: int, seed: int) -> None:
    encoding = st.segmented_control(
        "Positions added to the embeddings",
        SENTENCE_ENCODINGS,
        key=view.choice_key("family", "none", SENTENCE_ENCODINGS),
        required=True,
    )
    example = (tokens, order_kind, width, encoding, seed, 10000.0)
    try:
        blind = data.blindness(*example)
    except AttentionInputError as error:
        st.error(str(error))
    else:
        st.markdown(f"**{' '.join(tokens)}** → **{' '.join(blind.permuted.tokens)}**")
        for pair in (("weights", "permuted_weights"), ("output", "unpermuted_output")):
            for column, name, suffix in zip(st.columns(2), pair, ("", "-reordered"), strict=True):
                with column:
                    kind = "weights" if "weights" in name else "output"
                    filename = f"order-blindness-{kind}{suffix}"
                    figures.show(order.blindness_figure, name, *example, filename=filename)
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
            filename = "order-blindness-difference"
            figures.show(order.blindness_figure, "difference", *example, filename=filename)
    write_url_after_fragment(view)


st.header("Attention alone ignores order", divider="gray")
st.markdown(
    "Run the same self-attention layer on a sentence and on a reordering of it. Without "
    "positions, every word gets exactly the output it had before, just in another row: "
    "attention treats the sentence as a bag of words."
)
left, right = st.columns([5, 3])
sentence = left.text_input(
    "Sentence",
    key=view.text_key("sentence", inputs.DEFAULT_SENTENCE, max_chars=200),
    max_chars=200,
)
order_kind = right.selectbox(
    "Reorder it", PERMUTATIONS, key=view.choice_key("order", "reverse", PERMUTATIONS)
)
tokens, sentence_error = inputs.sentence_words(sentence)
if sentence_error:
    left.error(sentence_error)
width_column, seed_column = st.columns(2)
width = width_column.slider(
    "Embedding width for the sentence (d_model)",
    2,
    16,
    step=2,
    key=view.int_key("width", 4, lo=2, hi=16),
    help="Kept small so every number fits; the sliders below go up to 1024.",
)
seed = seed_column.number_input(
    "Random seed (embeddings, attention weights, learned table)",
    min_value=0,
    max_value=999,
    key=view.int_key("seed", 0, lo=0, hi=999),
)
order_blindness(tokens, order_kind, width, seed)
order.compare_encodings(view, tokens, order_kind, width, seed)

# -- 2. the sinusoidal table -------------------------------------------------------------------


@st.fragment
def chosen_dimensions(n: int, d_model: int, base: float) -> None:
    st.subheader("Dimensions across positions")
    st.latex(r"\lambda_i = 2\pi \cdot \text{base}^{2i/d_{\text{model}}}")
    default_dims = [j for j in (0, 1, 8, 32) if j < d_model]
    dims = st.multiselect(
        "Dimensions to plot",
        list(range(d_model)),
        key=inputs.keep(view.multi("dims", default_dims, list(range(d_model)))),
        help="Even dimensions are sines, odd ones cosines; the legend gives each wavelength.",
    )
    if len(dims) > 8:
        st.caption("The first 8 chosen dimensions are plotted.")
    if dims:
        plotted = tuple(dims[:8])
        filename = "sinusoidal-dimensions"
        figures.show(figures.dimensions_figure, n, d_model, base, plotted, filename=filename)
    else:
        st.info("Choose at least one dimension to plot.", icon=":material/info:")
    write_url_after_fragment(view)


st.header("Sinusoidal encoding", divider="gray")
st.markdown(
    "Each pair of dimensions (2i, 2i+1) is a point going round a circle as the position grows: "
    "fast for the first pairs, ever slower for the last, like the hands of a clock. Together "
    "they give every position a unique pattern of values between −1 and 1."
)
d_key = inputs.even_d_model_key(view)
a, b, c = st.columns(3)
d_model = a.slider("d_model (dimensions)", 2, 1024, step=2, key=d_key)
n = b.slider("Positions", 2, 2048, key=view.int_key("positions", 128, lo=2, hi=2048))
base = c.select_slider(
    "Base",
    inputs.BASES,
    key=view.choice_key("base", 10000, inputs.BASES),
    help="10000 in the original paper.",
)
figures.show(figures.pe_figure, n, d_model, base, filename=f"sinusoidal-pe-{n}x{d_model}")
if max(n, d_model) > heatmaps.MAX_SIDE:
    st.caption(
        f"The table has {n:,} × {d_model:,} entries, more than a screen has pixels: the picture "
        "averages blocks of cells (see its title); the plots and the table below use exact "
        "values."
    )
chosen_dimensions(n, d_model, base)

# -- 3. one position, similarity and rotation ---------------------------------------------------


@st.fragment
def position_and_rotation(n: int, d_model: int, base: float) -> None:
    # One fragment: the rotation below starts from the position p chosen here.
    st.subheader("The exact values at one position")
    position = st.slider(
        "Position p",
        0,
        n - 1,
        key=inputs.keep(view.int_key("position", 1, lo=0, hi=n - 1)),
    )
    st.markdown(
        "Check a hand calculation: with d_model = 4 and p = 1 the row is "
        "(sin 1, cos 1, sin 0.01, cos 0.01), because ω₁ = 10000^(−2/4) = 0.01."
    )
    small_screens.table(
        data.breakdown_frame(position, d_model, base),
        hide_index=True,
        height=260,
        column_config=data.BREAKDOWN_COLUMNS,
    )
    st.header("Similar positions, and a shift that is a rotation", divider="gray")
    st.markdown(
        "The dot product of two rows depends only on how far apart they are: "
        "PE(p)·PE(p+k) = Σᵢ cos(ωᵢ k), the same for every p. Near positions are alike, far ones "
        "less so (though not monotonically)."
    )
    filename = f"pe-similarity-{n}x{d_model}"
    figures.show(figures.similarity_figure, n, d_model, base, filename=filename)
    figures.show(figures.similarity_profile_figure, n, d_model, base, filename="pe-dot-by-distance")
    spread = data.similarity_profile(n, d_model, base).spread
    st.caption(
        f"Largest spread over p at any distance: {spread:.1e} (rounding), so the three lines "
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
    offset = a.slider(
        "Offset k", 0, n - 1, key=inputs.keep(view.int_key("offset", 4, lo=0, hi=n - 1))
    )
    pair_key = inputs.keep(view.int_key("pair", 0, lo=0, hi=d_model // 2 - 1))
    if d_model > 2:
        pair = b.slider("Frequency pair i", 0, d_model // 2 - 1, key=pair_key)
    else:
        pair = 0
        b.caption("d_model = 2 has a single frequency pair, i = 0.")
    try:
        example = data.rotation(position, offset, pair, d_model, base)
        check = data.shift(n, d_model, offset, base)
    except AttentionInputError as error:
        st.error(str(error))
    else:
        st.latex(figures.rotation_latex(example))
        values, error_column = st.columns(2)
        values.markdown(
            f"Table value PE({position + offset})<sub>{2 * pair},{2 * pair + 1}</sub> = "
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
    write_url_after_fragment(view)


position_and_rotation(n, d_model, base)

# -- 4. adding to the embeddings ---------------------------------------------------------------

st.header("Token embedding + position = the model's input", divider="gray")
st.markdown(
    f"The sentence from the top, with d_model = {width}: each word's embedding (the same "
    "wherever the word stands) plus the sinusoidal row of its position (base 10000). Set "
    "“Positions added” above to *sinusoidal* to see these very inputs change the outputs."
)
sentence_inputs = (tokens, order_kind, width, "sinusoidal", seed, 10000.0)
try:
    data.blindness(*sentence_inputs)
except AttentionInputError as error:
    st.error(str(error))
else:
    for column, name in zip(
        st.columns(3), ("token_embeddings", "positions", "inputs"), strict=True
    ):
        with column:
            filename = f"sentence-{name.replace('_', '-')}"
            figures.show(order.blindness_figure, name, *sentence_inputs, filename=filename)

# -- 5. the families, and 6. beyond the training length ---------------------------------------

st.header("Five ways to give attention positions, one of them none", divider="gray")
st.markdown(
    "Give every position the **same** content vector c and look at the query·key scores: "
    "whatever varies comes from position alone. If a score depends only on the offset between "
    "query and key, each diagonal is constant (a *Toeplitz* matrix)."
)
families.compare_families(view, n, d_model, seed, base)
questions.ask_questions(view, (tokens, order_kind, width, seed), d_model, base, n)

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
