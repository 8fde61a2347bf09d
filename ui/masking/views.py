"""Streamlit pieces of the masking lab: the custom mask grid and its compact form in a link, the
query × key heatmaps (all from `render.cached`), and one fragment per experiment, so that a
control of one experiment reruns only that experiment.

A heatmap cell cannot be clicked into a selection in Streamlit, so the custom mask is a grid of
checkboxes (a boolean `st.data_editor`): one row per query, one column per key. In the URL the
grid is one character per cell, rows separated by dots: `grid=100.110.111` is the 3-token causal
mask.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError, causal_mask, scaled_dot_product_attention
from attention_core.lessons.mask_experiments import (
    FLOAT16_MIN,
    MaskComparison,
    additive_mask_softmax,
    compare_mask,
    example_qkv,
    lab_mask,
    leak_curve,
    padded_batch,
    value_change_effect,
)
from ui.widgets import compare, describe, heatmaps, lines, render
from ui.widgets.state import PageState, write_url_after_fragment

GRID_PARAM = "grid"
GRID_ROW_SEPARATOR = "."
MAX_GRID_SIDE = 8


def encode_grid(grid: np.ndarray) -> str:
    """`100.110.111` for the 3×3 causal mask: a 0/1 per cell, rows joined by dots."""
    return GRID_ROW_SEPARATOR.join("".join("1" if cell else "0" for cell in row) for row in grid)


def decode_grid(raw: str, *, max_side: int = MAX_GRID_SIDE) -> np.ndarray:
    """The boolean grid written by `encode_grid`; ValueError (saying why) for anything else."""
    if len(raw) > max_side * (max_side + 1):
        raise ValueError(f"it is longer than a {max_side}×{max_side} grid")
    rows = raw.split(GRID_ROW_SEPARATOR)
    if len(rows) > max_side or any(len(row) > max_side for row in rows):
        raise ValueError(f"it is larger than {max_side}×{max_side}")
    if any(set(row) - {"0", "1"} for row in rows):
        raise ValueError("it may only hold 0 and 1, with a dot between rows")
    if any(len(row) != len(rows) for row in rows):
        raise ValueError("it is not square (one row per query, one column per key)")
    return np.array([[cell == "1" for cell in row] for row in rows], dtype=bool)


def resize_grid(grid: np.ndarray, n: int) -> np.ndarray:
    """`grid` cut or grown to `(n, n)`; new cells follow the causal mask."""
    resized = causal_mask(n)
    keep = min(n, grid.shape[0])
    resized[:keep, :keep] = grid[:keep, :keep]
    return resized


def custom_grid_editor(
    view: PageState,
    labels: Sequence[str],
    *,
    presets: dict[str, np.ndarray],
) -> np.ndarray:
    """Draw the checkbox grid for `len(labels)` tokens and return it as an `(n, n)` bool mask.

    The grid lives in the page state (and the link) under `grid`; `presets` are buttons that
    refill the grid ("Causal", "All allowed", ...), each an `(n, n)` bool array.
    """
    n = len(labels)
    default = encode_grid(causal_mask(n))
    state_key = view.text_key(GRID_PARAM, default, max_chars=MAX_GRID_SIDE * (MAX_GRID_SIDE + 1))
    raw = st.session_state[state_key]
    try:
        grid = decode_grid(raw)
    except ValueError as error:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        view.notices.append(
            f"The link's `{GRID_PARAM}={shown}` was ignored: {error}. "
            "Showing the causal grid instead."
        )
        grid = causal_mask(n)
    if grid.shape != (n, n):
        grid = resize_grid(grid, n)

    base_key, version_key = f"{view.key(GRID_PARAM)}.base", f"{view.key(GRID_PARAM)}.version"
    version = st.session_state.get(version_key, 0)
    editor_key = f"{view.key(GRID_PARAM)}.editor.v{version}"
    labels = tuple(str(label) for label in labels)
    seeded = st.session_state.get(base_key)
    base = seeded[1] if seeded is not None and seeded[0] == labels else None

    st.caption("Fill the grid with:")
    buttons = st.columns(len(presets))
    chosen = None
    for column, (name, preset) in zip(buttons, presets.items(), strict=True):
        if column.button(name, key=f"{view.key(GRID_PARAM)}.fill.{name}", width="stretch"):
            chosen = np.asarray(preset, dtype=bool)
    # A fresh table is seeded from the stored grid whenever the old one cannot be trusted: a
    # preset was chosen, the tokens changed, or the editor's edits were dropped (page switch).
    stale = base is None or editor_key not in st.session_state
    if chosen is not None or stale:
        base = grid if chosen is None else chosen
        version += 1
        st.session_state[version_key] = version
        st.session_state[base_key] = (labels, base.copy())
        editor_key = f"{view.key(GRID_PARAM)}.editor.v{version}"

    names = [f"k{j + 1}" for j in range(n)]
    table = pd.DataFrame(base, columns=names)
    table.insert(0, "query", [f"{i + 1} {label}" for i, label in enumerate(labels)])
    edited = st.data_editor(
        table,
        key=editor_key,
        hide_index=True,
        num_rows="fixed",
        disabled=("query",),
        column_config={
            "query": st.column_config.TextColumn("query ↓  key →", width="small", pinned=True),
            **{
                name: st.column_config.CheckboxColumn(f"{j + 1} {labels[j]}", width="small")
                for j, name in enumerate(names)
            },
        },
    )
    grid = edited[names].eq(True).to_numpy()  # an emptied cell counts as blocked
    encoded = encode_grid(grid)
    if encoded != raw:
        view.set(GRID_PARAM, encoded)
    return grid


# -- the lab's pictures ---------------------------------------------------------------------------

PAD = "<pad>"
D_K = 4


def show_heatmap(
    values: np.ndarray, tokens: Sequence[str], *, filename: str, **options: object
) -> None:
    """A query × key heatmap over `tokens` (the rows and the columns), from the figure cache."""
    figure = render.cached(
        heatmaps.heatmap,
        np.asarray(values, dtype=np.float64),
        row_labels=tuple(tokens),
        col_labels=tuple(tokens),
        **options,
    )
    render.show(figure, filename=filename)


def show_mask(allowed: np.ndarray, tokens: Sequence[str], **options: object) -> None:
    """A boolean `(q_pos, k_pos)` mask, True drawn as 1 ("may attend")."""
    show_heatmap(np.asarray(allowed, dtype=float), tokens, kind="mask", decimals=0, **options)


def custom_grid(
    view: PageState, tokens: Sequence[str], other_kinds: Sequence[str], **options: object
) -> np.ndarray:
    """The custom grid editor with its fill buttons: causal, all allowed, all blocked, and the
    other chosen kinds combined (`options` are `lab_mask`'s), when they make a mask."""
    n = len(tokens)
    presets = {
        "Causal": causal_mask(n),
        "All allowed": np.ones((n, n), bool),
        "All blocked": np.zeros((n, n), bool),
    }
    try:
        from_others = lab_mask(n, other_kinds, **options)
    except AttentionInputError:
        from_others = None
    if from_others is not None:
        presets["The other kinds"] = from_others
    return custom_grid_editor(view, tokens, presets=presets)


def show_mask_effect(lab: MaskComparison, allowed: np.ndarray, tokens: Sequence[str]) -> None:
    """The mask and the masked scores, then the weights without and with it, two by two."""
    n = len(tokens)
    scaled = lab.masked.scaled
    left, right = st.columns(2)
    with left:
        show_mask(
            allowed,
            tokens,
            title="Mask (1 = may attend)",
            hover=[["may attend" if cell else "blocked" for cell in row] for row in allowed],
            filename="mask",
        )
        show_heatmap(
            lab.unmasked.weights,
            tokens,
            title="Weights without the mask",
            hover=[[f"softmax of row {i + 1}"] * n for i in range(n)],
            filename="weights-without-mask",
        )
    with right:
        show_heatmap(
            lab.masked.masked,
            tokens,
            kind="scores",
            title="Masked scores (−∞ where blocked)",
            hover=[[f"q·k/√{D_K} = {scaled[i, j]:.4f}" for j in range(n)] for i in range(n)],
            filename="masked-scores",
        )
        show_heatmap(
            lab.masked.weights,
            tokens,
            title="Weights with the mask",
            hover=[
                [
                    f"softmax of row {i + 1}" if allowed[i, j] else "blocked: exp(−∞) = 0"
                    for j in range(n)
                ]
                for i in range(n)
            ],
            filename="weights-with-mask",
        )


def row_sum_badges(lab: MaskComparison, tokens: Sequence[str]) -> str:
    """One badge per query: its masked weights' sum, or "fully masked" in orange."""
    badges = []
    for i, token in enumerate(tokens):
        if lab.masked.fully_masked[i]:
            badges.append(f":orange-badge[:material/block: {i + 1} {token}: Σ = 0, fully masked]")
        else:
            badges.append(
                f":green-badge[:material/check: {i + 1} {token}: Σ = {lab.row_sums[i]:.4f}]"
            )
    return "**Each row of the masked weights sums to:** " + " ".join(badges)


def show_encoder_and_decoder_masks(tokens: Sequence[str], padding: Sequence[int]) -> None:
    """The padding mask of an encoder beside the causal + padding mask of a decoder."""
    n = len(tokens)
    for column, title, kinds, filename in zip(
        st.columns(2),
        ("Encoder: padding mask", "Decoder: causal + padding mask"),
        (["padding"], ["causal", "padding"]),
        ("encoder-mask", "decoder-mask"),
        strict=True,
    ):
        with column:
            allowed = lab_mask(n, kinds, padding=padding)
            show_mask(allowed, tokens, title=title, height=300, filename=filename)


def position_picker(container, label: str, tokens: Sequence[str], key: str) -> int:
    """A selectbox of the 1-based positions of `tokens`, shown as `3 · sat`."""
    return container.selectbox(
        label,
        list(range(1, len(tokens) + 1)),
        format_func=lambda p: f"{p} · {tokens[p - 1]}",
        key=key,
    )


# -- causal on and off, compared ------------------------------------------------------------------


@st.fragment
def compare_causal(
    view: PageState,
    qkv: tuple[np.ndarray, np.ndarray, np.ndarray],
    kinds: Sequence[str],
    tokens: Sequence[str],
    **options: object,
) -> None:
    """The chosen mask's weights with the causal kind off (A) and on (B); `options` are
    `lab_mask`'s (padding, window, prefix_len, custom)."""
    box = compare.opened(view, label="Compare: causal mask off and on")
    if box is not None:
        with box:
            others = [kind for kind in kinds if kind != "causal"]
            st.caption(
                "The other mask kinds chosen above stay on in both: only the causal mask changes."
                if others
                else "No other mask kind is chosen: A has no mask at all."
            )
            try:
                a, b = (
                    scaled_dot_product_attention(
                        *qkv, mask=lab_mask(len(tokens), chosen, **options)
                    ).weights
                    for chosen in (others, [*others, "causal"])
                )
            except AttentionInputError as error:
                st.error(str(error), icon=":material/error:")
            else:
                compare.show(a, b, names=("causal off", "causal on"), query_labels=tokens,
                             key_labels=tokens, filename="mask-causal-compare")  # fmt: skip
    write_url_after_fragment(view)


# -- the future cannot leak -----------------------------------------------------------------------


@st.fragment
def future_cannot_leak(
    view: PageState,
    qkv: tuple[np.ndarray, np.ndarray, np.ndarray],
    mask: np.ndarray | None,
    mask_name: str,
    tokens: Sequence[str],
) -> None:
    """Change one value vector; the table shows which output rows move, per mask."""
    n = len(tokens)
    pick, amount = st.columns(2)
    changed = position_picker(
        pick,
        "Change the value vector of token",
        tokens,
        view.int_key("change_at", min(4, n), lo=1, hi=n),
    )
    delta = amount.slider(
        "by adding to each of its entries",
        -5.0,
        5.0,
        step=0.5,
        key=view.float_key("delta", 2.0, lo=-5.0, hi=5.0),
    )
    masks = {"no mask": None, "causal": causal_mask(n), f"your mask ({mask_name})": mask}
    effects = {
        name: value_change_effect(*qkv, changed - 1, delta, mask=shown)
        for name, shown in masks.items()
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
            f"rows changed. With the causal mask, rows {', '.join(map(str, causal_changed))} "
            f"changed and the {changed - 1} earlier row(s) stayed **bit-for-bit identical**: "
            f"their weight on key {changed} is exactly 0, not merely small. Without a mask, "
            f"{int(effects['no mask'].changed.sum())} of {n} rows changed."
        )
    else:
        st.markdown("Adding 0 changes nothing: move the slider.")
    write_url_after_fragment(view)


# -- batching with padding ------------------------------------------------------------------------

SHORT, LONG = ("the", "cat", "sat"), ("my", "dog", "chased", "the", "ball")


@st.fragment
def batching_with_padding(view: PageState, seed: int) -> None:
    """“the cat sat” padded to the length of the long sentence, batched, versus run alone."""
    row1 = st.columns(3)
    use_padding_mask = row1[0].toggle("Use the padding mask", key=view.bool_key("batch_mask", True))
    causal = row1[1].toggle("Causal (decoder)", key=view.bool_key("batch_causal", False))
    side = row1[2].segmented_control(
        "Pad on the",
        ["right", "left"],
        key=view.choice_key("batch_side", "right", ["right", "left"]),
    )
    row2 = st.columns(2)
    pad_value = row2[0].slider(
        "Every entry of a pad slot's q, k, v",
        -3.0,
        3.0,
        step=0.5,
        key=view.float_key("pad_value", 1.0, lo=-3.0, hi=3.0),
    )
    dtype = row2[1].segmented_control(
        "Precision",
        ["float64", "float32"],
        key=view.choice_key("batch_dtype", "float64", ["float64", "float32"]),
    )
    dtype = dtype or "float64"
    sentences = [
        example_qkv(len(words), D_K, seed + 1 + index) for index, words in enumerate((SHORT, LONG))
    ]
    batch = padded_batch(
        sentences,
        causal=causal,
        use_padding_mask=use_padding_mask,
        pad_value=pad_value,
        side=side or "right",
        dtype=np.dtype(dtype),
    )
    for column, words, difference in zip(
        st.columns(2), (SHORT, LONG), batch.difference, strict=True
    ):
        column.metric(
            f"max |batched − alone|, “{' '.join(words)}”",
            f"{difference:.3g}",
            help="Largest difference over the sentence's real tokens and output features.",
        )
    pads = [PAD] * (len(LONG) - len(SHORT))
    tokens = [*SHORT, *pads] if batch.side == "right" else [*pads, *SHORT]
    allowed = np.ones((len(LONG), len(LONG)), bool) if batch.mask is None else batch.mask[0]
    left, right = st.columns(2)
    with left:
        title = f"Mask of “{' '.join(SHORT)}” in the batch"
        show_mask(allowed, tokens, title=title, height=300, filename="batch-mask")
    with right:
        show_heatmap(
            batch.batched.weights[0],
            tokens,
            title="Its weights in the batch",
            height=300,
            filename="batch-weights",
        )
    difference = batch.difference[0]
    if difference == 0 and not use_padding_mask:
        st.info(
            "No difference even without the padding mask: with padding on the right, the causal "
            "mask already hides the pad slots (they come after every real token). Pad on the "
            "left to see them leak.",
            icon=":material/info:",
        )
    elif difference > 0 and not use_padding_mask:
        st.warning(
            f"Without the padding mask the pad slots take part in the softmax and change the "
            f"short sentence's outputs by up to {difference:.3g}.",
            icon=":material/warning:",
        )
    else:
        st.success(
            f"The real tokens' outputs equal the ones computed alone: the largest difference is "
            f"{difference:.3g} ({dtype}).",
            icon=":material/check_circle:",
        )
    if batch.batched.fully_masked[0].any():
        st.caption(
            "Left padding with a causal mask leaves the pad queries nothing to attend to: their "
            "rows are fully masked (zero weights, flagged), the case of the next section."
        )
    write_url_after_fragment(view)


# -- a row with nothing to attend to --------------------------------------------------------------


@st.fragment
def nothing_to_attend_to(
    view: PageState, qkv: tuple[np.ndarray, np.ndarray, np.ndarray], tokens: Sequence[str]
) -> None:
    """Block every key of one query: the naive softmax's NaN beside this package's zeros."""
    n = len(tokens)
    empty_row = position_picker(
        st, "Block every key of query", tokens, view.int_key("empty_row", n, lo=1, hi=n)
    )
    r = empty_row - 1
    grid = np.ones((n, n), bool)
    grid[r] = False
    empty = compare_mask(*qkv, lab_mask(n, ["custom"], custom=grid))
    rows = {
        "masked scores": empty.masked.masked[r],
        "weights, naive softmax": empty.naive_weights[r],
        "weights, this package": empty.masked.weights[r],
    }
    st.dataframe(
        pd.DataFrame(
            [[describe.format_number(x, 4) for x in row] for row in rows.values()],
            # A named index: the header above the row names is not left empty for screen readers.
            index=pd.Index(list(rows), name=f"query {empty_row}"),
            columns=[f"{j + 1} {token}" for j, token in enumerate(tokens)],
        ),
        width="stretch",
    )
    naive_out = ", ".join(describe.format_number(x, 4) for x in empty.naive_output[r])
    safe_out = ", ".join(describe.format_number(x, 4) for x in empty.masked.output[r])
    st.markdown(
        f"Output of query {empty_row}: naive **[{naive_out}]**, this package **[{safe_out}]**, "
        f"fully_masked = **{bool(empty.masked.fully_masked[r])}**.\n\n"
        "Why it matters: padding queries (and left-padded rows under a causal mask) have nothing "
        "to attend to. A NaN there does not stay there: the next layer multiplies it into sums, a "
        "loss averaged over the batch becomes NaN, and so does every gradient."
    )
    write_url_after_fragment(view)


# -- additive masks: −∞ versus a large negative number --------------------------------------------

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
LEAK_DTYPES = ("float16", "float32", "float64")


@st.fragment
def minus_infinity_versus_a_fill(view: PageState) -> None:
    """The leak demo: one query's scores plus an additive mask, for every fill, in one dtype."""
    controls = st.columns(3)
    dtype = controls[0].segmented_control(
        "Precision", LEAK_DTYPES, key=view.choice_key("leak_dtype", "float16", LEAK_DTYPES)
    )
    dtype = dtype or "float16"
    scale = controls[1].select_slider(
        "Score scale", SCALES, key=view.choice_key("scale", "1e4", SCALES)
    )
    all_blocked = controls[2].toggle(
        "Block every key (a padding query)", key=view.bool_key("all_blocked", False)
    )
    allowed = np.zeros(4, bool) if all_blocked else LEAK_ALLOWED
    rows = {
        name: additive_mask_softmax(
            LEAK_SCORES, allowed, fill=fill, dtype=dtype, scale=float(scale)
        )
        for name, fill in FILLS.items()
    }
    key_columns = [
        f"{j + 1} {key}" + ("" if allowed[j] else " (blocked)") for j, key in enumerate(LEAK_KEYS)
    ]
    fill_index = pd.Index(list(rows), name="fill")
    st.markdown(f"**Scores plus mask, s + m, computed in {dtype}**")
    st.dataframe(
        pd.DataFrame(
            [[float(row.stored_fill)] + [float(x) for x in row.biased] for row in rows.values()],
            index=fill_index,
            columns=[f"fill in {dtype}", *key_columns],
        ).style.format("{:.6g}"),
        width="stretch",
    )
    st.markdown(f"**Weights, softmax(s + m) in {dtype}**")
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
    st.markdown(leak_summary(rows, scale, dtype))
    render.show(
        render.cached(leak_figure, dtype, scale, all_blocked), filename=f"mask-leak-{dtype}"
    )
    write_url_after_fragment(view)


def leak_summary(rows: dict, scale: str, dtype: str) -> str:
    """What each fill leaves on the blocked keys, and why −∞ leaves nothing."""
    sentences = [
        f"Scale {scale}, {dtype}: "
        + "; ".join(
            f"{name} leaves **{float(row.leaked):.4g}** of the weight on blocked keys"
            for name, row in rows.items()
        )
        + "."
    ]
    if np.isneginf(rows["−1e9"].stored_fill):
        sentences.append(f"{dtype} cannot store −1e9: it rounds to −∞ (largest float16: 65504).")
    if any(row.scores_overflow for row in rows.values()):
        sentences.append(
            f"The scaled scores do not fit in {dtype}: they overflow to ±∞ and the softmax "
            "returns NaN."
        )
    sentences.append(
        "A finite fill only lowers a blocked score by |fill|: once a blocked key outscores the "
        "allowed ones by more than that, it wins the softmax. With −∞, exp(−∞) = 0 whatever the "
        "scores, and the stable softmax (which subtracts the row maximum) never overflows. A "
        "fully blocked row is the worst case: any finite fill spreads the whole weight over the "
        "keys it was told to ignore, while −∞ gives zeros."
    )
    return "\n\n".join(sentences)


def leak_figure(dtype: str, scale: str, all_blocked: bool) -> go.Figure:
    """Weight leaked onto the blocked keys over score scales 1..1e10, one line per fill, with
    the chosen scale marked."""
    allowed = np.zeros(4, bool) if all_blocked else LEAK_ALLOWED
    scales = np.logspace(0, 10, 81)
    curves = {
        name: leak_curve(LEAK_SCORES, allowed, scales, fill=fill, dtype=dtype)
        for name, fill in FILLS.items()
    }
    figure = lines.line_plot(
        scales,
        curves,
        x_title="score scale",
        y_title="weight on blocked keys",
        title=f"Weight leaked onto blocked keys, {dtype} (gaps: scores overflow)",
        log_x=True,
        dashed=["−∞"],
    )
    return figure.add_vline(x=float(scale), line_dash="dot", line_color="#888")
