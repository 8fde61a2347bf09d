"""The shared attention_core functions on torch tensors: the same numbers as on NumPy arrays and
as torch's own modules (SDPA, nn.MultiheadAttention), on CPU and CUDA, with gradients; and the
torch-only helpers of `torch_backend` (conversion, masks on a device)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_core as ac
from attention_core import torch_backend as tb


def rand(*shape, seed=0, dtype=torch.float64, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)


def assert_steps_close(torch_steps, numpy_steps, tol):
    as_np = tb.to_numpy(torch_steps)
    for name in ("scores", "scaled", "masked", "weights", "output"):
        np.testing.assert_allclose(
            getattr(as_np, name), getattr(numpy_steps, name), rtol=tol, atol=tol, err_msg=name
        )
    np.testing.assert_array_equal(as_np.fully_masked, numpy_steps.fully_masked)
    assert as_np.scale == pytest.approx(numpy_steps.scale)


def test_softmax_matches_numpy_and_handles_fully_masked_rows():
    x = rand(3, 5)
    x[1] = float("-inf")
    out = tb.softmax(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), ac.softmax(x.numpy()), rtol=1e-15, atol=0)
    assert (out[1] == 0).all()
    np.testing.assert_allclose(tb.softmax(rand(2, 4), axis=0).sum(0).numpy(), 1.0, rtol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_sdpa_matches_numpy_and_torch(dtype):
    q, k, v = rand(2, 3, 4, 8, seed=1), rand(2, 3, 6, 8, seed=2), rand(2, 3, 6, 5, seed=3)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    mask = tb.combine_masks(tb.causal_mask(4, 6), tb.padding_mask(5, 4, k_len=6))
    steps = tb.scaled_dot_product_attention(q, k, v, mask=mask)
    assert isinstance(steps, ac.AttentionSteps)
    assert steps.output.dtype == dtype and steps.output.device == q.device
    tol = 1e-13 if dtype == torch.float64 else 3e-6
    reference = ac.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask=mask.numpy())
    assert_steps_close(steps, reference, tol)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(steps.output, expected, rtol=tol, atol=tol)


def test_other_scorings_match_numpy():
    q, k, v = rand(4, 3, seed=4), rand(5, 3, seed=5), rand(5, 2, seed=6)
    qn, kn, vn = q.numpy(), k.numpy(), v.numpy()
    params = ac.init_additive_params(3, 4, seed=2)
    mask = tb.causal_mask(4, 5)
    steps = {
        "dot": (tb.dot_product_attention(q, k, v, mask=mask), ac.dot_product_attention),
        "cosine": (tb.cosine_attention(q, k, v, temperature=0.3), ac.cosine_attention),
        "additive": (tb.additive_attention(q, k, v, params=params), ac.additive_attention),
        "scaled": (tb.attend(q, k, v, scale=0.7), ac.scaled_dot_product_attention),
    }
    kwargs = {
        "dot": {"mask": mask.numpy()},
        "cosine": {"temperature": 0.3},
        "additive": {"params": params},
        "scaled": {"scale": 0.7},
    }
    pairs = [(got, fn(qn, kn, vn, **kwargs[name])) for name, (got, fn) in steps.items()]
    for got, expected in pairs:
        assert_steps_close(got, expected, 1e-13)


def test_masks_are_bool_tensors_equal_to_numpy():
    for got, expected in [
        (tb.causal_mask(3, 5), ac.causal_mask(3, 5)),
        (tb.padding_mask(torch.tensor([True, False, True]), 2), ac.padding_mask([1, 0, 1], 2)),
        (tb.sliding_window_mask(5, 2), ac.sliding_window_mask(5, 2)),
        (tb.prefix_lm_mask(4, 2), ac.prefix_lm_mask(4, 2)),
    ]:
        assert got.dtype == torch.bool
        np.testing.assert_array_equal(got.numpy(), expected)
    assert tb.combine_masks(None) is None
    with pytest.raises(ac.AttentionInputError, match="cannot be combined"):
        tb.combine_masks(tb.causal_mask(3), tb.causal_mask(4))


def test_multi_head_matches_numpy_and_nn_multihead_attention():
    params = ac.init_multi_head_params(8, 2, seed=3)
    x_q, x_kv = rand(2, 5, 8, seed=7), rand(2, 6, 8, seed=8)
    mask = tb.causal_mask(5, 6)
    steps = tb.multi_head_attention(x_q, x_kv, params=tb.to_torch(params), num_heads=2, mask=mask)
    assert isinstance(steps, ac.MultiHeadSteps)
    reference = ac.multi_head_attention(
        x_q.numpy(), x_kv.numpy(), params=params, num_heads=2, mask=mask.numpy()
    )
    as_np = tb.to_numpy(steps)
    for name in ("q", "k", "v", "q_heads", "k_heads", "v_heads", "concat", "output"):
        np.testing.assert_allclose(getattr(as_np, name), getattr(reference, name), rtol=1e-13)
    assert_steps_close(steps.attention, reference.attention, 1e-13)
    # NumPy parameters are accepted too and moved to the input's device and dtype.
    again = tb.multi_head_attention(x_q.float(), x_kv.float(), params=params, num_heads=2)
    assert again.output.dtype == torch.float32
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    p = tb.to_torch(params)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([p.w_q, p.w_k, p.w_v]))
        mha.in_proj_bias.copy_(torch.cat([p.b_q, p.b_k, p.b_v]))
        mha.out_proj.weight.copy_(p.w_o)
        mha.out_proj.bias.copy_(p.b_o)
        out, weights = mha(x_q, x_kv, x_kv, attn_mask=~mask, average_attn_weights=False)
    torch.testing.assert_close(steps.output, out, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(steps.attention.weights, weights, rtol=1e-12, atol=1e-13)


def test_split_merge_heads():
    x = rand(2, 3, 6)
    heads = tb.split_heads(x, 3)
    np.testing.assert_array_equal(heads.numpy(), ac.split_heads(x.numpy(), 3))
    torch.testing.assert_close(tb.merge_heads(heads), x, rtol=0, atol=0)


def test_gradients_flow_through_every_step():
    q = rand(3, 4, seed=9).requires_grad_()
    k, v = rand(3, 4, seed=10), rand(3, 2, seed=11)
    steps = tb.scaled_dot_product_attention(q, k, v, mask=tb.causal_mask(3))
    steps.output.sum().backward()
    q2 = q.detach().clone().requires_grad_()
    F.scaled_dot_product_attention(q2, k, v, is_causal=True).sum().backward()
    torch.testing.assert_close(q.grad, q2.grad, rtol=1e-12, atol=1e-14)


def test_to_torch_and_to_numpy_round_trip():
    params = ac.init_multi_head_params(4, 2, seed=0)
    tp = tb.to_torch(params, dtype=torch.float32)
    assert isinstance(tp, ac.MultiHeadParams) and tp.w_q.dtype == torch.float32
    back = tb.to_numpy(tb.to_torch(params))
    np.testing.assert_array_equal(back.w_o, params.w_o)
    assert tb.to_torch([[1, 2]]).dtype == torch.float64
    assert tb.to_torch(np.array([True])).dtype == torch.bool


def test_torch_backend_reexports_the_shared_functions():
    for name in ("softmax", "scaled_dot_product_attention", "multi_head_attention", "attend"):
        assert getattr(tb, name) is getattr(ac, name)


def test_numpy_masks_and_parameters_join_tensors_and_rope_runs_on_tensors():
    q, k, v = rand(4, 6, seed=12), rand(4, 6, seed=13), rand(4, 2, seed=14)
    steps = ac.scaled_dot_product_attention(q, k, v, mask=ac.causal_mask(4))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(steps.output, expected, rtol=1e-13, atol=1e-14)
    # RoPE on tensors: rot(q)·rot(k) depends on m - n only, and equals the NumPy computation.
    scores = ac.rope_scores(q, k, q_positions=[5, 6, 7, 8], k_positions=[5, 6, 7, 8])
    assert isinstance(scores, torch.Tensor)
    np.testing.assert_allclose(scores.numpy(), ac.rope_scores(q.numpy(), k.numpy()), rtol=1e-12)


BAD_INPUTS = [
    (
        "K has 3 columns but Q has 2",
        lambda a: ac.scaled_dot_product_attention(
            a(np.ones((2, 2))), a(np.ones((2, 3))), a(np.ones((2, 1)))
        ),
    ),
    (
        "contains nan",
        lambda a: ac.scaled_dot_product_attention(
            a(np.full((2, 2), np.nan)), a(np.ones((2, 2))), a(np.ones((2, 1)))
        ),
    ),
    (
        "must be boolean",
        lambda a: ac.scaled_dot_product_attention(
            a(np.ones((2, 2))), a(np.ones((2, 2))), a(np.ones((2, 1))), mask=a(np.ones((2, 2)))
        ),
    ),
    (
        "K has 2 rows but V has 3",
        lambda a: ac.cosine_attention(a(np.ones((2, 2))), a(np.ones((2, 2))), a(np.ones((3, 1)))),
    ),
    (
        "does not divide",
        lambda a: ac.multi_head_attention(
            a(np.ones((2, 8))), params=ac.init_multi_head_params(8, 2), num_heads=3
        ),
    ),
    ("axis 2 does not exist", lambda a: ac.softmax(a(np.ones((2, 2))), axis=2)),
    ("cannot be combined", lambda a: ac.combine_masks(a(ac.causal_mask(3)), a(ac.causal_mask(4)))),
    ("width must be even", lambda a: ac.apply_rotary(a(np.ones((2, 3))))),
]


@pytest.mark.parametrize(("expected", "call"), BAD_INPUTS, ids=[e for e, _ in BAD_INPUTS])
def test_bad_input_messages_are_the_same_for_numpy_and_torch(expected, call):
    messages = []
    for to_array in (np.asarray, torch.from_numpy):
        with pytest.raises(ac.AttentionInputError, match=expected) as info:
            call(to_array)
        messages.append(str(info.value))
    # dtypes print differently (float64 / torch.float64); everything else is the same text.
    assert messages[0] == messages[1].replace("torch.", "")


def test_torch_only_errors():
    with pytest.raises(ac.AttentionInputError, match="AdditiveParams stay NumPy"):
        tb.to_torch(ac.init_additive_params(2, 2))
    with ac.max_elements(10), pytest.raises(ac.AttentionInputError, match="score matrix"):
        tb.scaled_dot_product_attention(torch.ones(4, 2), torch.ones(4, 2), torch.ones(4, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_results_stay_on_device_and_match_cpu(dtype):
    q, k, v = (rand(2, 4, 5, 8, seed=s, dtype=dtype, device="cuda") for s in (1, 2, 3))
    mask = tb.causal_mask(5, device="cuda")
    steps = tb.scaled_dot_product_attention(q, k, v, mask=mask)
    assert steps.output.device.type == "cuda" and steps.fully_masked.device.type == "cuda"
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    cpu = ac.scaled_dot_product_attention(
        q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), mask=mask.cpu().numpy()
    )
    assert_steps_close(steps, cpu, tol)
    torch.testing.assert_close(
        steps.output, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=tol, atol=tol
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_multi_head_moves_numpy_params_to_the_device():
    params = ac.init_multi_head_params(8, 2, seed=1)
    x = rand(2, 5, 8, device="cuda")
    steps = tb.multi_head_attention(x, params=params, num_heads=2, mask=ac.causal_mask(5))
    assert steps.output.device.type == "cuda"
    cpu = ac.multi_head_attention(
        x.cpu().numpy(), params=params, num_heads=2, mask=ac.causal_mask(5)
    )
    np.testing.assert_allclose(tb.to_numpy(steps).output, cpu.output, rtol=1e-12, atol=1e-13)
