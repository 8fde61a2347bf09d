"""attention_core.lessons.position_experiments against formulas written here and worked examples.

The sinusoidal table is always rebuilt in this file from its definition,
PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d)), never taken from the code
under test.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import AttentionInputError, alibi_slopes
from attention_core.lessons.position_experiments import (
    LEARNED_STD,
    causal_alibi,
    offset_profile,
    order_blindness,
    permutation,
    position_breakdown,
    rotation_example,
    same_content_scores,
    sentence_input,
    shift_check,
    similarity_matrix,
    toeplitz_deviation,
    unseen_angle_share,
)
from attention_core.reference import token_embeddings


def reference_pe(n, d, base=10000.0):
    """The table of "Attention Is All You Need", one entry at a time."""
    pe = np.zeros((n, d))
    for p in range(n):
        for j in range(d):
            i = j // 2
            angle = p / base ** (2 * i / d)
            pe[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def reference_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# -- reorderings and sentences ---------------------------------------------------------------


def test_named_permutations_on_three_tokens():
    # "I love AI": reverse -> "AI love I", rotate -> "love AI I", swap first two -> "love I AI".
    assert permutation("reverse", 3).tolist() == [2, 1, 0]
    assert permutation("rotate", 3).tolist() == [1, 2, 0]
    assert permutation("swap first two", 3).tolist() == [1, 0, 2]
    assert permutation("swap first two", 1).tolist() == [0]
    with pytest.raises(AttentionInputError, match="reverse"):
        permutation("shuffle", 3)


def test_sentence_input_adds_the_sinusoidal_rows_to_the_embeddings():
    tokens = ["I", "love", "AI"]
    s = sentence_input(tokens, 4, encoding="sinusoidal", seed=0)
    expected_pe = reference_pe(3, 4)
    # Hand check of one entry: position 1, dimension 2 is sin(1 / 10000^(2/4)) = sin(0.01).
    assert expected_pe[1, 2] == pytest.approx(0.009999833334166665, abs=1e-15)
    np.testing.assert_allclose(s.positions, expected_pe, atol=1e-15)
    np.testing.assert_allclose(s.inputs, token_embeddings(tokens, 4, 0) + expected_pe, atol=1e-15)
    assert s.tokens == ("I", "love", "AI")
    with pytest.raises(AttentionInputError, match="empty"):
        sentence_input([], 4)


def test_sentence_input_without_positions_is_the_embeddings_and_learned_is_random():
    none = sentence_input(["a", "b"], 4, encoding="none")
    np.testing.assert_array_equal(none.positions, 0.0)
    np.testing.assert_array_equal(none.inputs, none.token_embeddings)
    learned = sentence_input(["a", "b"], 400, encoding="learned")
    assert learned.positions.std() == pytest.approx(LEARNED_STD, rel=0.05)
    with pytest.raises(AttentionInputError, match="sinusoidal"):
        sentence_input(["a"], 4, encoding="rotary")


# -- order blindness ----------------------------------------------------------------------------


def reference_self_attention(x, seed):
    """One head of self-attention written out; the parameters come from the core's initialiser."""
    from attention_core import init_multi_head_params

    p = init_multi_head_params(x.shape[1], 1, seed)
    q, k, v = (x @ w.T + b for w, b in ((p.w_q, p.b_q), (p.w_k, p.b_k), (p.w_v, p.b_v)))
    weights = reference_softmax(q @ k.T / math.sqrt(x.shape[1]))
    return weights @ v @ p.w_o.T + p.b_o, weights


def test_without_positions_the_outputs_are_the_same_permuted():
    result = order_blindness(["I", "love", "AI"], [2, 1, 0], 4, encoding="none", seed=1)
    x = token_embeddings(["I", "love", "AI"], 4, 1)
    expected, expected_weights = reference_self_attention(x, 1)
    np.testing.assert_allclose(result.output, expected, atol=1e-12)
    np.testing.assert_allclose(result.weights, expected_weights, atol=1e-12)
    permuted_expected, _ = reference_self_attention(x[[2, 1, 0]], 1)
    np.testing.assert_allclose(result.permuted_output, permuted_expected, atol=1e-12)
    # "AI love I": row 0 is AI's output, which belongs in row 2 of "I love AI".
    np.testing.assert_allclose(result.unpermuted_output[2], result.permuted_output[0], atol=0)
    assert result.max_abs_difference < 1e-12
    assert result.permuted.tokens == ("AI", "love", "I")


@pytest.mark.parametrize("encoding", ["sinusoidal", "learned"])
def test_with_positions_the_outputs_change(encoding):
    result = order_blindness(["I", "love", "AI"], [2, 1, 0], 4, encoding=encoding, seed=1)
    x = token_embeddings(["I", "love", "AI"], 4, 1)
    table = reference_pe(3, 4) if encoding == "sinusoidal" else result.original.positions
    expected, _ = reference_self_attention(x + table, 1)
    np.testing.assert_allclose(result.output, expected, atol=1e-12)
    assert result.max_abs_difference > 1e-3
    np.testing.assert_allclose(result.difference, result.unpermuted_output - result.output, atol=0)


@settings(max_examples=25, deadline=None)
@given(
    words=st.lists(st.sampled_from(["a", "b", "cat", "sat", "I", "AI"]), min_size=1, max_size=7),
    data=st.data(),
    seed=st.integers(0, 50),
)
def test_self_attention_is_permutation_equivariant_without_positions(words, data, seed):
    order = np.array(data.draw(st.permutations(range(len(words)))), dtype=int)
    result = order_blindness(words, order, 6, encoding="none", seed=seed)
    assert result.max_abs_difference < 1e-12


def test_order_must_be_a_permutation():
    with pytest.raises(AttentionInputError, match="exactly once"):
        order_blindness(["a", "b", "c"], [0, 0, 1], 4)
    with pytest.raises(AttentionInputError, match="exactly once"):
        order_blindness(["a", "b"], [0, 1, 2], 4)


# -- the sinusoidal table taken apart ---------------------------------------------------------


def test_breakdown_of_position_1_with_d_model_4_by_hand():
    # ω_0 = 1, ω_1 = 10000^(-2/4) = 0.01: PE(1) = (sin 1, cos 1, sin 0.01, cos 0.01).
    b = position_breakdown(1, 4)
    np.testing.assert_allclose(
        b.value, [0.8414709848078965, 0.5403023058681398, 0.009999833334166665, 0.9999500004166653]
    )
    assert b.function == ("sin", "cos", "sin", "cos")
    assert b.pair.tolist() == [0, 0, 1, 1]
    np.testing.assert_allclose(b.frequency, [1, 1, 0.01, 0.01])
    np.testing.assert_allclose(b.wavelength, [2 * math.pi] * 2 + [200 * math.pi] * 2)
    np.testing.assert_allclose(b.angle, [1, 1, 0.01, 0.01])


def test_breakdown_matches_the_written_out_table_for_a_larger_case():
    b = position_breakdown(37, 10, base=100.0)
    np.testing.assert_allclose(b.value, reference_pe(38, 10, base=100.0)[37], atol=1e-14)
    np.testing.assert_allclose(np.sin(b.angle[0::2]), b.value[0::2], atol=1e-14)


def test_similarity_depends_on_the_distance_only():
    # PE[m]·PE[n] = Σ_i sin(ω m) sin(ω n) + cos(ω m) cos(ω n) = Σ_i cos(ω_i (m - n)).
    n, d = 40, 16
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    gram = similarity_matrix(reference_pe(n, d))
    m_minus_n = np.arange(n)[:, None] - np.arange(n)[None, :]
    expected = np.cos(m_minus_n[..., None] * omega).sum(axis=-1)
    np.testing.assert_allclose(gram, expected, atol=1e-12)

    profile = offset_profile(gram, nonnegative=True)
    assert profile.offsets.tolist() == list(range(n))
    np.testing.assert_allclose(
        profile.mean, np.cos(np.arange(n)[:, None] * omega).sum(1), atol=1e-12
    )
    assert profile.spread < 1e-12
    assert profile.mean[0] == pytest.approx(d / 2)


def test_offset_profile_of_a_small_matrix_by_hand():
    # Diagonals of [[1, 2], [3, 4]]: k=-1 -> {3}, k=0 -> {1, 4}, k=1 -> {2}.
    p = offset_profile([[1.0, 2.0], [3.0, 4.0]])
    assert p.offsets.tolist() == [-1, 0, 1]
    assert p.mean.tolist() == [3.0, 2.5, 2.0]
    assert p.low.tolist() == [3.0, 1.0, 2.0]
    assert p.high.tolist() == [3.0, 4.0, 2.0]
    assert p.spread == 3.0  # the main diagonal holds 1 and 4


def test_toeplitz_deviation_by_hand():
    assert toeplitz_deviation([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]]) == 0.0
    assert toeplitz_deviation([[1.0, 2.0], [3.0, 1.5]]) == 0.5
    masked = [[0.0, -np.inf], [-1.0, 0.0]]
    assert toeplitz_deviation(masked) == 0.0
    assert toeplitz_deviation([[0.0, -np.inf], [-1.0, -np.inf]]) == math.inf


# -- PE(p + k) from PE(p) -----------------------------------------------------------------------


def test_shift_rebuilds_every_row_up_to_rounding():
    check = shift_check(512, 64, 7)
    assert check.error_by_position.shape == (505,)
    assert check.max_abs_error < 1e-12
    assert check.exact_dims == 64
    # A wrong offset would not come close: rows 7 apart differ by O(1).
    assert np.abs(reference_pe(20, 64)[7:] - reference_pe(20, 64)[:-7]).max() > 0.5


def test_shift_leaves_the_lone_sine_of_an_odd_width_out():
    check = shift_check(100, 7, 3)
    assert check.exact_dims == 6
    assert check.max_abs_error < 1e-12
    with pytest.raises(AttentionInputError, match="smaller than the number of positions"):
        shift_check(10, 8, 10)


def test_rotation_of_one_pair_written_out():
    p, k, i, d = 5, 3, 2, 16
    omega = 10000.0 ** (-2 * i / d)
    r = rotation_example(p, k, i, d)
    c, s = math.cos(omega * k), math.sin(omega * k)
    np.testing.assert_allclose(r.rotation, [[c, s], [-s, c]], atol=1e-15)
    np.testing.assert_allclose(r.before, [math.sin(omega * p), math.cos(omega * p)], atol=1e-15)
    np.testing.assert_allclose(
        r.actual, [math.sin(omega * (p + k)), math.cos(omega * (p + k))], atol=1e-15
    )
    np.testing.assert_allclose(r.rotated, r.actual, atol=1e-15)
    assert r.angle == pytest.approx(omega * k)
    with pytest.raises(AttentionInputError, match="Pair 8 does not exist"):
        rotation_example(0, 1, 8, 16)


# -- the families side by side ------------------------------------------------------------------


def test_causal_alibi_for_8_heads_by_hand():
    bias = causal_alibi(8, 4)
    assert bias.shape == (8, 4, 4)
    for h in range(8):
        slope = 1 / 2 ** (h + 1)  # 1/2, 1/4, ..., 1/256
        for i in range(4):
            for j in range(4):
                expected = -slope * (i - j) if j <= i else -np.inf
                assert bias[h, i, j] == expected
    np.testing.assert_allclose(alibi_slopes(8), [1 / 2**n for n in range(1, 9)])


def test_rope_scores_for_identical_content_are_a_function_of_the_offset():
    n, d, seed = 24, 8, 5
    c = np.random.default_rng(seed).normal(0.0, 1.0, size=d)
    scores = same_content_scores("rotary", n, d, seed=seed)
    # rotate_half pairs i and i + d/2: rot(c, m)·rot(c, n) = Σ_i (c_i² + c_{i+d/2}²) cos((m-n) θ_i).
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    radius = c[: d // 2] ** 2 + c[d // 2 :] ** 2
    offsets = np.arange(n)[:, None] - np.arange(n)[None, :]
    expected = (radius * np.cos(offsets[..., None] * theta)).sum(-1) / math.sqrt(d)
    np.testing.assert_allclose(scores, expected, atol=1e-12)
    assert toeplitz_deviation(scores) < 1e-12


def test_added_encodings_are_not_toeplitz_but_alibi_is():
    n, d, seed = 16, 8, 2
    c = np.random.default_rng(seed).normal(0.0, 1.0, size=d)
    x = c + reference_pe(n, d)
    sinusoidal = same_content_scores("sinusoidal", n, d, seed=seed)
    np.testing.assert_allclose(sinusoidal, x @ x.T / math.sqrt(d), atol=1e-12)
    assert toeplitz_deviation(sinusoidal) > 0.1
    assert toeplitz_deviation(same_content_scores("learned", n, d, seed=seed)) > 0.1

    alibi = same_content_scores("alibi", n, d, seed=seed, num_heads=8, head=1)
    assert toeplitz_deviation(alibi) < 1e-12
    # Head 1 of 8 has slope 1/4: query 5 sees key 2 at distance 3 with bias -3/4.
    assert alibi[5, 2] == pytest.approx(c @ c / math.sqrt(d) - 0.75)
    assert np.isneginf(alibi[2, 5])
    with pytest.raises(AttentionInputError, match="head must be below"):
        same_content_scores("alibi", n, d, num_heads=4, head=4)
    with pytest.raises(AttentionInputError, match="rotary, alibi, nope"):
        same_content_scores("yarn", n, d)


def test_unseen_angles_by_hand():
    # d=2: one pair, ω = 1 rad per position. Training length 3 sweeps [0, 2] rad.
    share = unseen_angle_share(3, 8, 2)
    # p = 3..6: angles 3, 4, 5, 6 rad lie beyond 2 (and below 2π); p = 7: 7 - 2π = 0.72 was seen.
    assert share.tolist() == [0, 0, 0, 1, 1, 1, 1, 0]
    # Training on 7 positions sweeps 6 rad < 2π: still one unseen sliver, 6 < angle < 2π.
    assert unseen_angle_share(7, 8, 2).tolist() == [0] * 8
    assert unseen_angle_share(8, 9, 2).tolist() == [0] * 9  # 7 rad ≥ 2π: the full circle


def test_unseen_angle_share_matches_a_brute_force_count():
    length, n, d, base = 20, 200, 12, 100.0
    share = unseen_angle_share(length, n, d, base)
    omegas = [base ** (-2 * i / d) for i in range(d // 2)]
    for p in range(n):
        unseen = 0
        for w in omegas:
            arc = (length - 1) * w
            if arc < 2 * math.pi and math.fmod(p * w, 2 * math.pi) > arc + 1e-12:
                unseen += 1
        assert share[p] == pytest.approx(unseen / len(omegas)), p
    assert share[:length].max() == 0


def test_nope_scores_are_one_number_on_the_causal_triangle_and_nothing_past_it():
    """With the same content everywhere and no positions, every key a query may see scores
    c·c/√d: the matrix is constant below the diagonal, -inf above (the causal mask)."""
    n, d, seed = 6, 8, 3
    scores = same_content_scores("nope", n, d, seed=seed)
    c = np.random.default_rng(seed).normal(0.0, 1.0, size=d)
    visible = np.tril(np.ones((n, n), dtype=bool))
    np.testing.assert_allclose(scores[visible], c @ c / math.sqrt(d))
    assert np.all(np.isneginf(scores[~visible]))
    assert toeplitz_deviation(scores) == 0.0
