"""The masking lab's pictures of the chosen mask: the mask, the masked scores and the weights
without and with it, the row sums, the encoder's and the decoder's masks, and the causal mask
off and on compared. Every heatmap comes from the figure cache (`render.cached`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

from attention_core import AttentionInputError, scaled_dot_product_attention
from attention_core.lessons.mask_experiments import MaskComparison, lab_mask
from ui.masking.example import D_K
from ui.widgets import compare, heatmaps, render
from ui.widgets.state import PageState, write_url_after_fragment


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


@st.fragment
def compare_causal(
    view: PageState,
    qkv: tuple[np.ndarray, np.ndarray, np.ndarray],
    kinds: Sequence[str],
    tokens: Sequence[str],
    **parameters: object,
) -> None:
    """The chosen mask's weights with the causal kind off (A) and on (B); `parameters` are
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
                        *qkv, mask=lab_mask(len(tokens), chosen, **parameters)
                    ).weights
                    for chosen in (others, [*others, "causal"])
                )
            except AttentionInputError as error:
                st.error(str(error), icon=":material/error:")
            else:
                compare.show(a, b, names=("causal off", "causal on"), query_labels=tokens,
                             key_labels=tokens, filename="mask-causal-compare")  # fmt: skip
    write_url_after_fragment(view)
