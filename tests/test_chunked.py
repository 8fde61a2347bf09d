"""Chunked attention (online softmax) against torch SDPA and by hand."""

import math
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import (
    AttentionInputError,
    ChunkedAttention,
    causal_mask,
    chunked_attention,
    padding_mask,
    scaled_dot_product_attention,
)
from attention_core.chunked import online_softmax_weights


def random_qkv(q_len, k_len, d_k=8, d_v=5, batch=(), dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((*batch, q_len, d_k)).astype(dtype)
    k = rng.standard_normal((*batch, k_len, d_k)).astype(dtype)
    v = rng.standard_normal((*batch, k_len, d_v)).astype(dtype)
    return q, k, v


def torch_sdpa(q, k, v, **kwargs):
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in (q, k, v)]
    if isinstance(kwargs.get("attn_mask"), np.ndarray):
        kwargs["attn_mask"] = torch.from_numpy(kwargs["attn_mask"])
    return F.scaled_dot_product_attention(*tensors, **kwargs).numpy()


# --- equal to full attention --------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 7, 16, 23, 64])
@pytest.mark.parametrize(("q_len", "k_len"), [(23, 23), (5, 23), (17, 9)])
def test_equals_torch_sdpa_float32_for_every_block_size(block_size, q_len, k_len):
    # 23 and 9 keys are not multiples of most block sizes: the last block is shorter.
    q, k, v = random_qkv(q_len, k_len, batch=(2, 3))
    result = chunked_attention(q, k, v, block_size=block_size)
    assert result.output.dtype == np.float32
    assert result.output.shape == (2, 3, q_len, 5)
    np.testing.assert_allclose(result.output, torch_sdpa(q, k, v), atol=1e-5, rtol=0)


@pytest.mark.parametrize("block_size", [1, 3, 5, 8, 100])
@pytest.mark.parametrize(("q_len", "k_len"), [(13, 13), (6, 13), (13, 6)])
def test_causal_flag_equals_torch_is_causal(block_size, q_len, k_len):
    # torch's is_causal aligns the triangle top-left also for cross-attention (ones(L, S).tril()).
    q, k, v = random_qkv(q_len, k_len, batch=(2,), seed=1)
    result = chunked_attention(q, k, v, block_size=block_size, causal=True)
    np.testing.assert_allclose(
        result.output, torch_sdpa(q, k, v, is_causal=True), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("block_size", [1, 4, 6, 11])
def test_boolean_mask_equals_torch_attn_mask(block_size):
    q, k, v = random_qkv(9, 11, batch=(2, 2), seed=2)
    rng = np.random.default_rng(3)
    mask = rng.random((2, 1, 9, 11)) < 0.6  # per batch, broadcast over heads
    mask[..., 0] = True  # every query sees at least key 0, so torch gives no NaN
    result = chunked_attention(q, k, v, block_size=block_size, mask=mask)
    np.testing.assert_allclose(
        result.output, torch_sdpa(q, k, v, attn_mask=mask), atol=1e-5, rtol=0
    )


def test_causal_mask_argument_equals_causal_flag_and_combines_with_padding():
    q, k, v = random_qkv(10, 10, seed=4)
    by_mask = chunked_attention(q, k, v, block_size=3, mask=causal_mask(10))
    by_flag = chunked_attention(q, k, v, block_size=3, causal=True)
    np.testing.assert_allclose(by_mask.output, by_flag.output, atol=1e-6, rtol=0)
    # Padding (last 3 keys are padding) AND causal: both rules hold at once.
    both = chunked_attention(q, k, v, block_size=4, mask=padding_mask(7, 10), causal=True)
    reference = scaled_dot_product_attention(q, k, v, mask=causal_mask(10) & padding_mask(7, 10))
    np.testing.assert_allclose(both.output, reference.output, atol=1e-6, rtol=0)


def test_a_padding_row_mask_broadcasts_over_queries():
    q, k, v = random_qkv(4, 9, seed=5)
    valid = np.arange(9)[None, :] < 6  # (1, k_pos): one row shared by every query
    result = chunked_attention(q, k, v, block_size=4, mask=valid)
    np.testing.assert_allclose(
        result.output, torch_sdpa(q, k, v, attn_mask=valid), atol=1e-5, rtol=0
    )


def test_fully_masked_query_gets_zeros_like_the_library_not_nan():
    q, k, v = random_qkv(3, 5, seed=6)
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    result = chunked_attention(q, k, v, block_size=2, mask=mask)
    np.testing.assert_array_equal(result.output[1], 0.0)
    np.testing.assert_array_equal(result.fully_masked, [False, True, False])
    assert result.logsumexp[1] == -np.inf and result.row_sum[1] == 0
    reference = scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(result.output, reference.output, atol=1e-6, rtol=0)


def test_float64_matches_the_one_line_formula_to_rounding():
    q, k, v = random_qkv(12, 31, d_k=16, d_v=4, dtype=np.float64, seed=7)
    s = q @ k.T / math.sqrt(16)
    expected = (
        np.exp(s - s.max(1, keepdims=True))
        / np.exp(s - s.max(1, keepdims=True)).sum(1, keepdims=True)
        @ v
    )
    result = chunked_attention(q, k, v, block_size=5)
    assert result.output.dtype == np.float64
    np.testing.assert_allclose(result.output, expected, atol=1e-13, rtol=0)


def test_custom_scale_and_huge_scores_do_not_overflow():
    # Scores of ±2000 overflow exp() in the textbook softmax; the running max keeps them <= 0.
    q = np.array([[1.0]])
    k = np.array([[2000.0], [-2000.0], [1999.0]])
    v = np.array([[1.0], [5.0], [3.0]])
    result = chunked_attention(q, k, v, block_size=1, scale=1.0)
    # Weights: exp(0), exp(-4000) = 0, exp(-1) over 1 + e⁻¹ -> (1·1 + e⁻¹·3) / (1 + e⁻¹).
    e = math.exp(-1)
    assert result.output[0, 0] == pytest.approx((1 + 3 * e) / (1 + e), rel=1e-14)
    assert result.row_max[0] == 2000.0


def test_logsumexp_row_max_and_row_sum():
    q, k, v = random_qkv(6, 14, dtype=np.float64, seed=8)
    s = q @ k.T / math.sqrt(8)
    result = chunked_attention(q, k, v, block_size=4)
    np.testing.assert_allclose(result.row_max, s.max(axis=1), rtol=1e-15)
    np.testing.assert_allclose(result.logsumexp, np.logaddexp.reduce(s, axis=1), rtol=1e-14)
    np.testing.assert_allclose(
        result.row_sum, np.exp(s - s.max(1, keepdims=True)).sum(1), rtol=1e-14
    )


@settings(max_examples=60, deadline=None)
@given(
    q_len=st.integers(1, 9),
    k_len=st.integers(1, 13),
    block_size=st.integers(1, 15),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_equals_full_attention(q_len, k_len, block_size, causal, seed):
    q, k, v = random_qkv(q_len, k_len, d_k=3, d_v=2, dtype=np.float64, seed=seed)
    mask = causal_mask(q_len, k_len) if causal else None
    full = scaled_dot_product_attention(q, k, v, mask=mask)
    result = chunked_attention(q, k, v, block_size=block_size, causal=causal)
    np.testing.assert_allclose(result.output, full.output, atol=1e-12, rtol=0)
    np.testing.assert_array_equal(result.fully_masked, full.fully_masked)


# --- the per-block state ------------------------------------------------------------------------


def test_hand_worked_online_softmax_when_the_maximum_moves():
    # One query q = 1, keys 1, 3, 2 and scale 1: scores s = (1, 3, 2); values 1, 0, 2.
    q, k, v = [[1.0]], [[1.0], [3.0], [2.0]], [[1.0], [0.0], [2.0]]
    result = chunked_attention(q, k, v, block_size=1, scale=1.0, return_blocks=True)
    first, second, third = result.blocks
    # Block 1 (s=1): m = 1, nothing to re-base (rescale exp(-inf - 1) = 0), l = e⁰ = 1, o = 1·v0.
    assert (first.start, first.stop) == (0, 1)
    assert first.running_max[0] == 1 and first.rescale[0] == 0
    assert first.running_sum[0] == 1 and first.running_output[0, 0] == 1
    # Block 2 (s=3): the max moves 1 -> 3, so old l and o shrink by e^(1-3) = e⁻²;
    # l = e⁻² + e⁰, o = e⁻²·1 + 1·0.
    e2 = math.exp(-2)
    assert second.block_max[0] == 3 and second.running_max[0] == 3
    assert second.rescale[0] == pytest.approx(e2, rel=1e-15)
    assert second.running_sum[0] == pytest.approx(e2 + 1, rel=1e-15)
    assert second.running_output[0, 0] == pytest.approx(e2, rel=1e-15)
    assert second.output[0, 0] == pytest.approx(e2 / (e2 + 1), rel=1e-15)
    # Block 3 (s=2): the max stays 3 (rescale 1); l += e⁻¹, o += e⁻¹·2.
    e1 = math.exp(-1)
    assert third.rescale[0] == 1
    assert third.running_sum[0] == pytest.approx(e2 + 1 + e1, rel=1e-15)
    assert third.running_output[0, 0] == pytest.approx(e2 + 2 * e1, rel=1e-15)
    # Final: (e⁻² + 2e⁻¹) / (1 + e⁻² + e⁻¹), the full softmax-weighted average.
    expected = (e2 + 2 * e1) / (1 + e2 + e1)
    assert result.output[0, 0] == pytest.approx(expected, rel=1e-15)
    assert third.output[0, 0] == result.output[0, 0]


def test_weights_after_each_block_end_at_the_full_softmax():
    q, k, v = random_qkv(3, 10, dtype=np.float64, seed=9)
    result = chunked_attention(q, k, v, block_size=4, return_blocks=True)
    assert [(b.start, b.stop) for b in result.blocks] == [(0, 4), (4, 8), (8, 10)]
    weights = online_softmax_weights(result)
    assert weights.shape == (3, 3, 10)
    # Keys not read yet are NaN; the keys read so far share a denominator, so their weights sum
    # to 1 and their ratios never change.
    assert np.isnan(weights[0, :, 4:]).all() and np.isnan(weights[1, :, 8:]).all()
    np.testing.assert_allclose(weights[0, :, :4].sum(-1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(weights[1, :, :8].sum(-1), 1.0, rtol=1e-14)
    ratio_0 = weights[0, :, :4] / weights[0, :, :1]
    ratio_2 = weights[2, :, :4] / weights[2, :, :1]
    np.testing.assert_allclose(ratio_0, ratio_2, rtol=1e-13)
    full = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(weights[-1], full.weights, atol=1e-15)
    # Each block's output estimate is that partial softmax times the values read so far.
    np.testing.assert_allclose(result.blocks[1].output, weights[1, :, :8] @ v[:8], atol=1e-14)


def test_blocks_are_kept_only_on_request_and_results_pickle():
    q, k, v = random_qkv(2, 5, seed=10)
    plain = chunked_attention(q, k, v, block_size=2)
    assert plain.blocks == ()
    with pytest.raises(AttentionInputError, match="return_blocks=True"):
        online_softmax_weights(plain)
    restored = pickle.loads(
        pickle.dumps(chunked_attention(q, k, v, block_size=2, return_blocks=True))
    )
    assert isinstance(restored, ChunkedAttention)
    assert len(restored.blocks) == 3 and restored.block_size == 2
    np.testing.assert_array_equal(restored.output, plain.output)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block_size": 0}, "block_size .* at least 1"),
        ({"block_size": 2.5}, "whole number"),
        ({"block_size": 2, "mask": np.ones((3, 4), dtype=bool)}, "mask has shape"),
        ({"block_size": 2, "scale": float("nan")}, "finite"),
    ],
)
def test_bad_arguments_give_learner_messages(kwargs, message):
    q, k, v = random_qkv(2, 5, seed=11)
    with pytest.raises(AttentionInputError, match=message):
        chunked_attention(q, k, v, **kwargs)


def test_mismatched_widths_and_overflow_are_reported():
    with pytest.raises(AttentionInputError, match="same width d_k"):
        chunked_attention(np.ones((2, 3)), np.ones((4, 2)), np.ones((4, 2)), block_size=2)
    big = np.full((1, 2), 1e20, dtype=np.float32)
    with pytest.raises(AttentionInputError, match="overflowed"):
        chunked_attention(big, big, big, block_size=1)


# --- torch version ------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 5, 16, 64])
def test_torch_chunked_equals_torch_sdpa_on_cpu(block_size, causal):
    q, k, v = (torch.from_numpy(a) for a in random_qkv(19, 19, batch=(2,), seed=12))
    out = chunked_attention(q, k, v, block_size=block_size, causal=causal).output
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


@pytest.mark.gpu
def test_torch_chunked_equals_torch_sdpa_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False")
    q, k, v = (torch.from_numpy(a).cuda() for a in random_qkv(33, 33, seed=13))
    out = chunked_attention(q, k, v, block_size=8, causal=True).output
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_torch_chunked_keeps_every_field_on_tensors_and_gradients_flow():
    q, k, v = (torch.from_numpy(a).double() for a in random_qkv(7, 9, batch=(2,), seed=15))
    q.requires_grad_()
    mask = ~np.eye(7, 9, dtype=bool)  # a NumPy mask joins the tensors
    got = chunked_attention(q, k, v, block_size=4, mask=mask, return_blocks=True)
    assert all(isinstance(x, torch.Tensor) for x in (got.output, got.logsumexp, got.row_max))
    # logsumexp = log Σ_j exp(s_j) over the visible keys, against torch's own logsumexp.
    scores = (q @ k.mT / math.sqrt(q.shape[-1])).masked_fill(~torch.from_numpy(mask), -math.inf)
    torch.testing.assert_close(got.logsumexp, torch.logsumexp(scores, -1), rtol=1e-12, atol=0)
    got.output.sum().backward()
    q2 = q.detach().clone().requires_grad_()
    F.scaled_dot_product_attention(q2, k, v, attn_mask=torch.from_numpy(mask)).sum().backward()
    torch.testing.assert_close(q.grad, q2.grad, rtol=1e-10, atol=1e-12)
