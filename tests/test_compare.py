"""compare_patterns against NumPy one-liners and a hand-worked 2×2 example."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import AttentionInputError
from attention_core.compare import compare_patterns


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def labels(n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_hand_worked_two_by_two():
    # A: query "it" looks only at "cat"; query "sat" splits evenly. B: "it" moves 0.7 to "mat".
    a = [[1.0, 0.0], [0.5, 0.5]]
    b = [[0.3, 0.7], [0.6, 0.4]]
    c = compare_patterns(a, b, ["it", "sat"], ["cat", "mat"], names=("head 1", "head 2"))
    # B − A by hand: [[0.3 − 1, 0.7 − 0], [0.6 − 0.5, 0.4 − 0.5]] = [[−0.7, 0.7], [0.1, −0.1]].
    np.testing.assert_allclose(c.difference, [[-0.7, 0.7], [0.1, -0.1]], atol=1e-15)
    # TV: ½(0.7 + 0.7) = 0.7 and ½(0.1 + 0.1) = 0.1.
    np.testing.assert_allclose(c.row_tv, [0.7, 0.1], atol=1e-15)
    assert c.max_abs_difference == pytest.approx(0.7)
    assert c.largest == (0, 0)  # |−0.7| ties with |0.7|: the first in row order
    assert c.most_moved_row == 0
    assert c.sentence == (
        "The largest change is query 1 “it” → key 1 “cat”: 1.000 in head 1, 0.300 in head 2 "
        "(−0.700); the row that moved most is the same query, with a total variation distance "
        "of 0.700 (half the sum of its |head 2 − head 1|: 0 means the same weights, 1 means no "
        "key in common)."
    )
    assert not c.same


def test_against_numpy_one_liners():
    rng = np.random.default_rng(3)
    a = softmax_rows(rng.normal(size=(5, 7)))
    b = softmax_rows(rng.normal(size=(5, 7)) * 2)
    c = compare_patterns(a, b, labels(5, "q"), labels(7, "k"))
    np.testing.assert_array_equal(c.difference, b - a)
    np.testing.assert_allclose(c.row_tv, 0.5 * np.abs(b - a).sum(axis=1), rtol=1e-15)
    assert c.max_abs_difference == np.abs(b - a).max()
    i, j = np.unravel_index(np.abs(b - a).argmax(), a.shape)
    assert c.largest == (i, j)
    assert c.most_moved_row == np.argmax(0.5 * np.abs(b - a).sum(axis=1))


def test_sentence_names_the_cell_and_the_row():
    a = np.full((3, 3), 1 / 3)
    b = a.copy()
    b[2] = [0.05, 0.05, 0.9]  # row "on": key "mat" gains 0.567, TV 0.567
    b[1] = [0.0, 0.5, 0.5]  # row "sat": its largest |change| is 1/3, TV 1/3
    c = compare_patterns(a, b, ["cat", "sat", "on"], ["the", "rug", "mat"], names=("off", "on"))
    assert c.largest == (2, 2)
    assert "query 3 “on” → key 3 “mat”: 0.333 in off, 0.900 in on (+0.567)" in c.sentence
    assert "the row that moved most is the same query" in c.sentence
    # The most moved row need not hold the largest cell: spread a change over many keys.
    a = np.full((2, 4), 0.25)
    b = np.array([[0.0, 0.0, 0.5, 0.5], [0.25, 0.25, 0.0, 0.5]])
    c = compare_patterns(a, b, ["x", "y"], ["k1", "k2", "k3", "k4"])
    # Row 1: |diff| = 0.25 each, TV 0.5; row 2: |diff| = 0.25 twice, TV 0.25. Largest cell
    # ties at 0.25 everywhere it moved: the first is (0, 0).
    assert c.largest == (0, 0) and c.most_moved_row == 0
    b = np.array([[0.1, 0.1, 0.4, 0.4], [0.25, 0.25, 0.0, 0.5]])
    c = compare_patterns(a, b, ["x", "y"], ["k1", "k2", "k3", "k4"])
    # Row 1: |diff| 0.15 each, TV 0.3; row 2: |diff| 0.25 at k3 and k4, TV 0.25.
    assert c.largest == (1, 2) and c.most_moved_row == 0
    assert "query 2 “y” → key 3 “k3”" in c.sentence
    assert "the row that moved most is query 1 “x”, with a total variation distance of 0.300" in (
        c.sentence
    )


def test_identical_patterns_say_so():
    a = softmax_rows(np.arange(6.0).reshape(2, 3))
    c = compare_patterns(a, a.copy(), ["a", "b"], ["x", "y", "z"])
    assert c.same and c.max_abs_difference == 0
    assert c.sentence.startswith("A and B are the same pattern")


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(0, 2**32 - 1),
)
def test_tv_distance_of_softmax_rows_lies_in_0_1(rows, cols, seed):
    rng = np.random.default_rng(seed)
    a = softmax_rows(rng.normal(size=(rows, cols)) * 3)
    b = softmax_rows(rng.normal(size=(rows, cols)) * 3)
    c = compare_patterns(a, b, labels(rows, "q"), labels(cols, "k"))
    assert ((c.row_tv >= 0) & (c.row_tv <= 1 + 1e-12)).all()
    # TV is also the largest mass any set of keys gained: the sum of the positive changes.
    np.testing.assert_allclose(c.row_tv, np.clip(b - a, 0, None).sum(axis=1), atol=1e-12)


@pytest.mark.parametrize(
    ("a", "b", "q", "k", "message"),
    [
        ([[1, 0], [0.5]], [[1, 0], [0, 1]], "ab", "xy", "Pattern A is ragged"),
        ([[1, 0], [0, 1]], [[1, 0, 0], [0, 1, 0]], "ab", "xy", "A has shape (2, 2)"),
        ([1.0, 0.0], [1.0, 0.0], "a", "xy", "Pattern A must be a matrix"),
        ([[1, np.nan]], [[1, 0]], "a", "xy", "Pattern A"),
        ([[1, 0]], [[1, 0]], "ab", "xy", "2 query labels but the patterns have 1 rows"),
        ([[1, 0]], [[1, 0]], "a", "xyz", "3 key labels but the patterns have 2 columns"),
    ],
    ids=["ragged", "shapes", "1-D", "nan", "query-labels", "key-labels"],
)
def test_bad_input_is_a_clear_message(a, b, q, k, message):
    with pytest.raises(
        AttentionInputError,
    ) as error:
        compare_patterns(a, b, list(q), list(k))
    assert message in str(error.value)
