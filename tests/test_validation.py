"""Input validation: what is accepted, and the messages a learner sees for what is not."""

import math

import numpy as np
import pytest
import torch

import attention_core
from attention_core import validation
from attention_core.validation import (
    AttentionInputError,
    as_float_array,
    as_mask,
    as_matrix,
    broadcast_batch,
    check_int,
    check_real,
    check_size,
    max_elements,
)


def test_error_is_a_value_error():
    assert issubclass(AttentionInputError, ValueError)
    assert attention_core.AttentionInputError is AttentionInputError


def test_lists_of_lists_become_float64_and_float32_is_kept():
    out = as_matrix([[1, 2], [3, 4]], "Q")
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [[1.0, 2.0], [3.0, 4.0]])
    f32 = np.ones((2, 2), dtype=np.float32)
    assert as_matrix(f32, "Q") is f32
    assert as_matrix(np.ones((1, 1), dtype=np.float16), "Q").dtype == np.float32
    assert as_matrix([[True, False]], "Q").dtype == np.float64


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[1, 2], [3]], "Q is ragged: every row must have the same number of entries."),
        ([["1", "b"]], "Q contains non-numeric values such as '1': enter plain numbers only."),
        ([[1, None]], "Q contains non-numeric values such as None: enter plain numbers only."),
        ([[1j, 2]], "Q contains complex numbers: use real numbers only."),
        (
            [1.0, 2.0],
            "Q must be a matrix (rows × columns) with at least 2 dimension(s), but it has shape "
            "(2,).",
        ),
        (
            np.zeros((0, 3)),
            "Q is empty (shape (0, 3)): it needs at least one row and one column.",
        ),
        (
            [[1.0, 2.0], [3.0, np.nan]],
            "Q contains nan at row 2, column 2: all entries must be finite numbers. Replace "
            "NaN/inf with an ordinary value (use a mask to hide positions).",
        ),
    ],
)
def test_messages(value, message):
    with pytest.raises(AttentionInputError) as info:
        as_matrix(value, "Q")
    assert str(info.value) == message


def test_nonfinite_location_in_higher_rank_arrays():
    x = np.zeros((2, 3, 4))
    x[1, 2, 0] = -np.inf
    with pytest.raises(AttentionInputError, match=r"-inf at index \[1, 2, 0\] \(counting from 0\)"):
        as_matrix(x, "K")
    assert as_float_array(x, "scores", allow_neg_inf=True) is x


def test_a_tensor_joins_lists_in_torch_and_numpy_only_functions_refuse_it():
    q = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    steps = attention_core.scaled_dot_product_attention(q, [[1, 0], [0, 1]], [[1], [3]])
    assert isinstance(steps.output, torch.Tensor)
    # Row 1 scores (1, 0)/√2: weights e^(1/√2) : 1; row 2 scores (0, 0): weights ½, ½.
    w = math.exp(1 / math.sqrt(2))
    expected = [[(w * 1 + 3) / (w + 1)], [2.0]]
    np.testing.assert_allclose(steps.output.numpy(), expected, rtol=1e-15)
    with pytest.raises(AttentionInputError, match="is a torch tensor, but this function works on"):
        attention_core.attention_entropy(torch.ones(2, 2) / 2)


def test_check_int_and_real():
    assert check_int(np.int64(3), "n") == 3
    assert check_int(4.0, "n") == 4
    with pytest.raises(AttentionInputError, match=r"n must be a whole number, got 2\.5"):
        check_int(2.5, "n")
    with pytest.raises(AttentionInputError, match="n must be at least 1, got 0"):
        check_int(0, "n", minimum=1)
    with pytest.raises(AttentionInputError, match="whole number"):
        check_int("3", "n")
    assert check_real(np.float32(0.5), "t") == 0.5
    with pytest.raises(AttentionInputError, match=r"t must be greater than 0, got -1\.0"):
        check_real(-1, "t", positive=True)
    with pytest.raises(AttentionInputError, match="t must be a real number"):
        check_real(True, "t")


def test_as_mask():
    assert as_mask([[1, 0]], "mask", (3, 2)).dtype == np.bool_
    with pytest.raises(AttentionInputError, match="must be boolean"):
        as_mask([[0.5, 1.0]], "mask", (1, 2))
    with pytest.raises(AttentionInputError, match="must be boolean"):
        as_mask([[2, 0]], "mask", (1, 2))
    with pytest.raises(AttentionInputError, match=r"mask has shape \(3, 3\) but the scores"):
        as_mask(np.ones((3, 3), bool), "mask", (3, 2))
    # Leading batch dims on the mask may add to the scores' dims.
    assert as_mask(np.ones((5, 1, 3, 2), bool), "mask", (3, 2)).shape == (5, 1, 3, 2)


def test_broadcast_batch():
    assert broadcast_batch(("Q", (2, 1)), ("K", (1, 3))) == (2, 3)
    with pytest.raises(AttentionInputError, match=r"Q \(2,\), K \(3,\)"):
        broadcast_batch(("Q", (2,)), ("K", (3,)))


def test_size_cap_is_configurable():
    default = validation.MAX_ELEMENTS
    assert default == 50_000_000
    check_size((7000, 7000), "scores")
    with pytest.raises(AttentionInputError, match="49,000,000 numbers"):
        with max_elements(1000):
            check_size((7000, 7000), "The score matrix")
    assert validation.MAX_ELEMENTS == default
    with pytest.raises(AttentionInputError, match="more than the limit of 50,000,000"):
        attention_core.causal_mask(10_000, 10_000)
    try:
        validation.MAX_ELEMENTS = 10
        with pytest.raises(AttentionInputError, match="limit of 10"):
            attention_core.causal_mask(4)
    finally:
        validation.MAX_ELEMENTS = default
