"""The cost formulas (FLOPs, bytes, score counts) by hand and by enumeration."""

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.cost import (
    attention_flops,
    chunk_bytes,
    decoding_score_counts,
    max_abs_difference,
    quadratic_reference,
    score_matrix_bytes,
)

# --- formulas -----------------------------------------------------------------------------------


def test_flops_counted_by_hand():
    # Q (2×4) Kᵀ (4×3): 6 scores, each 4 multiplies + 4 adds = 8 -> 48.
    # weights (2×3) V (3×5): 10 outputs, each 3 multiplies + 3 adds = 6 -> 60. Total 108.
    assert attention_flops(2, 3, 4, 5) == 108
    # Self-attention n = 1024, d = 64: 4·n²·d, times the number of heads.
    assert attention_flops(1024, 1024, 64) == 4 * 1024**2 * 64
    assert attention_flops(10, 10, 8, heads=12) == 12 * 4 * 100 * 8


def test_bytes_equal_the_numpy_arrays_they_describe():
    assert score_matrix_bytes(300, 200) == np.empty((300, 200), np.float32).nbytes
    assert score_matrix_bytes(7, 9, heads=3, itemsize=8) == np.empty((3, 7, 9)).nbytes
    assert chunk_bytes(300, 200, 64) == np.empty((300, 64), np.float32).nbytes
    # A block wider than the keys is just the whole key range.
    assert chunk_bytes(300, 50, 64) == np.empty((300, 50), np.float32).nbytes
    assert score_matrix_bytes(8192, 8192) == 268_435_456  # 256 MiB: why 8k tokens hurt


def test_quadratic_reference_passes_through_its_anchor_and_grows_fourfold_per_doubling():
    ref = quadratic_reference([128, 256, 512, 1024], 512, 0.2)
    np.testing.assert_allclose(ref, [0.2 / 16, 0.2 / 4, 0.2, 0.8], rtol=1e-15)


def test_decoding_score_counts_by_enumeration():
    for n in (1, 2, 5, 17):
        with_cache = sum(t for t in range(1, n + 1))  # 1 query × t keys at step t
        without = sum(t * t for t in range(1, n + 1))  # t queries × t keys at step t
        assert decoding_score_counts(n) == (with_cache, without)
    # 3 tokens: 1 + 2 + 3 = 6 with the cache, 1 + 4 + 9 = 14 without.
    assert decoding_score_counts(3) == (6, 14)


def test_max_abs_difference():
    assert max_abs_difference([[1.0, 2.0]], [[1.5, -1.0]]) == 3.0
    assert max_abs_difference([], []) == 0.0
    with pytest.raises(AttentionInputError, match="Cannot compare"):
        max_abs_difference([1.0], [1.0, 2.0])


@pytest.mark.parametrize("bad", [0, -3, 2.5, "abc", True])
def test_formulas_refuse_bad_sizes(bad):
    with pytest.raises(AttentionInputError):
        attention_flops(bad, 4, 4)
