"""Attention and its scoring functions: hand-worked examples, torch SDPA, formulas, properties."""

import math
import pickle
from dataclasses import FrozenInstanceError, fields

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention_core import (
    SCORING_FUNCTIONS,
    AdditiveParams,
    AttentionInputError,
    AttentionSteps,
    additive_attention,
    attend,
    causal_mask,
    cosine_attention,
    dot_product_attention,
    init_additive_params,
    max_elements,
    scaled_dot_product_attention,
)

PROPERTY = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# The 3-token preset of the step-by-step page.
Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 1], [1, 0], [0, 1]]
V = [[10, 0], [0, 10], [5, 5]]


def torch_sdpa(q, k, v, **kwargs):
    tensors = (torch.from_numpy(np.asarray(a)) for a in (q, k, v))
    return F.scaled_dot_product_attention(*tensors, **kwargs).numpy()


# --- hand-worked examples -----------------------------------------------------------------------


def test_hand_worked_preset_scaled_dot_product():
    steps = scaled_dot_product_attention(Q, K, V)
    # scores = Q Kᵀ: row 0 is q0=(1,0) against k=(1,1),(1,0),(0,1) -> 1, 1, 0;
    # row 1, q1=(0,1) -> 1, 0, 1; row 2, q2=(1,1) -> 2, 1, 1.
    np.testing.assert_array_equal(steps.scores, [[1, 1, 0], [1, 0, 1], [2, 1, 1]])
    # d_k = 2, so scale = 1/√2 = a.
    a = 1 / math.sqrt(2)
    assert steps.scale == pytest.approx(a, rel=1e-15)
    np.testing.assert_allclose(steps.scaled, np.array(steps.scores) * a, rtol=1e-15)
    # Row 0: scaled (a, a, 0); dividing numerator and denominator by e^0: weights
    # (e^a, e^a, 1) / (2e^a + 1). e^a ≈ 2.0281, so ≈ (0.4011, 0.4011, 0.1978).
    ea = math.exp(a)
    p, r = ea / (2 * ea + 1), 1 / (2 * ea + 1)
    # Row 2: scaled (2a, a, a); dividing by e^a: (e^a, 1, 1) / (e^a + 2) ≈ (0.5035, 0.2483, 0.2483).
    s, t = ea / (ea + 2), 1 / (ea + 2)
    np.testing.assert_allclose(steps.weights, [[p, p, r], [p, r, p], [s, t, t]], rtol=1e-14)
    np.testing.assert_allclose(steps.weights[0], [0.40111, 0.40111, 0.19778], atol=1e-5)
    # Outputs: row 0 = p(10,0) + p(0,10) + r(5,5) = (10p + 5r, 10p + 5r); since 2p + r = 1,
    # 10p + 5r = 5(2p + r) = 5 exactly: the two "pure" values balance out.
    # Row 1 = p(10,0) + r(0,10) + p(5,5) = (15p, 10r + 5p) ≈ (6.0167, 3.9833).
    # Row 2 = s(10,0) + t(0,10) + t(5,5) = (10s + 5t, 15t) ≈ (6.2762, 3.7238).
    expected = [[5, 5], [15 * p, 10 * r + 5 * p], [10 * s + 5 * t, 15 * t]]
    np.testing.assert_allclose(steps.output, expected, rtol=1e-14)
    np.testing.assert_allclose(steps.output[1], [6.0167, 3.9833], atol=1e-4)
    np.testing.assert_array_equal(steps.fully_masked, [False, False, False])


def test_hand_worked_preset_with_causal_mask():
    steps = scaled_dot_product_attention(Q, K, V, mask=causal_mask(3))
    a = 1 / math.sqrt(2)
    # Row 0 sees only key 0: weight 1 on it, so the output is exactly v0 = (10, 0).
    # Row 1 sees keys 0, 1 with scaled (a, 0): weights (e^a, 1) / (e^a + 1) ≈ (0.6698, 0.3302),
    # output = (10·0.6698, 10·0.3302). Row 2 sees everything, as without the mask.
    ea = math.exp(a)
    w1 = (ea / (ea + 1), 1 / (ea + 1))
    s, t = ea / (ea + 2), 1 / (ea + 2)
    np.testing.assert_allclose(steps.weights, [[1, 0, 0], [*w1, 0], [s, t, t]], rtol=1e-14)
    np.testing.assert_allclose(
        steps.output, [[10, 0], [10 * w1[0], 10 * w1[1]], [10 * s + 5 * t, 15 * t]], rtol=1e-14
    )
    # Blocked entries are -inf before the softmax and exactly 0 after it.
    assert steps.masked[0, 1] == -np.inf and steps.masked[1, 2] == -np.inf
    assert steps.masked[2, 2] == pytest.approx(a)


def test_hand_worked_unscaled_dot_product_with_log3_scores():
    # One query q = (ln 3, 0) against keys e1, e2: scores (ln 3, 0) -> exp gives (3, 1) ->
    # weights (3/4, 1/4) -> output 3/4·4 + 1/4·8 = 5.
    steps = dot_product_attention([[math.log(3), 0]], [[1, 0], [0, 1]], [[4], [8]])
    assert steps.scale == 1.0
    np.testing.assert_allclose(steps.weights, [[0.75, 0.25]], rtol=1e-15)
    np.testing.assert_allclose(steps.output, [[5.0]], rtol=1e-15)


def test_hand_worked_cosine_with_temperature_and_zero_vector():
    # q = (2, 0); keys (1, 0), (0, 3), (0, 0): cosines 1, 0 and (zero vector) 0.
    # Temperature 0.5 -> scaled (2, 0, 0) -> weights (e², 1, 1) / (e² + 2).
    steps = cosine_attention([[2, 0]], [[1, 0], [0, 3], [0, 0]], [[1], [0], [0]], temperature=0.5)
    np.testing.assert_allclose(steps.scores, [[1, 0, 0]], atol=1e-15)
    np.testing.assert_allclose(steps.scaled, [[2, 0, 0]], atol=1e-15)
    assert steps.scale == 2.0
    e2 = math.exp(2)
    np.testing.assert_allclose(steps.weights, [[e2 / (e2 + 2), 1 / (e2 + 2), 1 / (e2 + 2)]])
    np.testing.assert_allclose(steps.output, [[e2 / (e2 + 2)]])
    assert not np.isnan(steps.weights).any()


def test_hand_worked_additive():
    # d_attn = 1, W_q = [[1, 0]], W_k = [[0, 1]], v = [2]:
    # score(q, k) = 2·tanh(q₀ + k₁). q = (0.5, 9), keys (7, 0.5) and (7, -0.5):
    # scores 2·tanh(1) and 2·tanh(0) = 0; weights (e^{2tanh1}, 1) / (e^{2tanh1} + 1).
    params = AdditiveParams(w_q=[[1.0, 0.0]], w_k=[[0.0, 1.0]], v=[2.0])
    steps = additive_attention([[0.5, 9]], [[7, 0.5], [7, -0.5]], [[1], [0]], params=params)
    np.testing.assert_allclose(steps.scores, [[2 * math.tanh(1), 0]], rtol=1e-15, atol=1e-15)
    e = math.exp(2 * math.tanh(1))
    np.testing.assert_allclose(steps.weights, [[e / (e + 1), 1 / (e + 1)]], rtol=1e-14)


# --- against torch SDPA -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_torch_sdpa_batch_heads_cross_attention(dtype):
    rng = np.random.default_rng(5)
    q = rng.normal(size=(2, 3, 4, 8)).astype(dtype)  # (batch, head, q_pos, d_k)
    k = rng.normal(size=(2, 3, 6, 8)).astype(dtype)  # (batch, head, k_pos, d_k)
    v = rng.normal(size=(2, 3, 6, 5)).astype(dtype)  # d_v != d_k on purpose
    steps = scaled_dot_product_attention(q, k, v)
    assert steps.output.shape == (2, 3, 4, 5)
    assert steps.weights.shape == (2, 3, 4, 6)
    assert steps.output.dtype == dtype
    tol = 1e-13 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(steps.output, torch_sdpa(q, k, v), rtol=tol, atol=tol)


def test_matches_torch_sdpa_with_boolean_mask_and_scale():
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    mask = rng.random((2, 5, 7)) < 0.6
    mask[:, :, 0] = True  # every query sees something (torch would give NaN otherwise)
    got = scaled_dot_product_attention(q, k, v, mask=mask, scale=0.3).output
    expected = torch_sdpa(q, k, v, attn_mask=torch.from_numpy(mask), scale=0.3)
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)


def test_mask_broadcasts_over_batch_and_heads():
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, 3, 4, 4)) for _ in range(3))
    mask = causal_mask(4)
    got = scaled_dot_product_attention(q, k, v, mask=mask).output
    np.testing.assert_allclose(got, torch_sdpa(q, k, v, is_causal=True), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(
    "q_shape, kv_shape",
    [
        ((3, 2, 5, 4), (3, 1, 6, 4)),  # grouped-query: 3 KV heads, each shared by 2 query heads
        ((2, 3, 2, 5, 4), (2, 3, 1, 6, 4)),  # with a batch axis in front
        ((2, 1, 5, 4), (2, 1, 6, 4)),  # a group of one
        ((4, 5, 4), (1, 6, 4)),  # 3-D: one KV set shared by every query head
        ((3, 2, 5, 4), (1, 2, 6, 4)),  # shared along another axis: the plain product
    ],
)
def test_shared_keys_and_values_give_each_query_head_its_own_sdpa(q_shape, kv_shape):
    # Grouped-query attention: torch SDPA on the keys and values copied out to every query head.
    rng = np.random.default_rng(11)
    q, k, v = rng.normal(size=q_shape), rng.normal(size=kv_shape), rng.normal(size=kv_shape)
    mask = rng.random((5, 6)) < 0.7
    k_full, v_full = (np.broadcast_to(x, (*q_shape[:-2], *kv_shape[-2:])).copy() for x in (k, v))
    for inputs in ((q, k, v), tuple(map(torch.from_numpy, (q, k, v)))):
        steps = scaled_dot_product_attention(*inputs, mask=mask)
        assert tuple(steps.weights.shape) == (*q_shape[:-1], 6)
        np.testing.assert_allclose(
            np.asarray(steps.scores), q @ np.swapaxes(k_full, -1, -2), rtol=1e-12, atol=1e-12
        )
        expected = torch_sdpa(q, k_full, v_full, attn_mask=torch.from_numpy(mask))
        np.testing.assert_allclose(np.asarray(steps.output), expected, rtol=1e-12, atol=1e-12)


def test_fully_masked_query_gets_zero_weights_and_output_like_torch_sdpa():
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    steps = scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_array_equal(steps.fully_masked, [False, True, False])
    np.testing.assert_array_equal(steps.weights[1], np.zeros(4))
    np.testing.assert_array_equal(steps.output[1], np.zeros(2))
    # torch 2.x SDPA also returns zeros for such a row (torch.softmax alone would give NaN).
    expected = torch_sdpa(q, k, v, attn_mask=torch.from_numpy(mask))
    np.testing.assert_allclose(steps.output, expected, rtol=1e-13, atol=1e-15)
    assert torch.softmax(torch.from_numpy(steps.masked[1]), -1).isnan().all()


def test_matches_one_line_numpy_formula():
    rng = np.random.default_rng(9)
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    s = q @ k.T / np.sqrt(3)
    expected = np.exp(s) / np.exp(s).sum(-1, keepdims=True) @ v
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v).output, expected, rtol=1e-13)


def test_additive_matches_explicit_loops():
    rng = np.random.default_rng(10)
    params = init_additive_params(d_k=3, d_attn=5, seed=1)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    expected = np.array(
        [[params.v @ np.tanh(params.w_q @ qi + params.w_k @ kj) for kj in k] for qi in q]
    )
    steps = additive_attention(q, k, v, params=params)
    np.testing.assert_allclose(steps.scores, expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(steps.scaled, expected, rtol=1e-13, atol=1e-15)
    assert steps.scale == 1.0


def test_cosine_matches_formula():
    rng = np.random.default_rng(11)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    cos = np.array([[qi @ kj / np.linalg.norm(qi) / np.linalg.norm(kj) for kj in k] for qi in q])
    steps = cosine_attention(q, k, v, temperature=0.2)
    np.testing.assert_allclose(steps.scores, cos, rtol=1e-13)
    np.testing.assert_allclose(steps.scaled, cos / 0.2, rtol=1e-13)
    # Cosine ignores lengths: scaling the keys changes nothing.
    again = cosine_attention(q, 7.5 * k, v, temperature=0.2)
    np.testing.assert_allclose(again.weights, steps.weights, rtol=1e-13)


def test_init_additive_params_is_deterministic_with_right_shapes():
    a, b = init_additive_params(4, 6, seed=3), init_additive_params(4, 6, seed=3)
    assert a.w_q.shape == (6, 4) and a.w_k.shape == (6, 4) and a.v.shape == (6,)
    np.testing.assert_array_equal(a.w_q, b.w_q)
    assert not np.array_equal(a.w_q, init_additive_params(4, 6, seed=4).w_q)


# --- dispatcher and result type -----------------------------------------------------------------


def test_scoring_functions_table_names_each_function():
    assert dict(SCORING_FUNCTIONS) == {
        "dot": dot_product_attention,
        "scaled_dot": scaled_dot_product_attention,
        "additive": additive_attention,
        "cosine": cosine_attention,
    }


def test_attend_dispatches_to_each_scoring_function():
    params = init_additive_params(2, 3, seed=0)
    pairs = [
        (attend(Q, K, V, scoring="dot"), dot_product_attention(Q, K, V)),
        (attend(Q, K, V), scaled_dot_product_attention(Q, K, V)),
        (attend(Q, K, V, scale=0.25), scaled_dot_product_attention(Q, K, V, scale=0.25)),
        (
            attend(Q, K, V, scoring="cosine", temperature=0.3),
            cosine_attention(Q, K, V, temperature=0.3),
        ),
        (
            attend(Q, K, V, scoring="additive", additive_params=params),
            additive_attention(Q, K, V, params=params),
        ),
    ]
    for got, expected in pairs:
        np.testing.assert_array_equal(got.weights, expected.weights)
        assert got.scale == expected.scale
    # The scorings really differ on this input.
    assert not np.allclose(pairs[0][0].weights, pairs[1][0].weights)


def test_attend_errors():
    with pytest.raises(AttentionInputError, match="Unknown scoring function 'bilinear'"):
        attend(Q, K, V, scoring="bilinear")
    with pytest.raises(AttentionInputError, match="needs additive_params"):
        attend(Q, K, V, scoring="additive")


def test_steps_fields_frozen_and_picklable():
    assert [f.name for f in fields(AttentionSteps)] == [
        "scores", "scaled", "masked", "weights", "output", "fully_masked", "scale", "softcap",
    ]  # fmt: skip
    steps = scaled_dot_product_attention(Q, K, V, mask=causal_mask(3))
    with pytest.raises(FrozenInstanceError):
        steps.weights = None
    restored = pickle.loads(pickle.dumps(steps))
    np.testing.assert_array_equal(restored.output, steps.output)
    assert restored.scale == steps.scale


def test_float32_is_kept_and_mixed_promotes():
    q32 = np.asarray(Q, dtype=np.float32)
    assert scaled_dot_product_attention(q32, q32, q32).weights.dtype == np.float32
    assert scaled_dot_product_attention(q32, np.asarray(K, float), q32).output.dtype == np.float64


# --- properties ---------------------------------------------------------------------------------


@st.composite
def qkv(draw, same_length=False):
    q_pos = draw(st.integers(1, 6))
    k_pos = q_pos if same_length else draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    elements = st.floats(-5, 5, allow_nan=False)
    q = draw(arrays(np.float64, (q_pos, d_k), elements=elements))
    k = draw(arrays(np.float64, (k_pos, d_k), elements=elements))
    v = draw(arrays(np.float64, (k_pos, d_v), elements=elements))
    return q, k, v


@PROPERTY
@given(qkv(), st.data())
def test_rows_sum_to_one_or_zero_when_fully_masked(args, data):
    q, k, v = args
    mask = data.draw(arrays(np.bool_, (q.shape[0], k.shape[0])))
    steps = scaled_dot_product_attention(q, k, v, mask=mask)
    sums = steps.weights.sum(axis=-1)
    np.testing.assert_allclose(sums, np.where(mask.any(-1), 1.0, 0.0), atol=1e-12)
    np.testing.assert_array_equal(steps.fully_masked, ~mask.any(-1))
    assert (steps.weights[~mask] == 0).all()


@PROPERTY
@given(qkv(same_length=True), st.randoms(use_true_random=False))
def test_self_attention_is_permutation_equivariant(args, rnd):
    x, _, _ = args
    perm = np.array(rnd.sample(range(x.shape[0]), x.shape[0]))
    out = scaled_dot_product_attention(x, x, x).output
    out_perm = scaled_dot_product_attention(x[perm], x[perm], x[perm]).output
    np.testing.assert_allclose(out_perm, out[perm], rtol=1e-10, atol=1e-10)


@PROPERTY
@given(qkv(same_length=True), st.data())
def test_causal_output_ignores_future_tokens(args, data):
    q, k, v = args
    n = q.shape[0]
    i = data.draw(st.integers(0, n - 1))
    elements = st.floats(-5, 5, allow_nan=False)
    # Replace every token after position i with arbitrary new values.
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    for a in (q2, k2, v2):
        a[i + 1 :] = data.draw(arrays(np.float64, a[i + 1 :].shape, elements=elements))
    before = scaled_dot_product_attention(q, k, v, mask=causal_mask(n)).output
    after = scaled_dot_product_attention(q2, k2, v2, mask=causal_mask(n)).output
    np.testing.assert_array_equal(after[: i + 1], before[: i + 1])


# --- bad input ----------------------------------------------------------------------------------


def test_width_mismatch_message():
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention([[1, 2]], [[1, 2, 3]], [[1]])
    assert str(info.value).startswith(
        "K has 3 columns but Q has 2: queries and keys must have the same width d_k"
    )
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("q", "k", "v", "kwargs", "fragment"),
    [
        (Q, K, [[1, 2]], {}, "K has 3 rows but V has 1"),
        ([1, 2], K, V, {}, "must be a matrix"),
        ([[1, np.nan]], K, V, {}, "Q \\(queries\\) contains nan at row 1, column 2"),
        ([[1, 2], [3]], K, V, {}, "ragged"),
        ([["x", "y"]], K, V, {}, "non-numeric values such as 'x'"),
        (np.zeros((0, 2)), K, V, {}, "empty"),
        (Q, K, V, {"mask": np.ones((2, 3), bool)}, "mask has shape \\(2, 3\\)"),
        (Q, K, V, {"mask": np.ones((3, 3))}, "must be boolean"),
        (Q, K, V, {"scale": float("nan")}, "scale must be a finite number"),
        (np.ones((2, 3, 2)), np.ones((4, 3, 2)), np.ones((4, 3, 1)), {}, "do not match"),
    ],
)
def test_bad_input_messages(q, k, v, kwargs, fragment):
    with pytest.raises(AttentionInputError, match=fragment):
        scaled_dot_product_attention(q, k, v, **kwargs)


def test_other_scoring_errors():
    with pytest.raises(AttentionInputError, match="temperature must be greater than 0"):
        cosine_attention(Q, K, V, temperature=0)
    with pytest.raises(AttentionInputError, match="W_q expects 3"):
        additive_attention(Q, K, V, params=init_additive_params(3, 2))
    with pytest.raises(AttentionInputError, match="needs params=AdditiveParams"):
        additive_attention(Q, K, V, params=None)
    with pytest.raises(AttentionInputError, match="hidden size d_attn"):
        AdditiveParams(w_q=np.ones((2, 2)), w_k=np.ones((3, 2)), v=np.ones(2))


def test_size_cap_and_overflow():
    with max_elements(50), pytest.raises(AttentionInputError, match="score matrix"):
        scaled_dot_product_attention(np.ones((8, 2)), np.ones((7, 2)), np.ones((7, 1)))
    big = np.full((2, 2), 1e20, dtype=np.float32)  # q·k = 2e40 overflows float32
    with pytest.raises(AttentionInputError, match="overflowed"):
        scaled_dot_product_attention(big, big, big)


# --- the same functions on torch tensors ---------------------------------------------------------


def test_cosine_and_additive_attention_on_tensors_follow_their_formulas():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, n, 3, dtype=torch.float64, generator=g) for n in (4, 6, 6))
    q.requires_grad_()
    mask = torch.ones(4, 6, dtype=torch.bool).tril()
    # cosine: softmax(cos(q_i, k_j) / τ) V, with torch's own cosine similarity.
    cos = F.cosine_similarity(q[..., :, None, :], k[..., None, :, :], dim=-1)
    expected = torch.softmax((cos / 0.3).masked_fill(~mask, -math.inf), -1) @ v
    got = cosine_attention(q, k, v, temperature=0.3, mask=mask)
    torch.testing.assert_close(got.output, expected, rtol=1e-13, atol=1e-14)
    assert got.fully_masked.dtype == torch.bool and not got.fully_masked.any()
    got.output.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    # additive: softmax(vᵀ tanh(W_q q_i + W_k k_j)) V, written with einsum.
    params = init_additive_params(3, 5, seed=1)
    w_q, w_k, w = (torch.from_numpy(a) for a in (params.w_q, params.w_k, params.v))
    hidden = torch.tanh((q @ w_q.T)[..., :, None, :] + (k @ w_k.T)[..., None, :, :])
    expected = torch.softmax(torch.einsum("...qkh,h->...qk", hidden, w), -1) @ v
    got = additive_attention(q.detach().float(), k.float(), v.float(), params=params)
    assert got.output.dtype == torch.float32  # the NumPy parameters follow the inputs' dtype
    torch.testing.assert_close(got.output, expected.float(), rtol=1e-5, atol=1e-6)


# --- added for the mutation check (make mutate): each kills a mutant the tests above missed ---


def test_additive_params_take_matrices_and_a_vector_only():
    from attention_core.attention import AdditiveParams
    from attention_core.validation import AttentionInputError

    w, v = np.ones((2, 2)), np.ones(2)
    for bad in (
        (np.ones((2, 2, 2)), w, v),
        (w, np.ones((2, 2, 2)), v),
        (w, w, np.ones((2, 1))),
    ):
        with pytest.raises(AttentionInputError):
            AdditiveParams(*bad)


def test_init_additive_params_draws_from_the_documented_ranges():
    from attention_core.attention import init_additive_params

    one = init_additive_params(1, 1)  # the smallest network: d_k = d_attn = 1
    assert one.w_q.shape == one.w_k.shape == (1, 1) and one.v.shape == (1,)
    default, zero = init_additive_params(4, 60), init_additive_params(4, 60, seed=0)
    np.testing.assert_array_equal(default.w_q, zero.w_q)  # the default seed is 0
    assert not np.allclose(zero.w_q, init_additive_params(4, 60, seed=1).w_q)
    # Xavier-uniform: U(-b, b) with b = √(6 / (d_k + d_attn)) = √(6/64); 240 draws each reach
    # past 0.9 b on both sides (a miss has probability 0.95^240 ≈ 5e-6).
    bound = math.sqrt(6 / 64)
    for w in (zero.w_q, zero.w_k):
        assert np.abs(w).max() <= bound and w.max() > 0.9 * bound and w.min() < -0.9 * bound
    # v ~ U(-1/√d_attn, 1/√d_attn), 60 draws.
    limit = 1 / math.sqrt(60)
    assert np.abs(zero.v).max() <= limit
    assert zero.v.max() > 0.8 * limit and zero.v.min() < -0.8 * limit


def test_additive_attention_on_a_batch_is_each_example_on_its_own():
    from attention_core.attention import additive_attention, init_additive_params

    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    params = init_additive_params(4, 6)
    batched = additive_attention(q, k, v, params=params)
    for b in range(2):
        alone = additive_attention(q[b], k[b], v[b], params=params)
        np.testing.assert_allclose(batched.output[b], alone.output, rtol=1e-12)
    # By hand for one pair: score = vᵀ tanh(W_q q + W_k k).
    hand = params.v @ np.tanh(params.w_q @ q[1, 2] + params.w_k @ k[1, 4])
    assert batched.scores[1, 2, 4] == pytest.approx(hand, rel=1e-12)


def test_cosine_attention_default_temperature_zero_vectors_and_rounding():
    from attention_core.attention import attend, cosine_attention

    # cos = [1, 0] for q = [1, 0]; the default temperature 0.1 makes the scaled scores [10, 0].
    q, k, v = [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [0.0]]
    weight = math.exp(10) / (math.exp(10) + 1)
    for steps in (cosine_attention(q, k, v), attend(q, k, v, scoring="cosine")):
        np.testing.assert_allclose(steps.scaled, [[10.0, 0.0]], rtol=1e-12)
        np.testing.assert_allclose(steps.weights, [[weight, 1 - weight]], rtol=1e-12)
    # A zero query has no direction: cosine 0 with every key, so equal weights (not 0/0).
    zero = cosine_attention([[0.0, 0.0]], k, v)
    np.testing.assert_array_equal(zero.scores, [[0.0, 0.0]])
    np.testing.assert_allclose(zero.weights, [[0.5, 0.5]], rtol=1e-12)
    # In float64, [1, 1, 2] against itself gives 1.0000000000000002 and [6, 9, 3] against its
    # negative -1.0000000000000002 before clipping: a cosine never leaves [-1, 1].
    q = [[1.0, 1.0, 2.0], [6.0, 9.0, 3.0]]
    k = [[1.0, 1.0, 2.0], [-6.0, -9.0, -3.0]]
    scores = cosine_attention(q, k, [[1.0], [2.0]]).scores
    assert scores[0, 0] == 1.0 and scores[1, 1] == -1.0


@pytest.mark.parametrize("scoring", ["additive", "cosine"])
def test_bounded_scorings_check_the_mask_too(scoring):
    """Additive and cosine scores cannot overflow, but their masks are still the user's input:
    a float mask (an additive bias or a boolean?) or a mask of the wrong shape is refused."""
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    params = init_additive_params(d_k=4, d_attn=6, seed=0)

    def run(mask):
        if scoring == "additive":
            return additive_attention(q, k, v, params=params, mask=mask)
        return cosine_attention(q, k, v, mask=mask)

    with pytest.raises(AttentionInputError, match="must be boolean"):
        run(np.ones((3, 5)) * 0.5)
    with pytest.raises(AttentionInputError):
        run(np.ones((4, 5), dtype=bool))
    allowed = np.tril(np.ones((3, 5), dtype=bool))
    weights = run(allowed).weights
    np.testing.assert_array_equal(weights[~allowed], 0.0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)


def test_soft_capped_scores_are_c_tanh_of_the_scaled_scores_as_gemma_2_computes_them():
    """Gemma 2's eager attention in torch, written out: (q kᵀ · scale / c).tanh() · c, masked,
    softmax, @ v. Scores here reach ±9, far past the cap c = 2."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(0, 2.0, (2, 5, 4)) for _ in range(3))
    cap, scale = 2.0, 0.8
    steps = scaled_dot_product_attention(q, k, v, mask=causal_mask(5), scale=scale, softcap=cap)
    tq, tk, tv = (torch.tensor(x) for x in (q, k, v))
    raw = tq @ tk.transpose(-1, -2) * scale
    capped = torch.tanh(raw / cap) * cap
    masked = capped.masked_fill(~torch.tensor(causal_mask(5)), float("-inf"))
    expected = torch.softmax(masked, dim=-1) @ tv
    assert float(raw.abs().max()) > 3 * cap  # the cap bends these scores
    np.testing.assert_allclose(steps.scaled, capped.numpy(), atol=1e-12)
    np.testing.assert_allclose(steps.output, expected.numpy(), atol=1e-12)
    np.testing.assert_allclose(steps.scores * steps.scale, raw.numpy(), atol=1e-12)
    assert steps.softcap == cap and np.abs(steps.scaled).max() < cap
    # On torch tensors the same formula stays on the tensors.
    on_torch = scaled_dot_product_attention(tq, tk, tv, scale=scale, softcap=cap)
    assert isinstance(on_torch.scaled, torch.Tensor)
    np.testing.assert_allclose(on_torch.scaled.numpy(), capped.numpy(), atol=1e-12)


def test_a_soft_cap_far_above_the_scores_changes_almost_nothing_and_a_bad_cap_is_refused():
    rng = np.random.default_rng(8)
    q, k, v = (rng.normal(0, 0.5, (3, 4)) for _ in range(3))
    plain = scaled_dot_product_attention(q, k, v)
    loose = scaled_dot_product_attention(q, k, v, softcap=1e4)
    assert plain.softcap is None
    np.testing.assert_allclose(loose.weights, plain.weights, atol=1e-8)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(AttentionInputError, match="softcap"):
            scaled_dot_product_attention(q, k, v, softcap=bad)
