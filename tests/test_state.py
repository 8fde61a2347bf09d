"""ui.state: matrices in links, and untrusted link values."""

import numpy as np
import pytest

from ui.state import MAX_PARAM_CHARS, decode_matrix, encode_matrix


def test_matrix_round_trips_through_the_link_exactly():
    matrix = np.array([[1.0, 0.0, -2.5], [1 / 3, 1e-9, 12345.678]])
    text = encode_matrix(matrix)
    assert text.startswith("1,0,-2.5;")
    np.testing.assert_array_equal(decode_matrix(text, max_rows=8, max_cols=8), matrix)


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("1,2;3", "different lengths"),
        ("1,x", "not a number"),
        ("1,nan", "NaN or infinity"),
        (";".join(["1"] * 9), "larger than 8×8"),
        ("1," * MAX_PARAM_CHARS, "too long"),
    ],
)
def test_bad_matrices_in_a_link_are_refused_with_a_reason(raw, said):
    with pytest.raises(ValueError, match=said):
        decode_matrix(raw, max_rows=8, max_cols=8)
