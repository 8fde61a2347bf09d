"""Scaled dot-product attention, step by step: type Q, K and V and watch every step change."""

import numpy as np
import streamlit as st

from attention_core import AttentionInputError, attention_entropy
from attention_core.examples import (
    DEFAULT_SENTENCE,
    MAX_EXAMPLE_SIZE,
    PRESETS,
    Example,
    attention_for,
    example_for,
    fit_example,
    preset_sizes,
    sentence_tokens,
    sharp_flat_pair,
)
from ui import charts, exports, steps
from ui.editors import matrix_editor
from ui.formulas import SCORING_TEXT
from ui.layout import page_intro, stale_notice, what_to_try
from ui.state import PageState, is_presenting

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
CUSTOM = "sdpa.custom"  # an example from the link or an upload, replacing the preset's numbers
CUSTOM_NAMED = "sdpa.custom.named"  # whether CUSTOM's query and key tokens are its own
CURRENT = "sdpa.current"  # the example on screen, for uploads that replace one matrix
MAX_TOKEN_CHARS = 40
MAX_LINK_TOKENS = 2 * MAX_EXAMPLE_SIZE * (MAX_TOKEN_CHARS + 1)

view = PageState("sdpa")
page_intro(
    "Scaled dot-product attention, step by step",
    "Every query is compared with every key; a softmax turns the scores into weights, and each "
    "output is the weighted average of the values. Type your own numbers into Q, K and V and "
    "follow every step.",
    r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}"
    r"\right)V",
)
view.show_notices()


def use_preset_sizes() -> None:
    """A new preset (or sentence) brings its own sizes and drops numbers from a link/upload."""
    drop_custom()
    try:
        sentence_now = st.session_state.get(view.key("sentence"), DEFAULT_SENTENCE)
        sizes = preset_sizes(view.value("preset"), sentence_now)
    except AttentionInputError:
        return
    for name, size in zip(SIZES, sizes, strict=True):
        view.set(name, size)


def drop_custom() -> None:
    st.session_state.pop(CUSTOM, None)


def link_tokens(name: str, count: int) -> tuple[str, ...] | None:
    """Token names from the link (`tq=the,cat,sat`), if there is one per row."""
    raw = st.query_params.get(name)
    if raw and len(raw) > MAX_LINK_TOKENS:
        return None  # PageState has said why
    tokens = tuple(t.strip()[:MAX_TOKEN_CHARS] for t in raw.split(",")) if raw else ()
    if raw and len(tokens) != count:
        view.notices.append(f"The link's `{name}` does not name one token per row; ignored.")
    return tokens if len(tokens) == count else None


# Token names that were edited by hand travel in the link with the edited numbers.
token_keys = {side: view.text(side, "", max_chars=MAX_LINK_TOKENS) for side in ("tq", "tk")}

# A link may carry small hand-edited matrices; read them once, when the page is opened.
if "sdpa.link_read" not in st.session_state:
    st.session_state["sdpa.link_read"] = True
    linked = {
        name: view.matrix_from_url(name, max_rows=MAX_EXAMPLE_SIZE, max_cols=MAX_EXAMPLE_SIZE)
        for name in ("Q", "K", "V")
    }
    if all(m is not None for m in linked.values()):
        q_tokens = link_tokens("tq", linked["Q"].shape[0])
        k_tokens = link_tokens("tk", linked["K"].shape[0])
        try:
            link_example = Example(
                q=linked["Q"], k=linked["K"], v=linked["V"],
                query_labels=q_tokens or [f"q{i + 1}" for i in range(linked["Q"].shape[0])],
                key_labels=k_tokens or [f"k{j + 1}" for j in range(linked["K"].shape[0])],
                title="from the link",
            )  # fmt: skip
        except AttentionInputError as error:
            view.notices.append(f"The link's Q, K and V were ignored: {error}")
        else:
            st.session_state[CUSTOM] = link_example
            # Without names in the link, the preset's tokens label the rows.
            st.session_state[CUSTOM_NAMED] = (q_tokens is not None, k_tokens is not None)
            for name, size in zip(SIZES, link_example.sizes, strict=True):
                view.set(name, size)
    elif any(m is not None for m in linked.values()):
        view.notices.append("The link holds only some of Q, K and V, so the preset is shown.")

# -- the example -------------------------------------------------------------------------------

st.subheader("The example")
preset = st.selectbox(
    "Preset",
    list(PRESETS),
    format_func=PRESET_TITLES.get,
    key=view.choice("preset", "three_token", list(PRESETS)),
    on_change=use_preset_sizes,
)
sentence, seed, sharp = DEFAULT_SENTENCE, 0, True
if preset == "sentence":
    sentence = st.text_input(
        "Sentence (up to 8 words)",
        key=view.text("sentence", DEFAULT_SENTENCE, max_chars=80),
        on_change=use_preset_sizes,
    )
    try:
        sentence_tokens(sentence)
    except AttentionInputError as error:
        st.error(f"{error} Until then the page shows “{DEFAULT_SENTENCE}”.", icon=":material/edit:")
        sentence = DEFAULT_SENTENCE
if preset in ("sentence", "random"):
    seed = st.number_input(
        "Seed", min_value=0, max_value=9999, step=1, key=view.int("seed", 0, lo=0, hi=9999),
        on_change=drop_custom, help="The same seed always gives the same numbers.",
    )  # fmt: skip
if preset == "sharp_flat":
    sharp = (
        st.segmented_control(
            "Edit which of the pair",
            ["flat", "sharp"],
            key=view.choice("pair", "sharp", ["flat", "sharp"]),
            required=True,
            on_change=drop_custom,
        )
        != "flat"
    )

size_columns = st.columns(4)
n_q, n_k, d_k, d_v = (
    column.slider(label, 1, MAX_EXAMPLE_SIZE, key=view.int(name, size, lo=1, hi=MAX_EXAMPLE_SIZE))
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
custom = st.session_state.get(CUSTOM)
base = preset_example
if custom:
    fitted = fit_example(custom, n_q, n_k, d_k, d_v, seed=int(seed))
    named_q, named_k = st.session_state.get(CUSTOM_NAMED, (True, True))
    base = Example(
        q=fitted.q, k=fitted.k, v=fitted.v,
        query_labels=fitted.query_labels if named_q else preset_example.query_labels,
        key_labels=fitted.key_labels if named_k else preset_example.key_labels,
        title=fitted.title,
    )  # fmt: skip
if custom:
    st.caption(f"Numbers {custom.title}; choose a preset to go back to the presets.")

# -- Q, K, V --------------------------------------------------------------------------------------

st.markdown(
    "Edit any cell, and the token names of Q and K. Row *i* of V is the value of key *i* (the "
    "key's token names it)."
)
editor_columns = st.columns(3) if max(d_k, d_v) <= 4 and not is_presenting() else None
inputs = {}
for index, (name, matrix, labels, editable) in enumerate(
    (
        ("Q", base.q, base.query_labels, True),
        ("K", base.k, base.key_labels, True),
        ("V", base.v, base.key_labels, False),
    )
):
    with editor_columns[index] if editor_columns else st.container():
        st.markdown(
            f"**{name}** — {'queries' if name == 'Q' else 'keys' if name == 'K' else 'values'}"
        )
        inputs[name] = matrix_editor(
            f"sdpa.{name.lower()}", matrix, labels=labels, name=name, editable_labels=editable
        )
q, k, v = (inputs[name].values for name in ("Q", "K", "V"))
query_labels, key_labels = inputs["Q"].labels, inputs["K"].labels
current = Example(q=q, k=k, v=v, query_labels=query_labels, key_labels=key_labels,
                  title=base.title)  # fmt: skip
st.session_state[CURRENT] = current
# A link carries hand-edited numbers only: an untouched preset is rebuilt from its settings.
renamed = {
    "tq": query_labels != preset_example.query_labels,
    "tk": key_labels != preset_example.key_labels,
}
hand_edited = any(renamed.values()) or any(
    shown.shape != made.shape or not np.array_equal(shown, made)
    for shown, made in ((q, preset_example.q), (k, preset_example.k), (v, preset_example.v))
)
for name, matrix in (("Q", q), ("K", k), ("V", v)):
    view.put_matrix(name, matrix if hand_edited else None)
for side, labels in (("tq", query_labels), ("tk", key_labels)):
    tokens = ",".join(label.replace(",", " ")[:MAX_TOKEN_CHARS] for label in labels)
    st.session_state[token_keys[side]] = tokens if hand_edited and renamed[side] else ""


def load_upload() -> None:
    """Replace the example with uploaded files (and the settings a JSON export saved)."""
    files = st.session_state.get("sdpa.upload") or []
    st.session_state.pop("sdpa.upload_error", None)
    if not files:
        return
    try:
        uploaded = exports.combine_upload(
            [(f.name, f.getvalue()) for f in files], st.session_state[CURRENT]
        )
    except AttentionInputError as error:
        st.session_state["sdpa.upload_error"] = str(error)
        return
    st.session_state[CUSTOM] = uploaded.example
    st.session_state[CUSTOM_NAMED] = (True, True)
    for name, size in zip(SIZES, uploaded.example.sizes, strict=True):
        view.set(name, size)
    settings, refused = exports.clean_settings(
        uploaded.settings,
        choices={"scoring": list(SCORING_TITLES)},
        flags=("scaling", "causal"),
        ranges={"tau": TAU_RANGE},
    )
    for name, value in settings.items():
        view.set(name, value)
    if refused:
        st.session_state["sdpa.upload_error"] = (
            "The example was loaded, but some of its settings were not: " + "; ".join(refused)
        )


with st.expander("Upload or download Q, K, V", icon=":material/swap_vert:"):
    st.file_uploader(
        "Upload a JSON example saved from this page, or CSV files named q.csv, k.csv, v.csv "
        "(one or more; the others stay as they are)",
        type=["json", "csv"],
        accept_multiple_files=True,
        key="sdpa.upload",
        on_change=load_upload,
        max_upload_size=1,
    )
    if st.session_state.get("sdpa.upload_error"):
        st.error(st.session_state["sdpa.upload_error"], icon=":material/upload_file:")
    exports.download_chooser(
        {
            name: (matrix, labels, [f"d{c + 1}" for c in range(matrix.shape[1])], f"sdpa-{name}")
            for name, matrix, labels in (("Q", q, query_labels), ("K", k, key_labels),
                                         ("V", v, key_labels))
        },
        key="sdpa.download.qkv",
        label="Download a matrix",
    )  # fmt: skip
    json_slot = st.container()

# -- how the scores are computed ---------------------------------------------------------------

st.subheader("Settings")
left, middle, right = st.columns(3)
scoring_choice = left.selectbox(
    "Scoring function",
    list(SCORING_TITLES),
    format_func=SCORING_TITLES.get,
    key=view.choice("scoring", "dot_product", list(SCORING_TITLES)),
)
dot_family = scoring_choice == "dot_product"
scaling = middle.toggle(
    "Divide by √d_k",
    key=view.bool("scaling", True),
    disabled=not dot_family,
    help="Only the dot product is scaled by √d_k; cosine and additive scores are bounded.",
)
causal = middle.toggle(
    "Causal mask", key=view.bool("causal", False), help="Query i may only look at keys 1..i."
)
tau = right.slider(
    "Temperature τ (divides the scores)",
    *TAU_RANGE,
    step=0.05,
    key=view.float("tau", 1.0, lo=TAU_RANGE[0], hi=TAU_RANGE[1]),
    disabled=scoring_choice == "additive",
    help="τ < 1 sharpens the softmax, τ > 1 flattens it. Additive scores do not use it.",
)
scoring = ("scaled_dot" if scaling else "dot") if dot_family else scoring_choice
st.markdown(SCORING_TEXT[scoring].description)
st.latex(SCORING_TEXT[scoring].formula)
if causal and n_q != n_k:
    st.caption("With more or fewer queries than keys, query i still sees keys 1..i (torch's "
               "top-left alignment).")  # fmt: skip

try:
    result = attention_for(q, k, v, scoring=scoring, temperature=tau, causal=causal)
except AttentionInputError as error:
    st.error(str(error), icon=":material/error:")
    st.stop()

settings = {"scoring": scoring_choice, "scaling": scaling, "causal": causal, "tau": tau,
            "scoring_function": scoring, "scale": result.scale}  # fmt: skip
with json_slot:
    exports.download_example(
        current, settings=settings, steps=result, filename="sdpa-example", key="sdpa.download.json"
    )

for name in ("Q", "K", "V"):
    if inputs[name].stale:
        stale_notice(name)

# -- the pipeline ---------------------------------------------------------------------------------

st.subheader("The steps")
upto = None
if is_presenting():
    # Presenter mode reveals the pipeline one step at a time (keys ← and → step too).
    step_count = len(steps.STEP_NAMES)
    stepper_key = view.int("upto", step_count, lo=1, hi=step_count)

    def move(delta: int) -> None:
        st.session_state[stepper_key] = min(max(st.session_state[stepper_key] + delta, 1),
                                            step_count)  # fmt: skip

    back, slider, forward = st.columns([2, 7, 2], vertical_alignment="bottom")
    back.button("Back", icon=":material/arrow_back:", on_click=move, args=(-1,),
                shortcut="Left", key="sdpa.step_back")  # fmt: skip
    upto = slider.select_slider(
        "Show steps up to",
        options=list(range(1, step_count + 1)),
        format_func=lambda i: steps.STEP_TITLES[steps.STEP_NAMES[i - 1]],
        key=stepper_key,
    )
    forward.button("Next", icon=":material/arrow_forward:", on_click=move, args=(1,),
                   shortcut="Right", key="sdpa.step_next")  # fmt: skip

steps.show_pipeline(
    result, q=q, k=k, v=v, query_labels=query_labels, key_labels=key_labels,
    key="sdpa.pipeline", filename="sdpa", upto=upto, scoring=scoring,
)  # fmt: skip

if preset == "sharp_flat":
    st.subheader("Sharp vs flat: the same keys, queries 20× longer")
    pair = [fit_example(e, n_q, n_k, d_k, d_v) for e in sharp_flat_pair()]
    pair_steps = [attention_for(e.q, e.k, e.v, scoring=scoring, temperature=tau, causal=causal)
                  for e in pair]  # fmt: skip
    charts.show(
        charts.heatmap_grid(
            np.stack([s.weights for s in pair_steps]),
            titles=["flat (queries × 0.5)", "sharp (queries × 10)"],
            row_labels=pair[0].query_labels,
            col_labels=pair[0].key_labels,
            columns=2,
        ),
        filename="sdpa-sharp-vs-flat",
        key="sdpa.sharp_flat",
    )
    flat_col, sharp_col = st.columns(2)
    for column, label, s in zip((flat_col, sharp_col), ("Flat", "Sharp"), pair_steps,
                                strict=True):  # fmt: skip
        column.metric(f"{label}: mean largest weight", f"{s.weights.max(axis=-1).mean():.4f}")
        column.metric(f"{label}: mean entropy (nats)", f"{attention_entropy(s.weights).mean():.4f}")
    st.caption(
        "Large scores push the softmax towards one-hot: almost all weight on one key, entropy "
        "near 0, and (see below) almost no gradient. Small scores give a nearly even spread."
    )

# -- one row by hand -------------------------------------------------------------------------------

st.subheader("Explain one row")
row = st.selectbox(
    "Query",
    list(range(1, n_q + 1)),
    format_func=lambda i: f"{i}: {query_labels[i - 1]}",
    key=view.int("row", 1, lo=1, hi=n_q),
)
steps.explain_row(
    result, row - 1, q=q, k=k, v=v, query_labels=query_labels, key_labels=key_labels,
    scoring=scoring,
)  # fmt: skip

# Opened on demand (and from links: a teacher's exercise link can open "check my work").
check = st.expander(
    "Check my work", icon=":material/task_alt:", key=view.bool("check", False), on_change="rerun"
)
if check.open:
    with check:
        st.markdown(
            "Work out the weights or the output by hand (the formulas above show how), type them "
            "in, and see which cells are right."
        )
        steps.check_my_work(
            result, key="sdpa.check", query_labels=query_labels, key_labels=key_labels
        )

why = st.expander(
    "Why divide by √d_k?", icon=":material/functions:", key=view.bool("why", False),
    on_change="rerun",
)  # fmt: skip
if why.open:
    with why:
        st.markdown(
            "If the entries of q and k are independent with mean 0 and variance 1, then "
            "q·k = Σᵢ qᵢkᵢ is a sum of d_k terms of variance 1, so its variance is d_k. Wide "
            "heads give large scores, and the softmax of large scores is nearly one-hot, which "
            "passes almost no gradient back. Measured here over random vectors:"
        )
        steps.show_scaling_experiment(key="sdpa.sqrt_dk")

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
