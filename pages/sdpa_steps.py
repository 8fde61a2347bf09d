"""Scaled dot-product attention, step by step: type Q, K and V and watch every step change."""

import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.presets import SIZE_LIMITS, Example, attention_for, example_for
from ui.models import head_link
from ui.scaled_dot_product import check_work, files, inputs, questions, scaling
from ui.widgets import steps
from ui.widgets.editors import qkv_editors
from ui.widgets.formulas import SCORING_TEXT
from ui.widgets.hand_made import HandMadeExample
from ui.widgets.layout import page_intro, stale_notice, what_to_try
from ui.widgets.state import PageState, is_presenting, write_url_after_fragment

view = PageState("scaled_dot_product")
# Numbers typed by hand, or brought by a link or an upload, replace the preset's.
hand = HandMadeExample(
    view, sizes=inputs.SIZES, max_size=SIZE_LIMITS["n_q"], max_width=SIZE_LIMITS["d_k"]
)
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

# -- the example -------------------------------------------------------------------------------

st.header("The example")
choice = inputs.choose_example(view, hand)
n_q, n_k, d_k, d_v = inputs.choose_sizes(view)
if n_q != n_k:
    st.info(
        f"Q has {n_q} rows but K and V have {n_k}: this is **cross-attention**. The queries come "
        "from one sequence and the keys and values from another, as when a translator's decoder "
        "reads the encoded source sentence.",
        icon=":material/compare_arrows:",
    )

try:
    preset_example = example_for(
        choice.preset, n_q=n_q, n_k=n_k, d_k=d_k, d_v=d_v, seed=choice.seed,
        sentence=choice.sentence, sharp=choice.sharp,
    )  # fmt: skip
except AttentionInputError as error:
    st.error(str(error), icon=":material/edit_note:")
    preset_example = example_for("three_token", n_q=n_q, n_k=n_k, d_k=d_k, d_v=d_v)
base, custom_title = hand.shown(preset_example, seed=choice.seed)
if custom_title:
    st.caption(f"Numbers {custom_title}; choose a preset to go back to the presets.")

# -- Q, K, V --------------------------------------------------------------------------------------

st.markdown(
    "Edit any cell, and the token names of Q and K. Row *i* of V is the value of key *i* (the "
    "key's token names it)."
)
side_by_side = max(d_k, d_v) <= 4 and not is_presenting()
current, stale = qkv_editors(view.page, base, side_by_side=side_by_side)
# A link carries hand-edited numbers only: an untouched preset is rebuilt from its settings.
hand.remember(current, preset_example)
with st.expander("Upload or download Q, K, V", icon=":material/swap_vert:"):
    files.upload_or_download(hand, current)
for name in stale:
    stale_notice(name)

# -- how the scores are computed, and every step ----------------------------------------------
# Fragments: a setting reruns only what follows it, a query or a step only its own part.


@st.fragment(key="scaled_dot_product.steps")
def settings_and_steps(current: Example, preset: str, sizes: tuple[int, int, int, int]) -> None:
    st.header("Settings")
    settings = inputs.choose_settings(view)
    st.markdown(SCORING_TEXT[settings.scoring].description)
    st.latex(SCORING_TEXT[settings.scoring].formula)
    if settings.causal and current.q.shape[0] != current.k.shape[0]:
        st.caption("With more or fewer queries than keys, query i still sees keys 1..i (torch's "
                   "top-left alignment).")  # fmt: skip
    try:
        result = attention_for(current.q, current.k, current.v, scoring=settings.scoring,
                               temperature=settings.tau, causal=settings.causal)  # fmt: skip
    except AttentionInputError as error:
        st.error(str(error), icon=":material/error:")
        write_url_after_fragment(view)
        return

    questions.ask_questions(view, result, current, causal=settings.causal)
    st.header("The steps")
    pipeline(result, current, settings.scoring)
    files.download_example(view, current, settings, result)
    if preset == "sharp_flat":
        scaling.show_sharp_vs_flat(sizes, scoring=settings.scoring, tau=settings.tau,
                                   causal=settings.causal, key=view.page)  # fmt: skip
    explain_one_row(result, current, settings.scoring)
    check_my_work(result, current)
    scaling.compare_scaling(view, current, settings.scoring_choice, settings.tau, settings.causal)
    write_url_after_fragment(view)


@st.fragment(key="scaled_dot_product.pipeline")
def pipeline(result, current: Example, scoring: str) -> None:
    upto = steps.presenter_steps(view)  # presenters reveal one step at a time
    steps.show_pipeline(
        result, q=current.q, k=current.k, v=current.v, query_labels=current.query_labels,
        key_labels=current.key_labels, key=view.key("pipeline"), filename="sdpa", upto=upto,
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
            check_work.check_my_work(result, key=view.key("check"),
                                     query_labels=current.query_labels,
                                     key_labels=current.key_labels)  # fmt: skip
    write_url_after_fragment(view)


settings_and_steps(current, choice.preset, (n_q, n_k, d_k, d_v))
scaling.why_scale(view, key=view.key("sqrt_dk"))

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
