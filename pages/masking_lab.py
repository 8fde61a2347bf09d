"""The masking lab: build any mask, see what it does to scores and weights, and why −∞."""

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import AttentionInputError, causal_mask
from attention_core.mask_lab import (
    FLOAT16_MIN,
    MASK_KINDS,
    additive_mask_softmax,
    compare_mask,
    example_qkv,
    lab_mask,
    leak_curve,
    padded_batch,
    value_change_effect,
)
from ui import charts, mask_views
from ui.layout import page_intro, what_to_try
from ui.mask_views import custom_grid_editor
from ui.state import PageState

SENTENCE = ("the", "cat", "sat", "on", "the", "mat", "and", "slept")
PAD = "<pad>"
D_K = 4
KIND_LABELS = {
    "causal": "Causal",
    "padding": "Padding",
    "window": "Sliding window",
    "prefix": "Prefix-LM",
    "custom": "Custom grid",
}

view = PageState("mask")
page_intro(
    "The masking lab",
    "A mask decides which keys each query may look at. A blocked score becomes **−∞** before "
    "the softmax, so its weight is exactly 0 and the allowed weights still sum to 1.",
    r"\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V,"
    r"\qquad M_{ij} = \begin{cases} 0 & \text{query } i \text{ may attend to key } j \\"
    r" -\infty & \text{otherwise} \end{cases}",
)
view.show_notices()

# -- the controls ---------------------------------------------------------------------------------

size_column, kind_column = st.columns([1, 3])
n = size_column.slider("Tokens", 2, len(SENTENCE), key=view.int("n", 6, lo=2, hi=len(SENTENCE)))
seed = size_column.number_input(
    "Seed for Q, K, V",
    0,
    9999,
    key=view.int("seed", 0, lo=0, hi=9999),
    help=f"Q, K and V are random {n}×{D_K} matrices drawn from this seed.",
)
kinds = kind_column.multiselect(
    "Mask kinds (combined: a key must pass every one)",
    MASK_KINDS,
    format_func=KIND_LABELS.get,
    key=view.multi("kinds", ["causal"], MASK_KINDS),
    placeholder="None: every query sees every key",
)
padding, window, prefix_len = [], 2, 1
if "padding" in kinds:
    padding = kind_column.multiselect(
        "Padding positions (hidden from every query)",
        list(range(1, n + 1)),
        format_func=lambda p: f"{p} · {SENTENCE[p - 1]}",
        key=view.multi("pad", [p for p in (5, 6) if p <= n], list(range(1, n + 1))),
    )
if "window" in kinds:
    window = kind_column.slider(
        "Window width w (each query sees itself and the w − 1 keys before it)",
        1,
        n,
        key=view.int("window", 2, lo=1, hi=n),
    )
if "prefix" in kinds:
    prefix_len = kind_column.slider(
        "Prefix length (seen by every token; causal after it)",
        0,
        n,
        key=view.int("prefix", 2, lo=0, hi=n),
    )
tokens = [PAD if position + 1 in padding else SENTENCE[position] for position in range(n)]
custom = None
if "custom" in kinds:
    with kind_column.expander("Custom grid: tick the keys each query may attend to", expanded=True):
        others = [kind for kind in kinds if kind != "custom"]
        try:
            from_others = lab_mask(
                n, others, padding=[p - 1 for p in padding], window=window, prefix_len=prefix_len
            )
        except AttentionInputError:
            from_others = None
        presets = {
            "Causal": causal_mask(n),
            "All allowed": np.ones((n, n), bool),
            "All blocked": np.zeros((n, n), bool),
        }
        if from_others is not None:
            presets["The other kinds"] = from_others
        custom = custom_grid_editor(view, tokens, presets=presets)

q, k, v = example_qkv(n, D_K, seed)
try:
    mask = lab_mask(
        n,
        kinds,
        padding=[p - 1 for p in padding],
        window=window,
        prefix_len=prefix_len,
        custom=custom,
    )
    lab = compare_mask(q, k, v, mask)
except AttentionInputError as error:
    st.error(str(error), icon=":material/error:")
    view.sync_url()
    st.stop()

mask_name = " + ".join(KIND_LABELS[kind] for kind in kinds) or "no mask"
allowed = np.ones((n, n), bool) if mask is None else mask

# -- side by side ---------------------------------------------------------------------------------

st.subheader("The mask, the masked scores, and the weights without and with it")
st.caption(f"Mask: **{mask_name}**. Rows are queries, columns are keys.")
scaled_hover = [[f"q·k/√{D_K} = {lab.masked.scaled[i, j]:.4f}" for j in range(n)] for i in range(n)]
left, right = st.columns(2)
with left:
    charts.show(
        mask_views.heatmap(
            allowed.astype(float),
            row_labels=tokens,
            col_labels=tokens,
            kind="mask",
            decimals=0,
            title="Mask (1 = may attend)",
            hover=[["may attend" if cell else "blocked" for cell in row] for row in allowed],
        ),
        filename="mask",
    )
    charts.show(
        mask_views.heatmap(
            lab.unmasked.weights,
            row_labels=tokens,
            col_labels=tokens,
            title="Weights without the mask",
            hover=[[f"softmax of row {i + 1}" for _ in range(n)] for i in range(n)],
        ),
        filename="weights-without-mask",
    )
with right:
    charts.show(
        mask_views.heatmap(
            lab.masked.masked,
            row_labels=tokens,
            col_labels=tokens,
            kind="scores",
            title="Masked scores (−∞ where blocked)",
            hover=scaled_hover,
        ),
        filename="masked-scores",
    )
    charts.show(
        mask_views.heatmap(
            lab.masked.weights,
            row_labels=tokens,
            col_labels=tokens,
            title="Weights with the mask",
            hover=[
                [
                    "blocked: exp(−∞) = 0" if not allowed[i, j] else f"softmax of row {i + 1}"
                    for j in range(n)
                ]
                for i in range(n)
            ],
        ),
        filename="weights-with-mask",
    )
badges = []
for i, token in enumerate(tokens):
    if lab.masked.fully_masked[i]:
        badges.append(f":orange-badge[:material/block: {i + 1} {token}: Σ = 0, fully masked]")
    else:
        badges.append(f":green-badge[:material/check: {i + 1} {token}: Σ = {lab.row_sums[i]:.4f}]")
st.markdown("**Each row of the masked weights sums to:** " + " ".join(badges))

# -- encoder versus decoder -----------------------------------------------------------------------

st.subheader("Encoder versus decoder")
st.markdown(
    "An **encoder** (BERT) reads the whole input at once, so every token sees every real token "
    "in both directions: it needs only the padding mask. A **decoder** (GPT) generates one "
    "token at a time and must not see tokens it has not produced yet: it adds the causal mask."
)
encoder_mask = lab_mask(n, ["padding"], padding=[p - 1 for p in padding])
decoder_mask = lab_mask(n, ["causal", "padding"], padding=[p - 1 for p in padding])
left, right = st.columns(2)
for column, title, shown, name in (
    (left, "Encoder: padding mask", encoder_mask, "encoder-mask"),
    (right, "Decoder: causal + padding mask", decoder_mask, "decoder-mask"),
):
    with column:
        charts.show(
            mask_views.heatmap(
                shown.astype(float),
                row_labels=tokens,
                col_labels=tokens,
                kind="mask",
                decimals=0,
                title=title,
                height=300,
            ),
            filename=name,
        )
st.caption(
    "The pads are the positions chosen above."
    if "padding" in kinds
    else "Add the Padding kind above to see the pads in both masks."
)

# -- the future cannot leak -----------------------------------------------------------------------

st.subheader("The future cannot leak")
st.markdown(
    "Each output row is a weighted sum of value vectors, output_i = Σ_j w_ij v_j. Change the "
    "value vector of one token and only the rows that give it a non-zero weight can move."
)
pick, amount = st.columns(2)
changed_position = pick.selectbox(
    "Change the value vector of token",
    list(range(1, n + 1)),
    format_func=lambda p: f"{p} · {tokens[p - 1]}",
    key=view.int("change_at", min(4, n), lo=1, hi=n),
)
delta = amount.slider(
    "by adding to each of its entries",
    -5.0,
    5.0,
    step=0.5,
    key=view.float("delta", 2.0, lo=-5.0, hi=5.0),
)
effects = {
    "no mask": value_change_effect(q, k, v, changed_position - 1, delta),
    "causal": value_change_effect(q, k, v, changed_position - 1, delta, mask=causal_mask(n)),
    f"your mask ({mask_name})": value_change_effect(
        q, k, v, changed_position - 1, delta, mask=mask
    ),
}
change_table = pd.DataFrame(
    {name: effect.row_change for name, effect in effects.items()},
    index=pd.Index([f"{i + 1} {token}" for i, token in enumerate(tokens)], name="query"),
)
st.dataframe(
    change_table.style.format("{:.3g}").map(
        lambda value: "background-color: #fdd0a2; font-weight: bold" if value > 0 else ""
    ),
    width="stretch",
)
causal_changed = np.flatnonzero(effects["causal"].changed) + 1
if causal_changed.size:
    st.markdown(
        "Largest change of each output row (max over its features of |Δoutput|); highlighted "
        f"rows changed. With the causal mask, rows {', '.join(map(str, causal_changed))} changed "
        f"and the {changed_position - 1} earlier row(s) stayed **bit-for-bit identical**: their "
        f"weight on key {changed_position} is exactly 0, not merely small. Without a mask, "
        f"{int(effects['no mask'].changed.sum())} of {n} rows changed."
    )
else:
    st.markdown("Adding 0 changes nothing: move the slider.")

# -- batching with padding ------------------------------------------------------------------------

st.subheader("Batching with padding")
SHORT, LONG = ("the", "cat", "sat"), ("my", "dog", "chased", "the", "ball")
st.markdown(
    f"A batch is one rectangular array, so “{' '.join(SHORT)}” ({len(SHORT)} tokens) is padded "
    f"to the length of “{' '.join(LONG)}” ({len(LONG)} tokens). The padding mask hides the "
    "pad slots, and the real tokens get the same result as when each sentence runs alone."
)
row1 = st.columns(3)
use_padding_mask = row1[0].toggle("Use the padding mask", key=view.bool("batch_mask", True))
batch_causal = row1[1].toggle("Causal (decoder)", key=view.bool("batch_causal", False))
side = row1[2].segmented_control(
    "Pad on the", ["right", "left"], key=view.choice("batch_side", "right", ["right", "left"])
)
row2 = st.columns(2)
pad_value = row2[0].slider(
    "Every entry of a pad slot's q, k, v",
    -3.0,
    3.0,
    step=0.5,
    key=view.float("pad_value", 1.0, lo=-3.0, hi=3.0),
)
batch_dtype = row2[1].segmented_control(
    "Precision",
    ["float64", "float32"],
    key=view.choice("batch_dtype", "float64", ["float64", "float32"]),
)
sentences = [
    example_qkv(len(words), D_K, seed + 1 + index) for index, words in enumerate((SHORT, LONG))
]
batch = padded_batch(
    sentences,
    causal=batch_causal,
    use_padding_mask=use_padding_mask,
    pad_value=pad_value,
    side=side or "right",
    dtype=np.dtype(batch_dtype or "float64"),
)
metrics = st.columns(2)
for column, words, difference in zip(metrics, (SHORT, LONG), batch.difference, strict=True):
    column.metric(
        f"max |batched − alone|, “{' '.join(words)}”",
        f"{difference:.3g}",
        help="Largest difference over the sentence's real tokens and output features.",
    )
short_tokens = [PAD] * (len(LONG) - len(SHORT))
short_tokens = list(SHORT) + short_tokens if batch.side == "right" else short_tokens + list(SHORT)
batch_allowed = np.ones((len(LONG), len(LONG)), bool) if batch.mask is None else batch.mask[0]
left, right = st.columns(2)
with left:
    charts.show(
        mask_views.heatmap(
            batch_allowed.astype(float),
            row_labels=short_tokens,
            col_labels=short_tokens,
            kind="mask",
            decimals=0,
            title=f"Mask of “{' '.join(SHORT)}” in the batch",
            height=300,
        ),
        filename="batch-mask",
    )
with right:
    charts.show(
        mask_views.heatmap(
            batch.batched.weights[0],
            row_labels=short_tokens,
            col_labels=short_tokens,
            title="Its weights in the batch",
            height=300,
        ),
        filename="batch-weights",
    )
if batch.difference[0] == 0 and not use_padding_mask:
    st.info(
        "No difference even without the padding mask: with padding on the right, the causal "
        "mask already hides the pad slots (they come after every real token). Pad on the left "
        "to see them leak.",
        icon=":material/info:",
    )
elif batch.difference[0] > 0 and not use_padding_mask:
    st.warning(
        f"Without the padding mask the pad slots take part in the softmax and change the short "
        f"sentence's outputs by up to {batch.difference[0]:.3g}.",
        icon=":material/warning:",
    )
else:
    st.success(
        f"The real tokens' outputs equal the ones computed alone: the largest difference is "
        f"{batch.difference[0]:.3g} ({batch_dtype}).",
        icon=":material/check_circle:",
    )
if batch.batched.fully_masked[0].any():
    st.caption(
        "Left padding with a causal mask leaves the pad queries nothing to attend to: their rows "
        "are fully masked (zero weights, flagged), the case of the next section."
    )

# -- a row with nothing to attend to --------------------------------------------------------------

st.subheader("A row with nothing to attend to")
st.markdown(
    "If every key of a query is blocked, its scores are all −∞. The textbook softmax then "
    "computes 0/0 = **NaN**; this package defines the row's weights and output as **zero** and "
    "flags it in `fully_masked`."
)
empty_row = st.selectbox(
    "Block every key of query",
    list(range(1, n + 1)),
    format_func=lambda p: f"{p} · {tokens[p - 1]}",
    key=view.int("empty_row", n, lo=1, hi=n),
)
empty_grid = np.ones((n, n), bool)
empty_grid[empty_row - 1] = False
empty = compare_mask(q, k, v, lab_mask(n, ["custom"], custom=empty_grid))
r = empty_row - 1
key_names = [f"{j + 1} {token}" for j, token in enumerate(tokens)]
st.dataframe(
    pd.DataFrame(
        [
            [charts.format_number(x, 4) for x in empty.masked.masked[r]],
            [charts.format_number(x, 4) for x in empty.naive_weights[r]],
            [charts.format_number(x, 4) for x in empty.masked.weights[r]],
        ],
        index=["masked scores", "weights, naive softmax", "weights, this package"],
        columns=key_names,
    ),
    width="stretch",
)
naive_out = ", ".join(charts.format_number(x, 4) for x in empty.naive_output[r])
safe_out = ", ".join(charts.format_number(x, 4) for x in empty.masked.output[r])
st.markdown(
    f"Output of query {empty_row}: naive **[{naive_out}]**, this package **[{safe_out}]**, "
    f"fully_masked = **{bool(empty.masked.fully_masked[r])}**.\n\n"
    "Why it matters: padding queries (and left-padded rows under a causal mask) have nothing to "
    "attend to. A NaN there does not stay there: the next layer multiplies it into sums, a loss "
    "averaged over the batch becomes NaN, and so does every gradient."
)

# -- additive masks: −∞ versus a large negative number --------------------------------------------

st.subheader("Why −∞ and not −1e9?")
LEAK_KEYS = ("the", "cat", PAD, PAD)
LEAK_SCORES = np.array([-1.0, -0.5, 1.0, 0.5])
LEAK_ALLOWED = np.array([True, True, False, False])
FILLS = {
    "−∞": -np.inf,
    "−1e9": -1e9,
    "−1e4 (original BERT)": -1e4,
    "float16 min (−65504)": FLOAT16_MIN,
}
SCALES = ("1", "10", "100", "1e3", "1e4", "3e4", "6e4", "1e5", "1e6", "1e8", "1e9", "1e10")
st.markdown(
    "Many libraries mask by *adding* a bias: 0 for allowed keys, a large negative number for "
    "blocked ones. One query with keys "
    + ", ".join(f"{key} ({score:g})" for key, score in zip(LEAK_KEYS, LEAK_SCORES, strict=True))
    + " (score × scale); the two pads are blocked but would win the softmax. Every step below is "
    "computed in the chosen precision (NumPy float16 is real half precision)."
)
controls = st.columns(3)
leak_dtype = controls[0].segmented_control(
    "Precision",
    ["float16", "float32", "float64"],
    key=view.choice("leak_dtype", "float16", ["float16", "float32", "float64"]),
)
leak_dtype = leak_dtype or "float16"
scale_text = controls[1].select_slider(
    "Score scale", SCALES, key=view.choice("scale", "1e4", SCALES)
)
all_blocked = controls[2].toggle(
    "Block every key (a padding query)", key=view.bool("all_blocked", False)
)
leak_allowed = np.zeros(4, bool) if all_blocked else LEAK_ALLOWED
rows = {
    name: additive_mask_softmax(
        LEAK_SCORES, leak_allowed, fill=fill, dtype=leak_dtype, scale=float(scale_text)
    )
    for name, fill in FILLS.items()
}
key_columns = [
    f"{j + 1} {key}" + (" (blocked)" if not leak_allowed[j] else "")
    for j, key in enumerate(LEAK_KEYS)
]
fill_index = pd.Index(list(rows), name="fill")
st.markdown(f"**Scores plus mask, s + m, computed in {leak_dtype}**")
st.dataframe(
    pd.DataFrame(
        [[float(row.stored_fill)] + [float(x) for x in row.biased] for row in rows.values()],
        index=fill_index,
        columns=[f"fill in {leak_dtype}", *key_columns],
    ).style.format("{:.6g}"),
    width="stretch",
)
st.markdown(f"**Weights, softmax(s + m) in {leak_dtype}**")
st.dataframe(
    pd.DataFrame(
        [
            [float(x) for x in row.weights] + [float(row.leaked), float(row.weight_sum)]
            for row in rows.values()
        ],
        index=fill_index,
        columns=[*key_columns, "weight on blocked keys", "Σ weights"],
    ).style.format("{:.6g}"),
    width="stretch",
)
stored = rows["−1e9"].stored_fill
sentences_out = [
    f"Scale {scale_text}, {leak_dtype}: "
    + "; ".join(
        f"{name} leaves **{float(row.leaked):.4g}** of the weight on blocked keys"
        for name, row in rows.items()
    )
    + "."
]
if np.isneginf(stored):
    sentences_out.append(
        f"{leak_dtype} cannot store −1e9: it rounds to −∞ (largest float16: 65504)."
    )
if any(row.scores_overflow for row in rows.values()):
    sentences_out.append(
        f"The scaled scores do not fit in {leak_dtype}: they overflow to ±∞ and the softmax "
        "returns NaN."
    )
sentences_out.append(
    "A finite fill only lowers a blocked score by |fill|: once a blocked key outscores the "
    "allowed ones by more than that, it wins the softmax. With −∞, exp(−∞) = 0 whatever the "
    "scores, and the stable softmax (which subtracts the row maximum) never overflows. A fully "
    "blocked row is the worst case: any finite fill spreads the whole weight over the keys it was "
    "told to ignore, while −∞ gives zeros."
)
st.markdown("\n\n".join(sentences_out))
curve_scales = np.logspace(0, 10, 81)
curves = {
    name: leak_curve(LEAK_SCORES, leak_allowed, curve_scales, fill=fill, dtype=leak_dtype)
    for name, fill in FILLS.items()
}
figure = charts.line_plot(
    curve_scales,
    curves,
    x_title="score scale",
    y_title="weight on blocked keys",
    title=f"Weight leaked onto blocked keys, {leak_dtype} (gaps: scores overflow)",
    log_x=True,
    dashed=["−∞"],
)
figure.add_vline(x=float(scale_text), line_dash="dot", line_color="#888")
charts.show(figure, filename=f"mask-leak-{leak_dtype}")

what_to_try(
    [
        "Combine **Causal** with **Padding**: the weights of a row are zero on its future and on "
        "the pads, and the row still sums to 1.",
        "In the **Custom grid**, untick a whole row: its badge turns orange and its weights are 0.",
        "**The future cannot leak**: change the last token's value vector: under the causal mask "
        "only its own row moves.",
        "**Batching**: turn the padding mask off, then pad on the left with the causal toggle on.",
        "**−∞ versus −1e9**: in float16 raise the scale from 1e3 to 6e4 and watch −1e4, then the "
        "float16 minimum, start to leak; switch on “Block every key”.",
    ]
)

view.sync_url()
