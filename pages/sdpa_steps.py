"""Scaled dot-product attention, step by step: type Q, K and V and watch every step change."""

import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.presets import (
    DEFAULT_SENTENCE,
    PRESETS,
    SIZE_LIMITS,
    Example,
    attention_for,
    example_for,
    preset_sizes,
    sentence_tokens,
)
from ui.models import head_link
from ui.scaled_dot_product import check_work, questions
from ui.scaled_dot_product import scaling as scaling_views
from ui.widgets import exports, steps
from ui.widgets.editors import qkv_editors
from ui.widgets.formulas import SCORING_TEXT
from ui.widgets.hand_made import HandMadeExample
from ui.widgets.layout import page_intro, stale_notice, what_to_try
from ui.widgets.state import PageState, is_presenting, stored, write_url_after_fragment

PRESET_TITLES = {
    "three_token": "3 tokens, d_k = 2 (worked by hand)",
    "sentence": "A sentence, random embeddings and projections",
    "random": "Random numbers (seeded)",
    "sharp_flat": "Sharp vs flat softmax",
}
SCORING_TITLES = {
    "dot_product": "Dot product",
    "additive": "Additive (Bahdanau)",
    "cosine": "Cosine similarity",
}
SIZES = ("n_q", "n_k", "d_k", "d_v")
TAU_RANGE = (0.1, 5.0)

view = PageState("scaled_dot_product")
# Numbers typed by hand, or brought by a link or an upload, replace the preset's.
hand = HandMadeExample(view, sizes=SIZES, max_size=SIZE_LIMITS["n_q"], max_width=SIZE_LIMITS["d_k"])
page_intro(
    "Scaled dot-product attention, step by step",
    "Every query is compared with every key; a softmax turns the scores into weights, and each "
    "output is the weighted average of the values. Type your own numbers into Q, K and V and "
    "follow every step.",
    r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}"
    r"\right)V",
)
view.show_notices()
hand.read_link()
head_link.bring_head(view, hand)  # a real head sent from the pretrained-model page


def use_preset_sizes() -> None:
    """A new preset (or sentence) brings its own sizes and drops numbers from a link/upload."""
    hand.drop()
    try:
        sizes = preset_sizes(view.value("preset"), stored(view, "sentence", DEFAULT_SENTENCE))
    except AttentionInputError:
        return
    hand.set_sizes(sizes)


# -- the example -------------------------------------------------------------------------------

st.header("The example")
preset = st.selectbox(
    "Preset",
    list(PRESETS),
    format_func=PRESET_TITLES.get,
    key=view.choice_key("preset", "three_token", list(PRESETS)),
    on_change=use_preset_sizes,
)
sentence, seed, sharp = DEFAULT_SENTENCE, 0, True
if preset == "sentence":
    sentence = st.text_input(
        "Sentence (up to 8 words)",
        key=view.text_key("sentence", DEFAULT_SENTENCE, max_chars=80),
        on_change=use_preset_sizes,
    )
    try:
        sentence_tokens(sentence)
    except AttentionInputError as error:
        st.error(f"{error} Until then the page shows “{DEFAULT_SENTENCE}”.", icon=":material/edit:")
        sentence = DEFAULT_SENTENCE
if preset in ("sentence", "random"):
    seed = st.number_input(
        "Seed", min_value=0, max_value=9999, step=1, key=view.int_key("seed", 0, lo=0, hi=9999),
        on_change=hand.drop, help="The same seed always gives the same numbers.",
    )  # fmt: skip
if preset == "sharp_flat":
    sharp = (
        st.segmented_control(
            "Edit which of the pair",
            ["flat", "sharp"],
            key=view.choice_key("pair", "sharp", ["flat", "sharp"]),
            required=True,
            on_change=hand.drop,
        )
        != "flat"
    )

size_columns = st.columns(4)
n_q, n_k, d_k, d_v = (
    column.slider(label, 1, SIZE_LIMITS[name],
                  key=view.int_key(name, size, lo=1, hi=SIZE_LIMITS[name]))
    for column, name, label, size in zip(
        size_columns,
        SIZES,
        ("Queries (rows of Q)", "Keys and values (rows of K, V)", "d_k (width of Q, K)",
         "d_v (width of V)"),
        PRESETS["three_token"],
        strict=True,
    )
)  # fmt: skip
if n_q != n_k:
    st.info(
        f"Q has {n_q} rows but K and V have {n_k}: this is **cross-attention**. The queries come "
        "from one sequence and the keys and values from another, as when a translator's decoder "
        "reads the encoded source sentence.",
        icon=":material/compare_arrows:",
    )

try:
    preset_example = example_for(
        preset, n_q=n_q, n_k=n_k, d_k=d_k, d_v=d_v, seed=int(seed), sentence=sentence, sharp=sharp
    )
except AttentionInputError as error:
    st.error(str(error), icon=":material/edit_note:")
    preset_example = example_for("three_token", n_q=n_q, n_k=n_k, d_k=d_k, d_v=d_v)
base, custom_title = hand.shown(preset_example, seed=int(seed))
if custom_title:
    st.caption(f"Numbers {custom_title}; choose a preset to go back to the presets.")

# -- Q, K, V --------------------------------------------------------------------------------------

st.markdown(
    "Edit any cell, and the token names of Q and K. Row *i* of V is the value of key *i* (the "
    "key's token names it)."
)
current, stale = qkv_editors(view.page, base, side_by_side=max(d_k, d_v) <= 4 and not is_presenting())
q, k, v = current.q, current.k, current.v
# A link carries hand-edited numbers only: an untouched preset is rebuilt from its settings.
hand.remember(current, preset_example)

with st.expander("Upload or download Q, K, V", icon=":material/swap_vert:"):
    exports.upload_example(
        hand,
        key="scaled_dot_product.upload",
        label="Upload a JSON example saved from this page, or CSV files named q.csv, k.csv, "
        "v.csv (one or more; the others stay as they are)",
        choices={"scoring": list(SCORING_TITLES)},
        flags=("scaling", "causal"),
        ranges={"tau": TAU_RANGE},
    )
    exports.download_chooser(
        {
            name: (matrix, labels, [f"d{c + 1}" for c in range(matrix.shape[1])], f"sdpa-{name}")
            for name, matrix, labels in (("Q", q, current.query_labels),
                                         ("K", k, current.key_labels), ("V", v, current.key_labels))
        },
        key="scaled_dot_product.download.qkv",
        label="Download a matrix",
    )  # fmt: skip
for name in stale:
    stale_notice(name)

# -- how the scores are computed, and every step ----------------------------------------------
# Fragments: a setting reruns only what follows it, a query or a step only its own part.


@st.fragment(key="scaled_dot_product.steps")
def settings_and_steps(current: Example, preset: str, sizes: tuple[int, int, int, int]) -> None:
    q, k, v = current.q, current.k, current.v
    st.header("Settings")
    left, middle, right = st.columns(3)
    scoring_choice = left.selectbox(
        "Scoring function",
        list(SCORING_TITLES),
        format_func=SCORING_TITLES.get,
        key=view.choice_key("scoring", "dot_product", list(SCORING_TITLES)),
    )
    dot_family = scoring_choice == "dot_product"
    scaling = middle.toggle(
        "Divide by √d_k",
        key=view.bool_key("scaling", True),
        disabled=not dot_family,
        help="Only the dot product is scaled by √d_k; cosine and additive scores are bounded.",
    )
    causal = middle.toggle(
        "Causal mask",
        key=view.bool_key("causal", False),
        help="Query i may only look at keys 1..i.",
    )
    tau = right.slider(
        "Temperature τ (divides the scores)",
        *TAU_RANGE,
        step=0.05,
        key=view.float_key("tau", 1.0, lo=TAU_RANGE[0], hi=TAU_RANGE[1]),
        disabled=scoring_choice == "additive",
        help="τ < 1 sharpens the softmax, τ > 1 flattens it. Additive scores do not use it.",
    )
    scoring = ("scaled_dot" if scaling else "dot") if dot_family else scoring_choice
    st.markdown(SCORING_TEXT[scoring].description)
    st.latex(SCORING_TEXT[scoring].formula)
    if causal and q.shape[0] != k.shape[0]:
        st.caption("With more or fewer queries than keys, query i still sees keys 1..i (torch's "
                   "top-left alignment).")  # fmt: skip
    try:
        result = attention_for(q, k, v, scoring=scoring, temperature=tau, causal=causal)
    except AttentionInputError as error:
        st.error(str(error), icon=":material/error:")
        write_url_after_fragment(view)
        return

    questions.ask_questions(view, result, current, causal=causal)
    st.header("The steps")
    pipeline(result, current, scoring)
    settings = {"scoring": scoring_choice, "scaling": scaling, "causal": causal, "tau": tau,
                "scoring_function": scoring, "scale": result.scale}  # fmt: skip
    exports.download_example(current, settings=settings, steps=result, filename="sdpa-example",
                             key="scaled_dot_product.download.json")  # fmt: skip
    if preset == "sharp_flat":
        scaling_views.show_sharp_vs_flat(sizes, scoring=scoring, tau=tau, causal=causal, key=view.page)
    explain_one_row(result, current, scoring)
    check_my_work(result, current)
    scaling_views.compare_scaling(view, current, scoring_choice, tau, causal)
    write_url_after_fragment(view)


@st.fragment(key="scaled_dot_product.pipeline")
def pipeline(result, current: Example, scoring: str) -> None:
    upto = steps.presenter_steps(view)  # presenters reveal one step at a time
    steps.show_pipeline(
        result, q=current.q, k=current.k, v=current.v, query_labels=current.query_labels,
        key_labels=current.key_labels, key="scaled_dot_product.pipeline", filename="sdpa", upto=upto,
        scoring=scoring,
    )  # fmt: skip
    write_url_after_fragment(view)


@st.fragment(key="scaled_dot_product.row")
def explain_one_row(result, current: Example, scoring: str) -> None:
    st.header("Explain one row")
    labels = current.query_labels
    row = st.selectbox(
        "Query",
        list(range(1, len(labels) + 1)),
        format_func=lambda i: f"{i}: {labels[i - 1]}",
        key=view.int_key("row", 1, lo=1, hi=len(labels)),
    )
    steps.explain_row(
        result, row - 1, q=current.q, k=current.k, v=current.v, query_labels=labels,
        key_labels=current.key_labels, scoring=scoring,
    )  # fmt: skip
    write_url_after_fragment(view)


@st.fragment(key="scaled_dot_product.check")
def check_my_work(result, current: Example) -> None:
    # Opened on demand (and from links: a teacher's exercise link can open "check my work").
    check = st.expander("Check my work", icon=":material/task_alt:",
                        key=view.bool_key("check", False), on_change="rerun")  # fmt: skip
    if check.open:
        with check:
            st.markdown(
                "Work out the weights or the output by hand (the formulas above show how), type "
                "them in, and see which cells are right."
            )
            check_work.check_my_work(result, key="scaled_dot_product.check", query_labels=current.query_labels,
                                key_labels=current.key_labels)  # fmt: skip
    write_url_after_fragment(view)


settings_and_steps(current, preset, (n_q, n_k, d_k, d_v))
scaling_views.why_scale(view, key="scaled_dot_product.sqrt_dk")

what_to_try(
    [
        "In the 3-token example, change Q's first row from [1, 0] to [5, 0]: the first query's "
        "weights pile onto the first two keys. Why those two?",
        "Switch **Divide by √d_k** off with d_k = 8 and the random preset: the weights get "
        "sharper. The experiment above says why.",
        "Turn on the **causal mask**: the upper triangle becomes −∞ and the first query can "
        "only look at itself, so its output is exactly V's first row.",
        "Make two rows of K identical: their keys always get the same weight, whatever the query.",
        "Choose **cosine similarity** and lower τ: only directions matter, and τ sets the "
        "sharpness instead of the vector lengths.",
        "Set Q to fewer rows than K (cross-attention): each output still mixes all the values.",
    ]
)

view.sync_url()
