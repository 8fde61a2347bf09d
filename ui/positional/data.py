"""The positional page's derived arrays, cached by the settings that define them.

Tables reach 2048 positions × 1024 dimensions (16 MB each), and the similarity matrix 2048²:
each is computed once per distinct setting in the byte-bounded cache (ui.widgets.byte_cache),
so a rerun after an unrelated control change recomputes nothing and every viewer of one link
shares one entry. It is toy arithmetic, computed at once (no lane: no waiting behind a model
run), and read-only, as every session reads the same arrays. Nothing here computes a formula:
the numbers come from `attention_core`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

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
from ui.widgets.byte_cache import MB, bounded_by_bytes, read_only
from ui.widgets.tables import number_columns

# The breakdown table's number formats, next to the frame whose column names they follow.
BREAKDOWN_COLUMNS = number_columns(
    {
        "ω_i = base^(-2i/d)": "%.6g",
        "angle p·ω_i": "%.6g",
        "wavelength 2π/ω_i": "%.6g",
        "PE[p, dimension]": "%.10f",
    }
)


# -- the sinusoidal table, one position, similarity and the rotation ------------------------------


# The largest table, 2048 × 1024 float64, is 16 MB: two of them, as the page shows one at a time.
@bounded_by_bytes(32 * MB, name="positional.table", lane=None, max_entries=2)
def pe_table(num_positions: int, d_model: int, base: float) -> np.ndarray:
    """PE, `(position, dimension)`."""
    return read_only(sinusoidal_encoding(num_positions, d_model, base))


# Six columns of up to 1024 numbers, 48 KB a position: the last sixty-four positions looked at.
@bounded_by_bytes(3 * MB, name="positional.breakdown", lane=None)
def _breakdown(position: int, d_model: int, base: float) -> PositionBreakdown:
    return read_only(position_breakdown(position, d_model, base))


def breakdown_frame(position: int, d_model: int, base: float) -> pd.DataFrame:
    """One row per dimension: what is computed, from which angle, and the value (a frame of
    its own at each call, built from the cached numbers)."""
    b = _breakdown(position, d_model, base)
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


# Four lines over up to 2048 offsets, 64 KB: sixty-four settings.
@bounded_by_bytes(4 * MB, name="positional.similarity", lane=None)
def similarity_profile(num_positions: int, d_model: int, base: float) -> OffsetProfile:
    # The n×n matrix is not kept: at 2048 positions it is 32 MB for a few KB of profile.
    table = pe_table(num_positions, d_model, base)
    return read_only(offset_profile(similarity_matrix(table), nonnegative=True))


# One error per position, up to 2048 × 8 bytes: sixty-four settings.
@bounded_by_bytes(MB, name="positional.shift", lane=None)
def shift(num_positions: int, d_model: int, offset: int, base: float) -> ShiftCheck:
    return read_only(shift_check(num_positions, d_model, offset, base))


# A 2×2 rotation and three 2-vectors, under 100 bytes: a thousand settings and more.
@bounded_by_bytes(MB, name="positional.rotation", lane=None)
def rotation(position: int, offset: int, pair: int, d_model: int, base: float) -> RotationExample:
    return read_only(rotation_example(position, offset, pair, d_model, base))


# -- a sentence: embeddings, positions and order blindness ----------------------------------------


# At most 8 words of width 16: a dozen arrays of 8 × 16 numbers, ~10 KB a sentence.
@bounded_by_bytes(MB, name="positional.blindness", lane=None)
def blindness(
    tokens: tuple[str, ...], order_kind: str, width: int, encoding: str, seed: int, base: float
) -> OrderBlindness:
    order = permutation(order_kind, len(tokens))
    return read_only(order_blindness(tokens, order, width, encoding=encoding, seed=seed, base=base))


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


# The beyond-training section's four families at up to 512 positions hold 2 MB each (64², 32 KB,
# in the comparison above): two screens of them.
@bounded_by_bytes(16 * MB, name="positional.families", lane=None, max_entries=64)
def family_scores(setting: FamilySetting) -> np.ndarray:
    """Same-content scores, `(query position, key position)`."""
    family, num_positions, d_model, seed, base, num_heads, head = setting
    return read_only(
        same_content_scores(
            family, num_positions, d_model, seed=seed, base=base, num_heads=num_heads, head=head
        )
    )


def family_spread(setting: FamilySetting) -> float:
    """The largest spread along a diagonal of the setting's scores (0 for a Toeplitz matrix);
    the scores come from their cache, so this costs a pass over a small matrix."""
    return toeplitz_deviation(family_scores(setting))


def slopes_frame(num_heads: int) -> pd.DataFrame:
    """Up to 16 heads' slopes: computed at each call, in less time than a cache lookup takes."""
    slopes = alibi_slopes(num_heads)
    return pd.DataFrame(
        {
            "head": np.arange(1, num_heads + 1),
            "slope m": slopes,
            "as a power of 2": [f"2^{np.log2(m):.4g}" for m in slopes],
        }
    )


# One share per position, up to 2048 × 8 bytes: sixty-four settings.
@bounded_by_bytes(MB, name="positional.unseen", lane=None)
def unseen_share(train_length: int, num_positions: int, d_model: int, base: float) -> np.ndarray:
    """Share of (sin, cos) pairs at an angle unseen in training, `(position,)`."""
    return read_only(unseen_angle_share(train_length, num_positions, d_model, base))
