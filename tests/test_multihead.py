"""Multi-head attention against torch.nn.MultiheadAttention, per-head loops and hand examples."""

import pickle
from dataclasses import fields

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_core import (
    AttentionInputError,
    MultiHeadParams,
    MultiHeadSteps,
    causal_mask,
    init_multi_head_params,
    max_elements,
    merge_heads,
    multi_head_attention,
    padding_mask,
    split_heads,
)

PROPERTY = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def torch_mha(params: MultiHeadParams, num_heads: int, dtype=torch.float64):
    """nn.MultiheadAttention holding our parameters (in_proj = cat(w_q, w_k, w_v))."""
    mha = torch.nn.MultiheadAttention(params.d_model, num_heads, batch_first=True, dtype=dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.from_numpy(np.concatenate([params.w_q, params.w_k, params.w_v]))
        )
        mha.in_proj_bias.copy_(
            torch.from_numpy(np.concatenate([params.b_q, params.b_k, params.b_v]))
        )
        mha.out_proj.weight.copy_(torch.from_numpy(params.w_o))
        mha.out_proj.bias.copy_(torch.from_numpy(params.b_o))
    return mha.eval()


def run_torch(mha, x_q, x_kv, mask=None):
    kv = torch.from_numpy(x_kv)
    # torch's boolean attn_mask means "blocked" where True: the opposite of ours.
    attn_mask = None if mask is None else torch.from_numpy(~mask)
    with torch.no_grad():
        out, weights = mha(
            torch.from_numpy(x_q), kv, kv, attn_mask=attn_mask, average_attn_weights=False
        )
    return out.numpy(), weights.numpy()


@pytest.mark.parametrize(
    ("d_model", "num_heads", "q_pos", "k_pos", "cross"),
    [(8, 2, 5, 5, False), (12, 3, 4, 7, True), (6, 1, 3, 3, False), (16, 8, 6, 2, True)],
)
def test_matches_torch_multihead_attention(d_model, num_heads, q_pos, k_pos, cross):
    rng = np.random.default_rng(d_model + num_heads)
    params = init_multi_head_params(d_model, num_heads, seed=2)
    x_q = rng.normal(size=(3, q_pos, d_model))  # (batch, q_pos, d_model)
    x_kv = rng.normal(size=(3, k_pos, d_model)) if cross else x_q
    steps = multi_head_attention(x_q, x_kv if cross else None, params=params, num_heads=num_heads)
    out, weights = run_torch(torch_mha(params, num_heads), x_q, x_kv)
    assert steps.attention.weights.shape == (3, num_heads, q_pos, x_kv.shape[1])
    np.testing.assert_allclose(steps.output, out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(steps.attention.weights, weights, rtol=1e-12, atol=1e-13)


def test_matches_torch_with_causal_and_padding_mask():
    rng = np.random.default_rng(1)
    params = init_multi_head_params(8, 4, seed=0)
    x = rng.normal(size=(2, 6, 8))
    mask = causal_mask(6) & padding_mask(5, 6)  # the last key is padding
    steps = multi_head_attention(x, params=params, num_heads=4, mask=mask)
    out, weights = run_torch(torch_mha(params, 4), x, x, mask)
    np.testing.assert_allclose(steps.output, out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(steps.attention.weights, weights, rtol=1e-12, atol=1e-13)
    assert (steps.attention.weights[..., 5] == 0).all()


def test_matches_torch_in_float32():
    rng = np.random.default_rng(2)
    params = init_multi_head_params(8, 2, seed=5)
    x = rng.normal(size=(2, 4, 8)).astype(np.float32)
    p32 = MultiHeadParams(*(getattr(params, f.name).astype(np.float32) for f in fields(params)))
    steps = multi_head_attention(x, params=p32, num_heads=2)
    assert steps.output.dtype == np.float32
    out, _ = run_torch(torch_mha(p32, 2, torch.float32), x, x)
    np.testing.assert_allclose(steps.output, out, rtol=1e-5, atol=1e-6)


def test_matches_per_head_numpy_loop():
    rng = np.random.default_rng(3)
    d_model, h = 6, 3
    p = init_multi_head_params(d_model, h, seed=9)
    x_q, x_kv = rng.normal(size=(4, d_model)), rng.normal(size=(5, d_model))
    d = d_model // h
    heads = []
    for i in range(h):
        rows = slice(i * d, (i + 1) * d)
        q = x_q @ p.w_q[rows].T + p.b_q[rows]
        k = x_kv @ p.w_k[rows].T + p.b_k[rows]
        v = x_kv @ p.w_v[rows].T + p.b_v[rows]
        s = q @ k.T / np.sqrt(d)
        heads.append(np.exp(s) / np.exp(s).sum(-1, keepdims=True) @ v)
    expected = np.concatenate(heads, axis=-1) @ p.w_o.T + p.b_o
    steps = multi_head_attention(x_q, x_kv, params=p, num_heads=h)
    np.testing.assert_allclose(steps.output, expected, rtol=1e-12)
    np.testing.assert_allclose(steps.concat, np.concatenate(heads, axis=-1), rtol=1e-12)


def test_head_mask_scales_each_head_before_w_o():
    # The per-head loop above, with head 1 removed and head 2 halved: transformers 4's head_mask
    # multiplied the weights, (m·P)V = m·(PV), so each head's output is scaled before W_o.
    rng = np.random.default_rng(4)
    d_model, h = 6, 3
    p = init_multi_head_params(d_model, h, seed=2)
    x = rng.normal(size=(4, d_model))
    plain = multi_head_attention(x, params=p, num_heads=h)
    masked = multi_head_attention(x, params=p, num_heads=h, head_mask=[1.0, 0.0, 0.5])
    d = d_model // h
    concat = plain.concat.copy()
    concat[:, d : 2 * d] = 0.0
    concat[:, 2 * d :] *= 0.5
    np.testing.assert_array_equal(masked.concat[:, d : 2 * d], 0.0)
    np.testing.assert_allclose(masked.concat, concat, rtol=1e-12)
    np.testing.assert_allclose(masked.output, concat @ p.w_o.T + p.b_o, rtol=1e-12)
    # The patterns are the heads' own: the mask acts on outputs only.
    np.testing.assert_array_equal(masked.attention.weights, plain.attention.weights)
    # A mask of ones changes nothing; tensors take it too (on their dtype).
    ones = multi_head_attention(x, params=p, num_heads=h, head_mask=np.ones(h))
    np.testing.assert_array_equal(ones.output, plain.output)
    t = multi_head_attention(
        torch.from_numpy(x), params=p, num_heads=h, head_mask=torch.tensor([1.0, 0.0, 0.5])
    )
    np.testing.assert_allclose(t.output.numpy(), masked.output, rtol=1e-12)
    with pytest.raises(AttentionInputError, match="one multiplier per head"):
        multi_head_attention(x, params=p, num_heads=h, head_mask=[1.0, 0.0])
    with pytest.raises(AttentionInputError, match="one multiplier per head"):
        multi_head_attention(x, params=p, num_heads=h, head_mask=np.ones((2, h)))


def test_projected_q_k_v_are_torchs_in_projection():
    """The Q, K and V the page shows before attention. A key bias adds the same q·b_k to every
    score of a query, which softmax cancels: only K itself shows whether it was added."""
    rng = np.random.default_rng(11)
    params = init_multi_head_params(12, 3, seed=4)
    x_q, x_kv = rng.normal(size=(2, 4, 12)), rng.normal(size=(2, 6, 12))
    steps = multi_head_attention(x_q, x_kv, params=params, num_heads=3)
    linear = torch.nn.functional.linear
    for name, x, shown in (("q", x_q, steps.q), ("k", x_kv, steps.k), ("v", x_kv, steps.v)):
        w, b = (torch.from_numpy(getattr(params, f"{kind}_{name}")) for kind in ("w", "b"))
        expected = linear(torch.from_numpy(x), w, b).numpy()
        np.testing.assert_allclose(shown, expected, rtol=1e-12, atol=1e-13)


def test_hand_worked_identity_projections_two_heads():
    # W_q = W_k = W_v = W_o = I and zero biases: head 0 attends with features 0..1, head 1 with
    # features 2..3. x0 = (1,0, 0,0), x1 = (0,0, 1,0).
    # Head 0: q0 = (1,0) scores (1, 0)/√2 against (k0, k1); v-rows (1,0) and (0,0).
    #   weights (e^a, 1)/(e^a+1) with a = 1/√2; output of token 0 = e^a/(e^a+1)·(1,0).
    # Head 1: q0 = (0,0) scores (0, 0): uniform (1/2, 1/2); v-rows (0,0) and (1,0):
    #   output of token 0 = (1/2, 0).
    eye, zero = np.eye(4), np.zeros(4)
    params = MultiHeadParams(eye, eye, eye, eye, zero, zero, zero, zero)
    x = np.array([[1.0, 0, 0, 0], [0, 0, 1.0, 0]])
    steps = multi_head_attention(x, params=params, num_heads=2)
    a = np.exp(1 / np.sqrt(2))
    np.testing.assert_allclose(steps.attention.weights[0, 0], [a / (a + 1), 1 / (a + 1)])
    np.testing.assert_allclose(steps.attention.weights[1, 0], [0.5, 0.5])
    np.testing.assert_allclose(steps.output[0], [a / (a + 1), 0, 0.5, 0], rtol=1e-15)


def test_steps_shapes_and_fields():
    params = init_multi_head_params(12, 3, seed=0)
    x_q, x_kv = np.ones((2, 4, 12)), np.ones((2, 5, 12))
    s = multi_head_attention(x_q, x_kv, params=params, num_heads=3)
    assert [f.name for f in fields(MultiHeadSteps)] == [
        "x_q", "x_kv", "q", "k", "v", "q_heads", "k_heads", "v_heads",
        "attention", "concat", "output",
    ]  # fmt: skip
    assert s.q.shape == (2, 4, 12) and s.k.shape == (2, 5, 12) and s.v.shape == (2, 5, 12)
    assert s.q_heads.shape == (2, 3, 4, 4) and s.k_heads.shape == (2, 3, 5, 4)
    assert s.attention.weights.shape == (2, 3, 4, 5)
    assert s.concat.shape == (2, 4, 12) and s.output.shape == (2, 4, 12)
    np.testing.assert_array_equal(s.x_kv, x_kv)
    assert pickle.loads(pickle.dumps(s)).output.shape == (2, 4, 12)
    self_attn = multi_head_attention(x_q, params=params, num_heads=3)
    assert self_attn.x_kv is self_attn.x_q


def test_split_and_merge_heads():
    x = np.arange(2 * 3 * 6, dtype=float).reshape(2, 3, 6)  # (batch, pos, d_model)
    heads = split_heads(x, 2)
    assert heads.shape == (2, 2, 3, 3)
    # Head 1 holds features 3..5 (torch's order: contiguous slices of d_model).
    np.testing.assert_array_equal(heads[0, 1, 0], [3, 4, 5])
    np.testing.assert_array_equal(heads[1, 0, 2], x[1, 2, :3])
    np.testing.assert_array_equal(merge_heads(heads), x)


def test_params_count_matches_torch_and_init_is_deterministic():
    p = init_multi_head_params(16, 4, seed=7)
    assert p.num_parameters == 4 * 16**2 + 4 * 16
    assert p.num_parameters == sum(t.numel() for t in torch_mha(p, 4).parameters())
    again = init_multi_head_params(16, 4, seed=7)
    for f in fields(p):
        np.testing.assert_array_equal(getattr(p, f.name), getattr(again, f.name))
    assert not np.array_equal(p.w_q, init_multi_head_params(16, 4, seed=8).w_q)
    # Biases are small but non-zero, so the tests above exercise them.
    for b in (p.b_q, p.b_k, p.b_v, p.b_o):
        assert (b != 0).all() and np.abs(b).max() <= 0.1
        assert (b < 0).any() and (b > 0).any()  # drawn around 0, not a constant offset
    bound = np.sqrt(6 / 32)
    assert np.abs(p.w_q).max() <= bound and p.w_q.std() > bound / 3


def test_head_specific_mask():
    rng = np.random.default_rng(4)
    params = init_multi_head_params(4, 2, seed=1)
    x = rng.normal(size=(3, 4))
    mask = np.stack([causal_mask(3), np.ones((3, 3), bool)])  # (head, q_pos, k_pos)
    s = multi_head_attention(x, params=params, num_heads=2, mask=mask)
    assert (s.attention.weights[0][~causal_mask(3)] == 0).all()
    assert (s.attention.weights[1] > 0).all()


@PROPERTY
@given(st.integers(2, 6), st.integers(0, 10_000), st.randoms(use_true_random=False))
def test_permutation_equivariant_without_positions(n, seed, rnd):
    params = init_multi_head_params(6, 3, seed=seed % 50)
    x = np.random.default_rng(seed).normal(size=(n, 6))
    perm = np.array(rnd.sample(range(n), n))
    out = multi_head_attention(x, params=params, num_heads=3).output
    out_perm = multi_head_attention(x[perm], params=params, num_heads=3).output
    np.testing.assert_allclose(out_perm, out[perm], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda p: multi_head_attention(np.ones((3, 8)), params=p, num_heads=3), "does not divide"),
        (lambda p: multi_head_attention(np.ones((3, 6)), params=p, num_heads=2), "d_model=8"),
        (
            lambda p: multi_head_attention(np.ones((3, 8)), np.ones((2, 4)), params=p, num_heads=2),
            "x_kv has 4 features",
        ),
        (lambda p: multi_head_attention(np.ones((3, 8)), params=None, num_heads=2), "MultiHead"),
        (lambda p: multi_head_attention(np.ones(8), params=p, num_heads=2), "matrix"),
        (lambda p: init_multi_head_params(10, 4), "choose one of \\[1, 2, 5, 10\\]"),
        (lambda p: split_heads(np.ones((2, 6)), 4), "does not divide"),
    ],
)
def test_bad_input(call, fragment):
    params = init_multi_head_params(8, 2, seed=0)
    with pytest.raises(AttentionInputError, match=fragment):
        call(params)


def test_bad_params_shape():
    with pytest.raises(AttentionInputError, match="w_k has shape \\(4, 3\\) but should be"):
        MultiHeadParams(
            np.eye(4), np.ones((4, 3)), np.eye(4), np.eye(4), *(np.zeros(4) for _ in range(4))
        )


def test_size_cap():
    params = init_multi_head_params(4, 2, seed=0)
    with max_elements(1000), pytest.raises(AttentionInputError, match="attention pattern"):
        multi_head_attention(np.ones((30, 4)), params=params, num_heads=2)


# --- added for the mutation check (make mutate): each kills a mutant the tests above missed ---


def test_params_name_the_shape_the_input_width_asks_for():
    from attention_core.multihead import MultiHeadParams, init_multi_head_params
    from attention_core.validation import AttentionInputError

    good = init_multi_head_params(4, 2)
    fields_ = {name: getattr(good, name) for name in ("w_k", "w_v", "w_o", "b_q", "b_k", "b_v")}
    # W_Q maps x (d_model columns) by x @ W_Qᵀ, so its width, 4, is d_model.
    with pytest.raises(AttentionInputError, match=r"should be \(4, 4\)"):
        MultiHeadParams(w_q=np.ones((3, 4)), **fields_, b_o=good.b_o)
    with pytest.raises(AttentionInputError):
        MultiHeadParams(w_q=np.ones(4), **fields_, b_o=good.b_o)  # a vector is no projection


def test_init_multi_head_params_smallest_default_seed_and_size_limit():
    from attention_core.multihead import init_multi_head_params
    from attention_core.validation import max_elements

    one = init_multi_head_params(1, 1)  # d_model = 1 is allowed
    assert one.w_q.shape == (1, 1) and one.b_o.shape == (1,)
    np.testing.assert_array_equal(
        init_multi_head_params(4, 2).w_v, init_multi_head_params(4, 2, seed=0).w_v
    )
    # Four (d_model, d_model) weights: 4 · 3 · 3 = 36 numbers fit a cap of exactly 36.
    with max_elements(36):
        assert init_multi_head_params(3, 1).num_parameters == 4 * 9 + 4 * 3


def test_batch_shapes_are_checked_before_any_projection():
    from attention_core.multihead import init_multi_head_params, multi_head_attention
    from attention_core.validation import AttentionInputError, max_elements

    params = init_multi_head_params(4, 2)
    rng = np.random.default_rng(0)
    with pytest.raises(AttentionInputError):  # batches of 2 and 3 examples do not pair up
        multi_head_attention(
            rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 5, 4)), params=params, num_heads=2
        )
    # The pattern of 2 examples × 2 heads × 3 queries × 3 keys is 36 numbers: over a cap of 35
    # it is refused up front, by name, whichever input carries the batch.
    batched, single = rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4))
    for x_q, x_kv in ((batched, single), (single, batched), (batched, batched)):
        with max_elements(35), pytest.raises(AttentionInputError, match="The attention pattern"):
            multi_head_attention(x_q, x_kv, params=params, num_heads=2)


def test_a_batch_gives_each_sequence_its_own_numbers():
    # Each sequence of a batch, alone, gives the same numbers up to the rounding of its own dot
    # products: OpenBLAS on some CPUs sums a row that ends a block of the batch's one product
    # in another order than the same row in a product of its own (a last-bit difference).
    params = init_multi_head_params(8, 2, seed=6)
    x = np.random.default_rng(6).normal(size=(3, 5, 8))
    batch = multi_head_attention(x, params=params, num_heads=2, mask=causal_mask(5))
    for i in range(3):
        alone = multi_head_attention(x[i], params=params, num_heads=2, mask=causal_mask(5))
        for name in ("q", "k", "v", "weights", "output"):
            got, want = getattr(batch, name)[i], getattr(alone, name)
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15, err_msg=name)


def test_the_unchecked_formula_gives_the_checked_numbers():
    # The training's path: every projection one product over the batch, no checks.
    from attention_core.multihead import _FIELDS, multi_head

    params = init_multi_head_params(12, 3, seed=2)
    x = np.random.default_rng(2).normal(size=(4, 6, 12))
    p = {name: getattr(params, name) for name in _FIELDS}
    mask = causal_mask(6)
    multipliers = np.array([1.0, 0.0, 1.0])[:, None, None]
    fast = multi_head(x, x, p, 3, mask, multipliers, checked=False)
    checked = multi_head_attention(
        x, params=params, num_heads=3, mask=mask, head_mask=np.array([1.0, 0.0, 1.0])
    )
    assert fast.attention.scale == 0.5  # 1/√d_head, d_head = 12 / 3 = 4
    for name in ("q", "k", "v", "concat", "output"):
        np.testing.assert_allclose(getattr(fast, name), getattr(checked, name), atol=1e-13)
    np.testing.assert_allclose(fast.attention.weights, checked.attention.weights, atol=1e-14)
    assert np.all(fast.concat[..., 4:8] == 0)  # the removed head's columns


def test_merge_heads_takes_heads_without_a_batch():
    heads = np.arange(24.0).reshape(2, 3, 4)  # (head, pos, d_head)
    np.testing.assert_array_equal(merge_heads(heads), heads.transpose(1, 0, 2).reshape(3, 8))


def test_scores_past_float_range_are_refused_checked_and_left_to_the_caller_unchecked():
    from attention_core.multihead import _FIELDS, multi_head

    params = init_multi_head_params(4, 1, seed=0)
    x = np.full((1, 3, 4), 1e30, dtype=np.float32)  # q·k overflows float32
    with pytest.raises(AttentionInputError, match="overflowed to infinity"):
        multi_head_attention(x, params=params, num_heads=1)
    p = {name: getattr(params, name).astype(np.float32) for name in _FIELDS}
    with np.errstate(all="ignore"):
        steps = multi_head(x, x, p, 1, None, checked=False)  # a training run says so itself
    assert not np.isfinite(steps.attention.scores).all()
