"""attention_core.token_attribution: ranks and Spearman's ρ against pandas' ranks, the norm-based
contributions against torch.nn.MultiheadAttention's own output and a loop written out here."""

import numpy as np
import pandas as pd
import pytest
import torch

from attention_core import AttentionInputError
from attention_core.token_attribution import norm_contributions, rank_correlation, ranks


def test_ranks_give_ties_their_average_like_pandas():
    values = [3.0, 1.0, 3.0, 2.0, 3.0, -1.0]
    np.testing.assert_array_equal(ranks(values), pd.Series(values).rank(method="average"))
    # By hand: -1 is first, 1 second, 2 third, the three 3s share places 4, 5, 6 -> 5.
    np.testing.assert_array_equal(ranks(values), [5, 2, 5, 3, 5, 1])


@pytest.mark.parametrize("seed", range(5))
def test_rank_correlation_is_pearson_of_pandas_ranks(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=12)
    b = a + rng.normal(size=12) * seed  # from nearly the same order to unrelated
    b[3] = b[7]  # a tie
    # Spearman's ρ by its definition: Pearson's r of pandas' average ranks.
    expected = np.corrcoef(pd.Series(a).rank(), pd.Series(b).rank())[0, 1]
    assert rank_correlation(a, b) == pytest.approx(expected, rel=1e-12)


def test_rank_correlation_ends():
    assert rank_correlation([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(rank_correlation([1, 2, 3], [5, 5, 5]))  # no order to compare
    with pytest.raises(AttentionInputError, match="different lengths"):
        rank_correlation([1, 2], [1, 2, 3])


@pytest.fixture
def layer():
    torch.manual_seed(0)
    n, d_model, heads = 5, 8, 2
    mha = torch.nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True).eval()
    x = torch.randn(1, n, d_model, dtype=torch.float32)
    with torch.no_grad():
        out, weights = mha(x, x, x, average_attn_weights=False)
    w_v = mha.in_proj_weight[2 * d_model :].detach().numpy()
    d_head = d_model // heads
    values = (x[0].numpy() @ w_v.T).reshape(n, heads, d_head).transpose(1, 0, 2)
    return {
        "weights": weights[0].numpy().astype(np.float64),  # (head, q, k)
        "values": values.astype(np.float64),  # (head, k, d_head)
        "w_o": mha.out_proj.weight.detach().numpy().astype(np.float64),
        "output": out[0].numpy().astype(np.float64),
    }


def test_the_contributions_are_the_pieces_of_torchs_output(layer):
    for query in range(5):
        norms = norm_contributions(layer["weights"], layer["values"], layer["w_o"], query)
        # Written out: token j adds Σ_h α_h,ij v_h,j W_O,hᵀ to query i's output.
        pieces = []
        for j in range(5):
            w_o = [layer["w_o"][:, 4 * h : 4 * h + 4] for h in range(2)]  # head h's columns
            added = sum(
                layer["weights"][h, query, j] * layer["values"][h, j] @ w_o[h].T for h in range(2)
            )
            pieces.append(added)
        np.testing.assert_allclose(norms, np.linalg.norm(pieces, axis=-1), rtol=1e-10)
        # The pieces add up to torch's output for that query: nothing is left out.
        np.testing.assert_allclose(np.sum(pieces, axis=0), layer["output"][query], atol=1e-5)


def test_a_large_weight_on_a_small_value_adds_little():
    # One head, two keys: key 0 gets weight 0.9 but its value is tiny; key 1 gets 0.1 of a
    # big value. Attention says key 0; the norms say key 1.
    weights = np.array([[[0.9, 0.1]]])
    values = np.array([[[0.01, 0.0], [10.0, 0.0]]])
    norms = norm_contributions(weights, values, np.eye(2), 0)
    np.testing.assert_allclose(norms, [0.009, 1.0])
    assert rank_correlation(weights[0, 0], norms) == pytest.approx(-1.0)


def test_shapes_that_do_not_fit_are_refused(layer):
    with pytest.raises(AttentionInputError, match="do not fit"):
        norm_contributions(layer["weights"], layer["values"][:, :3], layer["w_o"], 0)
    with pytest.raises(AttentionInputError, match="Query 6 does not exist"):
        norm_contributions(layer["weights"], layer["values"], layer["w_o"], 5)


def test_a_w_o_wider_than_the_model_is_read_head_by_head():
    # d_model 5, two heads of width 3: W_O is 5 × 6, not square.
    rng = np.random.default_rng(2)
    weights = rng.dirichlet(np.ones(4), size=(2, 3))  # (head, query, key)
    values = rng.normal(size=(2, 4, 3))
    w_o = rng.normal(size=(5, 6))
    expected = [
        np.linalg.norm(sum(weights[h, 1, j] * values[h, j] @ w_o[:, 3 * h : 3 * h + 3].T
                           for h in range(2)))
        for j in range(4)
    ]  # fmt: skip
    np.testing.assert_allclose(norm_contributions(weights, values, w_o, 1), expected, rtol=1e-12)


@pytest.mark.filterwarnings("error")
def test_a_measure_without_order_gives_nan_without_dividing_by_zero():
    assert np.isnan(rank_correlation([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]))


@pytest.mark.parametrize(
    ("call", "args"),
    [
        (ranks, (np.ones((2, 2)),)),
        (norm_contributions, (np.ones((1, 1, 2, 2)), np.ones((1, 2, 2)), np.ones((2, 2)), 0)),
        (norm_contributions, (np.ones((1, 2, 2)), np.ones((1, 1, 2, 2)), np.ones((2, 2)), 0)),
        (norm_contributions, (np.ones((1, 2, 2)), np.ones((1, 2, 2)), np.ones((1, 2, 2)), 0)),
    ],
)
def test_inputs_of_the_wrong_rank_are_refused(call, args):
    with pytest.raises(AttentionInputError, match=r"at most \d dimension"):
        call(*args)
