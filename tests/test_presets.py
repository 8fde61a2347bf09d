"""attention_core.lessons.presets: the presets, the page's settings, and one row's breakdown.

The 3-token preset is checked against numbers worked out by hand (the derivation is written
next to each assertion); the settings against torch's SDPA and one-line NumPy formulas.
"""

import math

import numpy as np
import pytest
import torch

from attention_core import AttentionInputError, init_additive_params, softmax
from attention_core.lessons.presets import (
    ADDITIVE_D_ATTN,
    PRESETS,
    Example,
    attention_for,
    example_for,
    fit_example,
    preset_sizes,
    random_example,
    row_breakdown,
    sentence_example,
    sentence_tokens,
    sharp_flat_pair,
    three_token_example,
)

# -- the 3-token example, by hand ---------------------------------------------------------------
# Q = [[1,0],[0,1],[1,1]], K = [[1,1],[1,0],[0,1]], V = [[10,0],[0,10],[5,5]], d_k = 2.
#
# Scores QKᵀ, row i = (q_i·k_1, q_i·k_2, q_i·k_3):
#   q1 = [1,0]: 1·1+0·1 = 1, 1·1+0·0 = 1, 1·0+0·1 = 0   -> [1, 1, 0]
#   q2 = [0,1]: 0·1+1·1 = 1, 0·1+1·0 = 0, 0·0+1·1 = 1   -> [1, 0, 1]
#   q3 = [1,1]: 1+1 = 2,     1+0 = 1,     0+1 = 1       -> [2, 1, 1]
# Scaled by 1/√2: 1 -> 1/√2 = 0.70711, 2 -> √2 = 1.41421.
# Row 1 softmax: e^(1/√2) = 2.02811 (twice) and e^0 = 1, Z = 5.05623:
#   a = e^(1/√2) / (2 e^(1/√2) + 1) = 0.40111,  b = 1 / (2 e^(1/√2) + 1) = 0.19778.
#   weights [a, a, b]; output a·[10,0] + a·[0,10] + b·[5,5] = [10a+5b, 10a+5b] = 5(2a+b) = [5, 5].
# Row 2: weights [a, b, a]; output a·[10,0] + b·[0,10] + a·[5,5] = [15a, 10b+5a]
#   = [6.01667, 3.98333].
# Row 3: e^√2 = 4.11325, Z = e^√2 + 2e^(1/√2) = 8.16948; c = e^√2/Z = 0.50349,
#   d = e^(1/√2)/Z = 0.24826; output c·[10,0] + d·[0,10] + d·[5,5] = [10c+5d, 15d]
#   = [6.27617, 3.72383].
E = math.exp(1 / math.sqrt(2))
A, B = E / (2 * E + 1), 1 / (2 * E + 1)
C, D = (
    math.exp(math.sqrt(2)) / (math.exp(math.sqrt(2)) + 2 * E),
    E / (math.exp(math.sqrt(2)) + 2 * E),
)
HAND_SCORES = [[1, 1, 0], [1, 0, 1], [2, 1, 1]]
HAND_WEIGHTS = [[A, A, B], [A, B, A], [C, D, D]]
HAND_OUTPUT = [[10 * A + 5 * B, 10 * A + 5 * B], [15 * A, 10 * B + 5 * A], [10 * C + 5 * D, 15 * D]]


def test_three_token_example_matches_the_hand_calculation():
    e = three_token_example()
    steps = attention_for(e.q, e.k, e.v)
    np.testing.assert_allclose(steps.scores, HAND_SCORES)
    np.testing.assert_allclose(steps.scaled, np.array(HAND_SCORES) / math.sqrt(2))
    np.testing.assert_allclose(steps.weights, HAND_WEIGHTS, rtol=1e-12)
    np.testing.assert_allclose(steps.output, HAND_OUTPUT, rtol=1e-12)
    # The rounded figures quoted in the derivation (and shown on the page, 4 decimals).
    np.testing.assert_array_equal(
        np.round(steps.weights, 4), [[0.4011, 0.4011, 0.1978], [0.4011, 0.1978, 0.4011],
                                     [0.5035, 0.2483, 0.2483]]
    )  # fmt: skip
    np.testing.assert_array_equal(
        np.round(steps.output, 4), [[5, 5], [6.0167, 3.9833], [6.2762, 3.7238]]
    )


def test_three_token_example_with_the_causal_mask_by_hand():
    # Row 1 sees only k1: weight 1, output v1 = [10, 0].
    # Row 2 sees k1, k2 with scaled scores 1/√2 and 0: weights e^(1/√2)/(e^(1/√2)+1) = 0.66976
    #   and 1/(e^(1/√2)+1) = 0.33024; output [10·0.66976, 10·0.33024].
    # Row 3 sees everything: unchanged.
    e = three_token_example()
    steps = attention_for(e.q, e.k, e.v, causal=True)
    p = E / (E + 1)
    np.testing.assert_allclose(steps.weights, [[1, 0, 0], [p, 1 - p, 0], [C, D, D]], rtol=1e-12)
    np.testing.assert_allclose(steps.output, [[10, 0], [10 * p, 10 * (1 - p)], HAND_OUTPUT[2]])
    assert np.isneginf(steps.masked[0, 1:]).all() and np.isneginf(steps.masked[1, 2])


# -- the settings against references --------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tau", [1.0, 0.3, 2.5])
def test_scaled_dot_and_dot_match_torch_sdpa_with_the_temperature(causal, tau):
    e = random_example(4, 5, 3, 2, seed=3)
    qt, kt, vt = (torch.tensor(m) for m in (e.q, e.k, e.v))
    mask = torch.ones(4, 5, dtype=torch.bool).tril() if causal else None
    for scoring, scale in (("scaled_dot", 1 / (tau * math.sqrt(3))), ("dot", 1 / tau)):
        steps = attention_for(e.q, e.k, e.v, scoring=scoring, temperature=tau, causal=causal)
        expected = torch.nn.functional.scaled_dot_product_attention(
            qt, kt, vt, attn_mask=mask, scale=scale
        )
        np.testing.assert_allclose(steps.output, expected.numpy(), rtol=1e-10, atol=1e-12)
        assert steps.scale == pytest.approx(scale)


def test_cosine_scoring_is_the_cosine_over_the_temperature():
    e = random_example(3, 4, 3, 2, seed=1)
    tau = 0.2
    steps = attention_for(e.q, e.k, e.v, scoring="cosine", temperature=tau)
    cos = np.array([[a @ b / np.linalg.norm(a) / np.linalg.norm(b) for b in e.k] for a in e.q])
    np.testing.assert_allclose(steps.scores, cos, rtol=1e-12)
    weights = np.exp(cos / tau) / np.exp(cos / tau).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(steps.weights, weights, rtol=1e-12)


def test_additive_scoring_ignores_the_temperature_and_uses_seeded_parameters():
    e = random_example(2, 3, 2, 2, seed=4)
    params = init_additive_params(2, ADDITIVE_D_ATTN, seed=7)
    scores = np.array(
        [[params.v @ np.tanh(params.w_q @ q + params.w_k @ k) for k in e.k] for q in e.q]
    )
    for tau in (1.0, 3.0):
        steps = attention_for(e.q, e.k, e.v, scoring="additive", temperature=tau, additive_seed=7)
        np.testing.assert_allclose(steps.scores, scores, rtol=1e-12)
        np.testing.assert_allclose(steps.weights, softmax(scores), rtol=1e-12)


def test_settings_errors_are_learner_messages():
    e = three_token_example()
    with pytest.raises(AttentionInputError, match="Unknown scoring function 'luong'"):
        attention_for(e.q, e.k, e.v, scoring="luong")
    with pytest.raises(AttentionInputError, match="temperature τ must be greater than 0"):
        attention_for(e.q, e.k, e.v, temperature=0)
    with pytest.raises(AttentionInputError, match="K has 3 columns but Q has 2"):
        attention_for(e.q, np.ones((3, 3)), e.v)


# -- presets ---------------------------------------------------------------------------------------


def test_sentence_example_is_deterministic_and_repeated_words_share_their_rows():
    e = sentence_example("the cat sat on the mat", d_k=3, d_v=5, seed=2)
    assert e.sizes == (6, 6, 3, 5)
    assert e.query_labels == e.key_labels == ("the", "cat", "sat", "on", "the", "mat")
    # "the" (positions 1 and 5) has one embedding, so one query, key and value: without
    # positional information attention cannot tell the two apart.
    for m in (e.q, e.k, e.v):
        np.testing.assert_array_equal(m[0], m[4])
        assert not np.allclose(m[0], m[1])
    again = sentence_example("the cat sat on the mat", d_k=3, d_v=5, seed=2)
    np.testing.assert_array_equal(again.q, e.q)
    other_seed = sentence_example("the cat sat on the mat", d_k=3, d_v=5, seed=3)
    assert not np.allclose(other_seed.q, e.q)
    # A word keeps its embedding (and projections) when the rest of the sentence changes.
    dog = sentence_example("the dog", d_k=3, d_v=5, seed=2)
    np.testing.assert_array_equal(dog.q[0], e.q[0])


def test_sentence_example_keeps_entries_near_unit_variance():
    # X ~ N(0,1), W ~ N(0, 1/d_model): each entry of Q is a sum of d_model products of variance
    # 1/d_model, so variance 1. Averaged over many words and seeds the sample variance is ~1.
    words = " ".join(f"w{i}" for i in range(8))
    q = np.concatenate([sentence_example(words, d_k=8, d_v=8, seed=s).q for s in range(40)])
    assert 0.8 < q.var() < 1.2


def test_sentence_errors():
    with pytest.raises(AttentionInputError, match="empty"):
        sentence_tokens("   ")
    with pytest.raises(AttentionInputError, match="at most 8"):
        sentence_tokens("one two three four five six seven eight nine")


def test_random_example_has_one_decimal_and_depends_on_the_seed():
    e = random_example(3, 4, 2, 5, seed=11)
    assert e.sizes == (3, 4, 2, 5)
    for m in (e.q, e.k, e.v):
        np.testing.assert_allclose(m * 10, np.round(m * 10), atol=1e-9)
        assert not np.signbit(m[m == 0]).any()  # no "-0.0" for a learner to puzzle over
    np.testing.assert_array_equal(random_example(3, 4, 2, 5, seed=11).v, e.v)
    assert not np.array_equal(random_example(3, 4, 2, 5, seed=12).v, e.v)
    assert e.query_labels == ("q1", "q2", "q3") and e.key_labels[-1] == "k4"


def test_sharp_flat_pair_by_hand():
    # Flat query 1 = 0.5·[1, 0.5] = [0.5, 0.25]; keys are the four unit directions, so the
    # scaled scores are [0.5, 0.25, -0.5, -0.25]/√2 = [0.35355, 0.17678, -0.35355, -0.17678];
    # e^ of them: 1.42412, 1.19338, 0.70219, 0.83797, Z = 4.15766, largest weight 0.34253.
    # Sharp query 1 = 10·[1, 0.5]: scaled scores ×20 = [7.0711, 3.5355, -7.0711, -3.5355];
    # relative to the largest: 1, e^-3.5355 = 0.029143, e^-14.142 ≈ 7.2e-7, e^-10.607 ≈ 2.5e-5,
    # so the largest weight is 1/1.029169 = 0.97166.
    flat, sharp = sharp_flat_pair()
    np.testing.assert_allclose(sharp.q, 20 * flat.q)
    np.testing.assert_array_equal(sharp.k, flat.k)
    np.testing.assert_array_equal(sharp.v, flat.v)
    s = np.array([0.5, 0.25, -0.5, -0.25]) / math.sqrt(2)
    flat_max = math.exp(s[0]) / np.exp(s).sum()
    sharp_max = 1 / np.exp(20 * (s - s[0])).sum()
    flat_w = attention_for(flat.q, flat.k, flat.v).weights
    sharp_w = attention_for(sharp.q, sharp.k, sharp.v).weights
    # Every row is the same pattern turned by 90°, so every row has the same largest weight.
    np.testing.assert_allclose(flat_w.max(axis=1), flat_max, rtol=1e-12)
    np.testing.assert_allclose(sharp_w.max(axis=1), sharp_max, rtol=1e-12)
    assert round(flat_max, 5) == 0.34253 and round(sharp_max, 5) == 0.97166


def test_fit_example_keeps_cells_and_fills_new_ones_from_the_seeded_random_example():
    e = three_token_example()
    small = fit_example(e, 2, 1, 1, 2)
    np.testing.assert_array_equal(small.q, [[1], [0]])
    np.testing.assert_array_equal(small.k, [[1]])
    np.testing.assert_array_equal(small.v, [[10, 0]])
    assert small.query_labels == ("the", "cat") and small.key_labels == ("the",)
    big = fit_example(e, 4, 3, 3, 2, seed=5)
    fill = random_example(4, 3, 3, 2, seed=5)
    np.testing.assert_array_equal(big.q[:3, :2], e.q)
    np.testing.assert_array_equal(big.q[3], fill.q[3])
    np.testing.assert_array_equal(big.q[:, 2], fill.q[:, 2])
    np.testing.assert_array_equal(big.k[:, :2], e.k)
    assert big.query_labels == ("the", "cat", "sat", "q4")


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_comes_at_its_natural_sizes_and_at_other_sizes(preset):
    sizes = preset_sizes(preset)
    e = example_for(preset, n_q=sizes[0], n_k=sizes[1], d_k=sizes[2], d_v=sizes[3])
    assert e.sizes == sizes
    other = example_for(preset, n_q=2, n_k=5, d_k=3, d_v=1, seed=1)
    assert other.sizes == (2, 5, 3, 1)
    assert np.isfinite(attention_for(other.q, other.k, other.v).output).all()


def test_preset_choices():
    assert preset_sizes("sentence", "a b c") == (3, 3, 4, 4)
    np.testing.assert_array_equal(
        example_for("three_token", n_q=3, n_k=3, d_k=2, d_v=2).v, three_token_example().v
    )
    flat = example_for("sharp_flat", n_q=4, n_k=4, d_k=2, d_v=2, sharp=False)
    np.testing.assert_array_equal(flat.q, sharp_flat_pair()[0].q)
    with pytest.raises(AttentionInputError, match="Unknown preset"):
        example_for("nope", n_q=1, n_k=1, d_k=1, d_v=1)
    # Rows up to 16 tokens and widths up to 32 (a real BERT head), one past is refused.
    assert example_for("random", n_q=16, n_k=16, d_k=32, d_v=32).q.shape == (16, 32)
    with pytest.raises(AttentionInputError, match=r"n_q is 17; .* at most 16"):
        example_for("random", n_q=17, n_k=1, d_k=1, d_v=1)
    with pytest.raises(AttentionInputError, match=r"d_v is 65; .* at most 64"):
        example_for("random", n_q=1, n_k=1, d_k=1, d_v=65)


def test_example_checks_its_shapes():
    with pytest.raises(AttentionInputError, match="K has 3 columns but Q has 2"):
        Example(q=np.ones((2, 2)), k=np.ones((2, 3)), v=np.ones((2, 1)), query_labels="ab",
                key_labels="ab")  # fmt: skip
    with pytest.raises(AttentionInputError, match="K has 2 rows but V has 3"):
        Example(q=np.ones((2, 2)), k=np.ones((2, 2)), v=np.ones((3, 1)), query_labels="ab",
                key_labels="ab")  # fmt: skip
    with pytest.raises(AttentionInputError, match="one token per row"):
        Example(q=np.ones((2, 2)), k=np.ones((2, 2)), v=np.ones((2, 1)), query_labels="a",
                key_labels="ab")  # fmt: skip
    with pytest.raises(AttentionInputError, match="finite"):
        Example(q=[[np.nan]], k=[[1.0]], v=[[1.0]], query_labels="a", key_labels="b")


# -- one row's breakdown ------------------------------------------------------------------------


def test_row_breakdown_of_row_three_by_hand():
    e = three_token_example()
    steps = attention_for(e.q, e.k, e.v)
    b = row_breakdown(steps, 2, q=e.q, k=e.k, v=e.v)
    # q3 = [1, 1]: products with k1 = [1,1], k2 = [1,0], k3 = [0,1].
    np.testing.assert_array_equal(b.products, [[1, 1], [1, 0], [0, 1]])
    np.testing.assert_array_equal(b.dots, [2, 1, 1])
    assert b.shift == 0
    np.testing.assert_allclose(b.exps, [math.exp(math.sqrt(2)), E, E], rtol=1e-12)
    assert b.total == pytest.approx(math.exp(math.sqrt(2)) + 2 * E, rel=1e-12)
    np.testing.assert_allclose(b.weights, [C, D, D], rtol=1e-12)
    np.testing.assert_allclose(b.weighted, [[10 * C, 0], [0, 10 * D], [5 * D, 5 * D]], rtol=1e-12)
    np.testing.assert_allclose(b.output, HAND_OUTPUT[2], rtol=1e-12)
    assert b.q_norm == pytest.approx(math.sqrt(2))
    np.testing.assert_allclose(b.k_norms, [math.sqrt(2), 1, 1])


def test_row_breakdown_with_a_mask_and_with_large_scores():
    e = three_token_example()
    b = row_breakdown(attention_for(e.q, e.k, e.v, causal=True), 1, q=e.q, k=e.k, v=e.v)
    np.testing.assert_array_equal(b.allowed, [True, True, False])
    np.testing.assert_allclose(b.exps, [E, 1, 0])
    assert b.total == pytest.approx(E + 1)

    _, sharp = sharp_flat_pair()
    big = sharp.q * 5  # scaled scores up to 100/√2 · ... > 20: e^x is no longer printable
    steps = attention_for(big, sharp.k, sharp.v)
    b = row_breakdown(steps, 0, q=big, k=sharp.k, v=sharp.v)
    assert b.shift == pytest.approx(steps.scaled[0].max())
    np.testing.assert_allclose(b.exps, np.exp(steps.scaled[0] - steps.scaled[0].max()))
    np.testing.assert_allclose(b.exps / b.total, steps.weights[0], rtol=1e-12)


def test_row_breakdown_refuses_mismatched_inputs():
    e = three_token_example()
    steps = attention_for(e.q, e.k, e.v)
    with pytest.raises(AttentionInputError, match="row 3 does not exist"):
        row_breakdown(steps, 3, q=e.q, k=e.k, v=e.v)
    with pytest.raises(AttentionInputError, match="pass the Q, K, V the steps were computed"):
        row_breakdown(steps, 0, q=e.q[:2], k=e.k, v=e.v)
