"""attention_core.logit_lens: by hand, against the formulas written out here, and by linearity.

The real decoder's lens and attribution against transformers are in test_readouts.py (and, for
every family's own final norm, test_forward.py).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import AttentionInputError
from attention_core.logit_lens import (
    FinalNorm,
    LogitLens,
    direct_logit_attribution,
    head_writes,
    logit_lens,
    norm_scale,
)


def rms_norm(x, gain, eps):
    return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps) * gain


def test_a_stream_worked_by_hand():
    # e = [1, 0], one head writes [0, 1], one MLP writes [1, 1]: r_L = [2, 2].
    # mean(r²) = 4, so with ε = 0 the norm divides by 2; γ = [1, 1]; E_t = [1, 0].
    # Each part's logit is (γ ⊙ E_t)·c / 2: e -> 0.5, the head -> 0, the MLP -> 0.5.
    split = direct_logit_attribution(
        [1.0, 0.0], [[[0.0, 1.0]]], [[1.0, 1.0]], [1.0, 1.0], [1.0, 0.0], eps=0.0
    )
    assert split.scale == 0.5
    assert split.embedding == 0.5
    np.testing.assert_array_equal(split.heads, [[0.0]])
    np.testing.assert_array_equal(split.mlps, [0.5])
    assert split.logit == 1.0 == split.total
    # The lens reads r_0 = [1, 0] as [1, 0] / √(1/2) = [√2, 0]: logit_t = √2 at stage 0.
    lens = logit_lens([[1.0, 0.0], [2.0, 2.0]], [1.0, 1.0], lambda x: x @ np.eye(2), eps=0.0)
    np.testing.assert_allclose(lens.logits, [[np.sqrt(2), 0.0], [1.0, 1.0]], rtol=1e-6)


def test_norm_scale_is_one_over_the_root_mean_square():
    r = np.array([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(norm_scale(r, 1e-5), 1 / np.sqrt([12.5 + 1e-5, 1e-5]), rtol=1e-12)


@pytest.fixture
def stream():
    rng = np.random.default_rng(0)
    layers, heads, d, vocab = 3, 4, 8, 11
    return {
        "embedding": rng.normal(size=d),
        "heads": rng.normal(size=(layers, heads, d)),
        "mlps": rng.normal(size=(layers, d)),
        "gain": rng.uniform(0.5, 2.0, size=d),
        "unembed": rng.normal(size=(vocab, d)),
    }


def test_the_parts_sum_to_the_logit_the_model_reads(stream):
    final = stream["embedding"] + stream["heads"].sum((0, 1)) + stream["mlps"].sum(0)
    logits = rms_norm(final, stream["gain"], 1e-5) @ stream["unembed"].T
    for token in range(stream["unembed"].shape[0]):
        split = direct_logit_attribution(
            stream["embedding"], stream["heads"], stream["mlps"], stream["gain"],
            stream["unembed"][token], 1e-5,
        )  # fmt: skip
        assert split.logit == pytest.approx(logits[token], rel=1e-12)
        assert split.total == pytest.approx(logits[token], rel=1e-10, abs=1e-12)
        # Each head's share, written out: (γ ⊙ E_t)·a / ρ(r_L).
        rho = np.sqrt(np.mean(final**2) + 1e-5)
        expected = stream["heads"] @ (stream["gain"] * stream["unembed"][token]) / rho
        np.testing.assert_allclose(split.heads, expected, rtol=1e-12)


def test_a_logit_difference_is_the_difference_of_the_two_splits(stream):
    parts = (stream["embedding"], stream["heads"], stream["mlps"], stream["gain"])
    t, u = stream["unembed"][2], stream["unembed"][5]
    both = direct_logit_attribution(*parts, t - u, 1e-5)
    first, second = (
        direct_logit_attribution(*parts, t, 1e-5),
        direct_logit_attribution(*parts, u, 1e-5),
    )
    np.testing.assert_allclose(both.heads, first.heads - second.heads, atol=1e-12)
    np.testing.assert_allclose(both.mlps, first.mlps - second.mlps, atol=1e-12)
    assert both.logit == pytest.approx(first.logit - second.logit, abs=1e-12)


def test_the_lens_reads_each_stage_through_its_own_norm(stream):
    residuals = np.cumsum(
        np.vstack([stream["embedding"], stream["heads"].sum(1) + stream["mlps"]]), axis=0
    )
    lens = logit_lens(residuals, stream["gain"], lambda x: x @ stream["unembed"].T, 1e-5)
    expected = rms_norm(residuals, stream["gain"], 1e-5) @ stream["unembed"].T
    np.testing.assert_allclose(lens.logits, expected, rtol=1e-5, atol=1e-6)
    # Probabilities and ranks, by brute force.
    p = np.exp(expected - expected.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    for token in (0, 4, 10):
        np.testing.assert_allclose(lens.probability(token), p[:, token], rtol=1e-5)
        ranks = [1 + int((row > row[token]).sum()) for row in lens.logits]
        np.testing.assert_array_equal(lens.rank(token), ranks)
    np.testing.assert_array_equal(lens.top(3), np.argsort(-lens.logits, axis=-1)[:, :3])
    # Each stage's own three likeliest tokens, read from the normaliser kept with the lens.
    top = lens.top(3)
    np.testing.assert_allclose(
        lens.probabilities(top), np.take_along_axis(p, top, axis=-1), rtol=1e-5
    )
    np.testing.assert_allclose(lens.log_normalizer, np.log(np.exp(expected).sum(-1)), rtol=1e-6)
    with pytest.raises(AttentionInputError, match="past the vocabulary"):
        lens.probability(11)


def test_head_writes_add_up_to_the_output_projection():
    rng = np.random.default_rng(1)
    heads, n, d_head, d_model = 3, 5, 4, 7
    z = rng.normal(size=(heads, n, d_head))
    w_o = rng.normal(size=(d_model, heads * d_head))
    writes = head_writes(z, w_o)
    concat = z.transpose(1, 0, 2).reshape(n, heads * d_head)  # heads side by side
    np.testing.assert_allclose(writes.sum(0), concat @ w_o.T, rtol=1e-12, atol=1e-12)
    # Head 1 alone: its columns of W_O times its output.
    np.testing.assert_allclose(writes[1], z[1] @ w_o[:, d_head : 2 * d_head].T, rtol=1e-12)
    with pytest.raises(AttentionInputError, match="W_O has 10 input columns"):
        head_writes(z, w_o[:, :10])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 100.0))
def test_scaling_every_part_leaves_the_split_unchanged(seed, scale):
    # RMSNorm divides out any common scale of the stream (ε = 0): so does the frozen split.
    rng = np.random.default_rng(seed)
    e, a, m = rng.normal(size=5), rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 5))
    g, u = rng.uniform(0.5, 2, size=5), rng.normal(size=5)
    base = direct_logit_attribution(e, a, m, g, u, 0.0)
    scaled = direct_logit_attribution(scale * e, scale * a, scale * m, g, u, 0.0)
    np.testing.assert_allclose(scaled.heads, base.heads, rtol=1e-9, atol=1e-12)
    assert scaled.logit == pytest.approx(base.logit, rel=1e-9, abs=1e-12)


def test_parts_that_do_not_fit_are_refused():
    with pytest.raises(AttentionInputError, match="do not fit together"):
        direct_logit_attribution(np.ones(3), np.ones((1, 1, 4)), np.ones((1, 3)), np.ones(3),
                                 np.ones(3), 1e-5)  # fmt: skip
    with pytest.raises(AttentionInputError, match="gain has 3 entries"):
        logit_lens(np.ones((2, 4)), np.ones(3), lambda x: x, 1e-5)


def test_the_lens_of_a_large_vocabulary_ranks_and_tops_like_a_full_sort():
    rng = np.random.default_rng(7)
    d, vocab = 6, 200
    unembed = rng.normal(size=(vocab, d)) * 300  # logits in the thousands: softmax must shift
    lens = logit_lens(rng.normal(size=(64, d)), np.ones(d), lambda x: x @ unembed.T, 1e-5)
    for count in (1, 2, 5, 17):
        np.testing.assert_array_equal(lens.top(count), np.argsort(-lens.logits, axis=-1)[:, :count])
    log_p = lens.log_probs()
    assert np.isfinite(log_p).all()
    np.testing.assert_allclose(np.exp(log_p).sum(-1), 1.0, rtol=1e-12)
    z = lens.logits.astype(np.float64)
    expected = z - z.max(-1, keepdims=True)
    expected -= np.log(np.exp(expected).sum(-1, keepdims=True))
    np.testing.assert_allclose(log_p, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("call", "args"),
    [
        (logit_lens, (np.ones((2, 2, 3)), np.ones(3), lambda x: x, 1e-5)),
        (logit_lens, (np.ones((2, 3)), np.ones((1, 3)), lambda x: x, 1e-5)),
        (head_writes, (np.ones((2, 3, 4, 1)), np.ones((5, 8)))),
        (head_writes, (np.ones((2, 3, 4)), np.ones((1, 5, 8)))),
        (direct_logit_attribution, (np.ones((1, 3)), np.ones((1, 1, 3)), np.ones((1, 3)),
                                    np.ones(3), np.ones(3), 1e-5)),
        (direct_logit_attribution, (np.ones(3), np.ones((1, 1, 1, 3)), np.ones((1, 3)),
                                    np.ones(3), np.ones(3), 1e-5)),
        (direct_logit_attribution, (np.ones(3), np.ones((1, 1, 3)), np.ones((1, 1, 3)),
                                    np.ones(3), np.ones(3), 1e-5)),
        (direct_logit_attribution, (np.ones(3), np.ones((1, 1, 3)), np.ones((1, 3)),
                                    np.ones((1, 3)), np.ones(3), 1e-5)),
        (direct_logit_attribution, (np.ones(3), np.ones((1, 1, 3)), np.ones((1, 3)),
                                    np.ones(3), np.ones((1, 3)), 1e-5)),
    ],
)  # fmt: skip
def test_inputs_of_the_wrong_rank_are_refused(call, args):
    with pytest.raises(AttentionInputError, match=r"at most \d dimension"):
        call(*args)


def layer_norm(x, gain, bias, eps):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt(np.mean(centred**2, axis=-1, keepdims=True) + eps) * gain + bias


def test_a_layernorm_stream_worked_by_hand():
    # e = [1, 0], one head writes [0, 1], one MLP [1, 1], a bias [0, 2]: r_L = [2, 4].
    # mean 3, centred [-1, 1], var 1: with ε = 0 the norm gives [-1, 1] · γ + β, γ = [1, 1],
    # β = [0.5, 0]; E_t = [1, 0]: logit = -1 + 0.5 = -0.5. The readout is (γ ⊙ E_t) minus its
    # mean, [0.5, -0.5]: e -> 0.5, the head -> -0.5, the MLP -> 0, the bias -> -1, β · E_t 0.5.
    norm = FinalNorm("LayerNorm", np.ones(2), 0.0, np.array([0.5, 0.0]))
    split = direct_logit_attribution([1.0, 0.0], [[[0.0, 1.0]]], [[1.0, 1.0]], norm, [1.0, 0.0],
                                     biases=[[0.0, 2.0]])  # fmt: skip
    assert split.scale == pytest.approx(1.0)
    assert (split.embedding, float(split.heads[0, 0]), float(split.mlps[0])) == pytest.approx(
        (0.5, -0.5, 0.0)
    )
    assert split.fixed == pytest.approx(-1.0 + 0.5)
    assert split.logit == pytest.approx(-0.5) and split.total == pytest.approx(-0.5)
    # The biases are one write per layer, (layer, d_model): a third axis is refused.
    with pytest.raises(AttentionInputError, match="biases"):
        direct_logit_attribution([1.0, 0.0], [[[0.0, 1.0]]], [[1.0, 1.0]], norm, [1.0, 0.0],
                                 biases=[[[0.0, 2.0]]])  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["RMSNorm", "LayerNorm"]))
def test_each_norm_matches_its_formula_and_the_split_adds_up(seed, kind):
    rng = np.random.default_rng(seed)
    d, layers, heads = 6, 2, 3
    gain, bias = rng.normal(size=d), rng.normal(size=d)
    norm = FinalNorm(kind, gain, 1e-5, bias if kind == "LayerNorm" else None)
    x = rng.normal(size=(4, d)) * 3
    expected = layer_norm(x, gain, bias, 1e-5) if kind == "LayerNorm" else rms_norm(x, gain, 1e-5)
    np.testing.assert_allclose(norm(x), expected, rtol=1e-10, atol=1e-12)
    e, a, m, b = (rng.normal(size=shape) for shape in
                  ((d,), (layers, heads, d), (layers, d), (layers, d)))  # fmt: skip
    u = rng.normal(size=d)
    split = direct_logit_attribution(e, a, m, norm, u, biases=b)
    final = e + a.sum(axis=(0, 1)) + m.sum(axis=0) + b.sum(axis=0)
    assert split.logit == pytest.approx(float(norm(final[None])[0] @ u), rel=1e-9, abs=1e-9)
    assert split.total == pytest.approx(split.logit, rel=1e-9, abs=1e-9)
    lens = logit_lens(final[None], norm, lambda z: z @ np.eye(d))
    np.testing.assert_allclose(lens.logits[0], norm(final[None])[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("count", [1, 3, 8, 40])
def test_top_breaks_ties_by_the_lower_token_id_like_a_stable_full_sort(count):
    rng = np.random.default_rng(count)
    # Few distinct values: ties everywhere, across the count-th place too.
    logits = rng.integers(-3, 4, size=(9, 30)).astype(np.float32)
    lens = LogitLens(np.zeros((9, 2)), logits, np.zeros(9))
    expected = np.argsort(-logits, axis=-1, kind="stable")[:, :count]
    np.testing.assert_array_equal(lens.top(count), expected)
    assert lens.top(count).shape == (9, min(count, 30))
