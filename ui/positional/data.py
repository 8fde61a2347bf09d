"""The positional page's derived arrays, cached by the settings that define them.

Tables reach 2048 positions × 1024 dimensions (16 MB each), and the similarity matrix 2048²:
each is computed once per distinct setting with `st.cache_data`, bounded, so a rerun after an
unrelated control change recomputes nothing and every viewer of one link shares one entry.
Nothing here computes a formula: the numbers come from `attention_core`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import alibi_slopes, sinusoidal_encoding
from attention_core.lessons.position_experiments import (
    OffsetProfile,
    OrderBlindness,
    PositionBreakdown,
    RotationExample,
    ShiftCheck,
    offset_profile,
    order_blindness,
    permutation,
    position_breakdown,
    rotation_example,
    same_content_scores,
    shift_check,
    similarity_matrix,
    toeplitz_deviation,
    unseen_angle_share,
)

# Big tables: only needed when a figure is built, and a cache hit unpickles a copy.
_BIG = {"max_entries": 2, "show_spinner": False}
_SMALL = {"max_entries": 64, "show_spinner": False}

# The breakdown table's number formats, next to the frame whose column names they follow.
BREAKDOWN_COLUMNS = {
    "ω_i = base^(-2i/d)": st.column_config.NumberColumn(format="%.6g"),
    "angle p·ω_i": st.column_config.NumberColumn(format="%.6g"),
    "wavelength 2π/ω_i": st.column_config.NumberColumn(format="%.6g"),
    "PE[p, dimension]": st.column_config.NumberColumn(format="%.10f"),
}


# -- the sinusoidal table, one position, similarity and the rotation ------------------------------


@st.cache_data(**_BIG)
def pe_table(num_positions: int, d_model: int, base: float) -> np.ndarray:
    """PE, `(position, dimension)`."""
    return sinusoidal_encoding(num_positions, d_model, base)


@st.cache_data(**_SMALL)
def breakdown_frame(position: int, d_model: int, base: float) -> pd.DataFrame:
    """One row per dimension: what is computed, from which angle, and the value."""
    b: PositionBreakdown = position_breakdown(position, d_model, base)
    return pd.DataFrame(
        {
            "dimension": b.dimension,
            "i (pair)": b.pair,
            "function": b.function,
            "ω_i = base^(-2i/d)": b.frequency,
            "angle p·ω_i": b.angle,
            "wavelength 2π/ω_i": b.wavelength,
            "PE[p, dimension]": b.value,
        }
    )


@st.cache_data(**_SMALL)
def similarity_profile(num_positions: int, d_model: int, base: float) -> OffsetProfile:
    # The n×n matrix is not kept: at 2048 positions it is 32 MB for a few KB of profile.
    table = pe_table(num_positions, d_model, base)
    return offset_profile(similarity_matrix(table), nonnegative=True)


@st.cache_data(**_SMALL)
def shift(num_positions: int, d_model: int, offset: int, base: float) -> ShiftCheck:
    return shift_check(num_positions, d_model, offset, base)


@st.cache_data(**_SMALL)
def rotation(position: int, offset: int, pair: int, d_model: int, base: float) -> RotationExample:
    return rotation_example(position, offset, pair, d_model, base)


# -- a sentence: embeddings, positions and order blindness ----------------------------------------


@st.cache_data(**_SMALL)
def blindness(
    tokens: tuple[str, ...], order_kind: str, width: int, encoding: str, seed: int, base: float
) -> OrderBlindness:
    order = permutation(order_kind, len(tokens))
    return order_blindness(tokens, order, width, encoding=encoding, seed=seed, base=base)


# -- the families and the training length ---------------------------------------------------------


class FamilySetting(NamedTuple):
    """What one family's same-content score matrix depends on (a cache key)."""

    family: str
    num_positions: int
    d_model: int
    seed: int
    base: float
    num_heads: int = 1
    head: int = 0


@st.cache_data(**_SMALL)
def family_scores(setting: FamilySetting) -> np.ndarray:
    """Same-content scores, `(query position, key position)`."""
    family, num_positions, d_model, seed, base, num_heads, head = setting
    return same_content_scores(
        family, num_positions, d_model, seed=seed, base=base, num_heads=num_heads, head=head
    )


def family_spread(setting: FamilySetting) -> float:
    """The largest spread along a diagonal of the setting's scores (0 for a Toeplitz matrix);
    the scores come from their cache, so this costs a pass over a small matrix."""
    return toeplitz_deviation(family_scores(setting))


@st.cache_data(**_SMALL)
def slopes_frame(num_heads: int) -> pd.DataFrame:
    slopes = alibi_slopes(num_heads)
    return pd.DataFrame(
        {
            "head": np.arange(1, num_heads + 1),
            "slope m": slopes,
            "as a power of 2": [f"2^{np.log2(m):.4g}" for m in slopes],
        }
    )


@st.cache_data(**_SMALL)
def unseen_share(train_length: int, num_positions: int, d_model: int, base: float) -> np.ndarray:
    """Share of (sin, cos) pairs at an angle unseen in training, `(position,)`."""
    return unseen_angle_share(train_length, num_positions, d_model, base)
