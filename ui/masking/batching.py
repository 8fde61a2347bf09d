"""“Batching with padding”: a short sentence padded to a long one's length and attended in one
batch, against each sentence run alone, with the padding mask on or off, padded on either side.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_core.lessons.mask_experiments import example_qkv, padded_batch
from ui.masking.example import D_K, PAD
from ui.masking.figures import show_heatmap, show_mask
from ui.widgets.state import PageState, write_url_after_fragment

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
