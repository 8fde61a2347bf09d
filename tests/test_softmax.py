"""softmax, naive_softmax and softmax_jacobian against formulas, torch and hand-worked values."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from attention_core import AttentionInputError, naive_softmax, softmax, softmax_jacobian
from attention_core.softmax import log_sum_exp

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
finite_rows = arrays(
    np.float64,
    array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
    elements=st.floats(-50, 50, allow_nan=False),
)


def test_matches_one_line_numpy_formula():
    x = np.random.default_rng(0).normal(size=(4, 7)) * 3
    expected = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(softmax(x), expected, rtol=1e-14, atol=0)


def test_hand_worked_two_and_three_entries():
    # softmax([0, ln 3]) = [1, 3] / (1 + 3) = [1/4, 3/4].
    np.testing.assert_allclose(softmax([0.0, math.log(3.0)]), [0.25, 0.75], rtol=1e-15)
    # Equal scores share the weight equally.
    np.testing.assert_allclose(softmax([[2, 2, 2]]), [[1 / 3, 1 / 3, 1 / 3]], rtol=1e-15)
    # softmax([1, 2]) = [e, e²] / (e + e²) = [1/(1+e), e/(1+e)].
    e = math.e
    np.testing.assert_allclose(softmax([1.0, 2.0]), [1 / (1 + e), e / (1 + e)], rtol=1e-15)


def test_axis_argument():
    x = np.random.default_rng(1).normal(size=(3, 5))
    np.testing.assert_allclose(softmax(x, axis=0), softmax(x.T).T, rtol=1e-14)
    np.testing.assert_allclose(softmax(x, axis=0).sum(axis=0), np.ones(5), rtol=1e-14)


def test_stable_for_huge_scores():
    # exp(1e4) overflows; after subtracting the max the row is [0, -2e4, 0] -> [1/2, 0, 1/2].
    out = softmax([[1e4, -1e4, 1e4], [1e300, 0.0, -1e300]])
    np.testing.assert_array_equal(out, [[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])
    out32 = softmax(np.array([1e4, 1e4 - math.log(3.0)], dtype=np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, [0.75, 0.25], rtol=1e-3)


def test_neg_inf_entries_get_zero_weight_and_all_neg_inf_row_gives_zeros():
    x = np.array([[0.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
    out = softmax(x)
    np.testing.assert_array_equal(out, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])
    assert not np.isnan(out).any()


def test_dtype_is_kept():
    assert softmax(np.zeros(3, dtype=np.float32)).dtype == np.float32
    assert softmax(np.zeros(3)).dtype == np.float64
    assert softmax([1, 2, 3]).dtype == np.float64
    assert softmax(np.zeros(3, dtype=np.float16)).dtype == np.float32


def test_matches_torch_softmax():
    x = np.random.default_rng(2).normal(size=(2, 3, 4, 9)) * 10
    expected = torch.softmax(torch.from_numpy(x), dim=-1).numpy()
    np.testing.assert_allclose(softmax(x), expected, rtol=1e-13, atol=1e-300)
    x32 = x.astype(np.float32)
    expected32 = torch.softmax(torch.from_numpy(x32), dim=-1).numpy()
    np.testing.assert_allclose(softmax(x32), expected32, rtol=1e-5, atol=1e-7)


@PROPERTY
@given(finite_rows, st.floats(-1e3, 1e3, allow_nan=False))
def test_adding_a_constant_to_a_row_changes_nothing(x, c):
    np.testing.assert_allclose(softmax(x + c), softmax(x), rtol=1e-9, atol=1e-12)


@PROPERTY
@given(finite_rows)
def test_rows_are_probability_distributions(x):
    p = softmax(x)
    assert ((p >= 0) & (p <= 1)).all()
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=1e-12)


@PROPERTY
@given(finite_rows)
def test_order_is_preserved(x):
    # softmax is increasing in each entry: sorting a row by score sorts its weights too.
    order = np.argsort(x, axis=-1)
    p_sorted = np.take_along_axis(softmax(x), order, axis=-1)
    assert (np.diff(p_sorted, axis=-1) >= 0).all()


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ([1.0, np.nan], "contains nan"),
        ([1.0, np.inf], "contains inf"),
        (["a", "b"], "non-numeric"),
        ([], "empty"),
        ([[1.0, 2.0], [3.0]], "ragged"),
        (3.0, "vector"),
    ],
)
def test_bad_input_gives_learner_message(bad, fragment):
    with pytest.raises(AttentionInputError, match=fragment):
        softmax(bad)


def test_bad_axis():
    with pytest.raises(AttentionInputError, match="axis 2 does not exist"):
        softmax([[1.0, 2.0]], axis=2)
    with pytest.raises(AttentionInputError, match="integer"):
        softmax([[1.0, 2.0]], axis=1.5)


def test_naive_softmax_agrees_for_small_scores_and_breaks_for_large_ones():
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(naive_softmax(x), softmax(x), rtol=1e-15)
    # exp(1000) = inf in float64, and inf / inf is NaN: the reason for the stable version.
    big = naive_softmax([1000.0, 0.0])
    assert np.isnan(big[0]) and big[1] == 0.0
    # float32 already overflows at exp(89).
    assert np.isnan(naive_softmax(np.array([89.0, 0.0], dtype=np.float32))[0])
    # A fully masked row: 0 / 0.
    assert np.isnan(naive_softmax([-np.inf, -np.inf])).all()


def test_softmax_jacobian_matches_finite_differences():
    x = np.array([0.3, -1.2, 2.0, 0.0])
    p = softmax(x)
    eps = 1e-6
    numeric = np.empty((4, 4))
    for j in range(4):
        step = np.zeros(4)
        step[j] = eps
        numeric[:, j] = (softmax(x + step) - softmax(x - step)) / (2 * eps)
    np.testing.assert_allclose(softmax_jacobian(p), numeric, atol=1e-9)


def test_softmax_jacobian_matches_torch_autograd():
    x = torch.tensor([[0.1, 0.7, -0.4], [2.0, 2.0, -3.0]], dtype=torch.float64)
    for row in range(2):
        expected = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), x[row])
        got = softmax_jacobian(softmax(x[row].numpy()))
        np.testing.assert_allclose(got, expected.numpy(), atol=1e-15)


# --- the same functions on torch tensors ---------------------------------------------------------


def test_softmax_on_tensors_matches_torch_and_keeps_gradients():
    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x.requires_grad_()
    out = softmax(x, axis=1)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    torch.testing.assert_close(out, torch.softmax(x, dim=1), rtol=1e-15, atol=1e-16)
    (out * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    (torch.softmax(x2, dim=1) * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-13, atol=1e-15)
    # A fully masked row: zeros here, where torch.softmax gives NaN.
    masked = torch.tensor([[0.0, -math.inf], [-math.inf, -math.inf]], dtype=torch.float32)
    assert softmax(masked).tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert softmax(masked).dtype == torch.float32


def test_naive_softmax_and_jacobian_on_tensors_follow_their_formulas():
    x = torch.tensor([[1.0, 2.0, 3.0], [800.0, 0.0, 0.0]], dtype=torch.float64)
    naive = naive_softmax(x)
    np.testing.assert_allclose(naive[0].numpy(), np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())
    assert math.isnan(naive[1, 0])  # inf / inf: the overflow the stable version avoids
    p = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    # torch's autograd of its own softmax, at the logits whose softmax is p.
    expected = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, 0), p.log())
    torch.testing.assert_close(softmax_jacobian(p), expected, rtol=1e-14, atol=1e-15)


# --- added for the mutation check (make mutate): each kills a mutant the tests above missed ---


def test_huge_scores_keep_their_exact_weights():
    # exp(1000) overflows float64; subtracting the row maximum first keeps the exact answer:
    # [1000, 1000 - ln 3] -> [3/4, 1/4], and [-1000, -1000] -> [1/2, 1/2] (not 0/0).
    x = [[1000.0, 1000.0 - math.log(3)], [-1000.0, -1000.0]]
    np.testing.assert_allclose(softmax(x), [[0.75, 0.25], [0.5, 0.5]], rtol=1e-12)


def test_the_unchecked_softmax_defaults_to_the_last_axis():
    from attention_core.softmax import stable_softmax  # the cost page calls it without an axis

    # exp(log r) = r, so each row's weights are its ratios: [1, 3] -> [1/4, 3/4], [1, 4] -> ...
    x = np.log([[[1.0, 3.0], [1.0, 1.0]], [[2.0, 2.0], [1.0, 4.0]]])  # (2, 2, 2)
    expected = [[[0.25, 0.75], [0.5, 0.5]], [[0.5, 0.5], [0.2, 0.8]]]
    np.testing.assert_allclose(stable_softmax(x), expected, rtol=1e-12)


def test_naive_softmax_along_each_axis_by_hand():
    x = np.log([[1.0, 3.0], [1.0, 1.0]])
    np.testing.assert_allclose(naive_softmax(x), [[0.25, 0.75], [0.5, 0.5]], rtol=1e-12)
    # Down the columns: column 2 is [3, 1] -> [3/4, 1/4].
    np.testing.assert_allclose(naive_softmax(x, axis=0), [[0.5, 0.75], [0.5, 0.25]], rtol=1e-12)


def test_log_sum_exp_is_softmaxs_log_denominator_even_for_huge_logits():
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])
    np.testing.assert_allclose(log_sum_exp(x), np.log(np.exp(x).sum(axis=-1)), rtol=1e-15)
    np.testing.assert_allclose(np.exp(x - log_sum_exp(x)[:, None]), softmax(x), rtol=1e-14)
    # exp(1000) overflows; two equal logits of 1000 still give 1000 + log 2, and one far below
    # the others adds nothing the float can hold.
    assert log_sum_exp(np.array([1000.0, 1000.0])) == 1000.0 + math.log(2.0)
    assert log_sum_exp(np.array([-2000.0, 5.0])) == 5.0
    assert log_sum_exp(np.zeros((2, 3, 4))).shape == (2, 3)


@pytest.mark.parametrize(
    "shape", [(7,), (3, 5), (2, 4, 3, 6), (2, 256), (2, 257), (3, 1000)], ids=str
)
def test_row_maxima_and_sums_are_numpys_over_the_last_axis(shape):
    from attention_core.softmax import row_maxima, row_sums

    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape).astype(np.float32)
    x[..., 0] = -np.inf  # a masked key
    maxima = row_maxima(x)
    assert maxima.shape == (*shape[:-1], 1) and maxima.dtype == np.float32
    np.testing.assert_array_equal(maxima, x.max(axis=-1, keepdims=True))
    finite = np.where(np.isfinite(x), x, 0.0)
    sums = row_sums(finite)
    assert sums.shape == (*shape[:-1], 1)
    np.testing.assert_allclose(sums, finite.sum(axis=-1, keepdims=True), rtol=1e-5)


def test_row_maxima_and_sums_of_torch_tensors_are_tensors():
    from attention_core.softmax import row_maxima, row_sums

    x = torch.arange(24.0).reshape(2, 3, 4)
    assert isinstance(row_maxima(x), torch.Tensor) and isinstance(row_sums(x), torch.Tensor)
    np.testing.assert_array_equal(row_maxima(x).numpy(), x.numpy().max(-1, keepdims=True))
    np.testing.assert_array_equal(row_sums(x).numpy(), x.numpy().sum(-1, keepdims=True))


def test_a_softmax_over_another_axis_than_the_last():
    x = np.random.default_rng(4).normal(size=(2, 3, 4))
    np.testing.assert_allclose(
        softmax(x, axis=-2), softmax(x.swapaxes(-1, -2)).swapaxes(-1, -2), rtol=1e-15
    )
    np.testing.assert_allclose(softmax(x, axis=2), softmax(x), rtol=0, atol=0)
