"""The KV-cache formulas (attention_core/kv_cache.py) against bytes worked out by hand from each
model's config.json, the relations between MHA, GQA, MQA and MLA, and the quantizer's bound.

The real model (what the cache formula says against LlamaCache.bytes_used, the codecs on
SmolLM2) is tested in test_kv_experiments.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention_core.kv_cache import (
    DEEPSEEK_V2,
    KNOWN_SHAPES,
    LLAMA_3_8B,
    MISTRAL_7B,
    SMOLLM2_135M,
    VARIANTS,
    AttentionShape,
    absmax_quantize,
    cache_bytes,
    cached_tokens,
    kv_bytes_per_token,
    latent_bytes_per_token,
    pool_kv_heads,
    variant_bytes_per_token,
)
from attention_core.validation import AttentionInputError

KIB = 1024

# ----------------------------------------------------------------------------- bytes per token


def test_llama_3_8b_caches_128_kib_per_token_in_bfloat16():
    # K and V × 32 layers × 8 KV heads × 128 numbers × 2 bytes
    assert variant_bytes_per_token(LLAMA_3_8B, "GQA") == 2 * 32 * 8 * 128 * 2 == 128 * KIB
    assert kv_bytes_per_token(32, 8, 128) == 128 * KIB  # bfloat16 is the default


def test_mha_and_mqa_scale_the_gqa_cache_by_the_group_size():
    gqa = variant_bytes_per_token(LLAMA_3_8B, "GQA")
    # 32 query heads in 8 groups: MHA keeps 4× as many K/V heads, MQA 1/8 as many.
    assert variant_bytes_per_token(LLAMA_3_8B, "MHA") == 4 * gqa == 512 * KIB
    assert variant_bytes_per_token(LLAMA_3_8B, "MQA") == gqa // 8 == 16 * KIB
    smollm = {v: variant_bytes_per_token(SMOLLM2_135M, v) for v in VARIANTS}
    # 2 × 30 layers × 64 × 2 bytes = 7,680 bytes per KV head.
    assert smollm == {"MHA": 9 * 7680, "GQA": 3 * 7680, "MQA": 7680, "MLA": None}


def test_deepseek_v2_caches_a_latent_and_a_rope_key_per_layer():
    # (kv_lora_rank 512 + qk_rope_head_dim 64) × 60 layers × 2 bytes
    mla = variant_bytes_per_token(DEEPSEEK_V2, "MLA")
    assert mla == 576 * 60 * 2 == 69_120
    assert latent_bytes_per_token(60, 512, 64) == mla  # bfloat16 is the default
    mha = variant_bytes_per_token(DEEPSEEK_V2, "MHA")
    assert mha == 2 * 60 * 128 * 128 * 2 == 3_932_160  # 3.75 MiB per token
    mqa = variant_bytes_per_token(DEEPSEEK_V2, "MQA")
    # The paper's Table 1: MLA caches as much as GQA with 2.25 groups, i.e. 2.25 MQA caches.
    assert mla == 2.25 * mqa
    assert variant_bytes_per_token(DEEPSEEK_V2, "GQA") is None


def test_the_known_shapes_follow_their_config_json():
    numbers = {s.name: (s.layers, s.heads, s.kv_heads, s.d_head, s.bits) for s in KNOWN_SHAPES}
    assert numbers == {
        "SmolLM2-135M": (30, 9, 3, 64, 16),
        "Llama-3-8B": (32, 32, 8, 128, 16),
        "Mistral-7B-v0.1": (32, 32, 8, 128, 16),
        "DeepSeek-V2": (60, 128, None, 128, 16),
    }
    assert MISTRAL_7B.window == 4096 and LLAMA_3_8B.window is None
    assert (DEEPSEEK_V2.latent_dim, DEEPSEEK_V2.rope_dim) == (512, 64)
    assert [s.published for s in KNOWN_SHAPES] == ["GQA", "GQA", "GQA", "MLA"]


def test_a_latent_without_a_rope_key_and_other_bits():
    shape = AttentionShape("latent only", layers=2, heads=4, d_head=8, published="MLA",
                           latent_dim=16, bits=32)  # fmt: skip
    assert variant_bytes_per_token(shape, "MLA") == 2 * 16 * 4
    assert variant_bytes_per_token(shape, "MHA") == 2 * 2 * 4 * 8 * 4
    assert variant_bytes_per_token(shape, "MQA") == 2 * 2 * 1 * 8 * 4


def test_quantized_vectors_carry_their_scale():
    # SmolLM2's cache at 4 bits with a float32 scale per vector: 64 × 4 + 32 bits = 36 bytes.
    assert kv_bytes_per_token(30, 3, 64, bits=4, scale_bits=32) == 2 * 30 * 3 * 36 == 6480
    assert kv_bytes_per_token(30, 3, 64, bits=8, scale_bits=32) == 2 * 30 * 3 * 68 == 12240
    assert kv_bytes_per_token(30, 3, 64, bits=32) == 46_080  # float32, as this app caches
    assert kv_bytes_per_token(30, 3, 64, bits=32, scale_bits=0) == 46_080


@pytest.mark.parametrize(
    ("d_head", "bits", "expected"),
    [(1, 1, 1), (1, 3, 1), (1, 4, 1), (1, 5, 2), (2, 4, 2), (3, 1, 1), (4, 2, 2)],
)
def test_bytes_are_rounded_up_to_whole_bytes(d_head, bits, expected):
    # One layer, one KV head: 2 · d_head · bits bits.
    assert kv_bytes_per_token(1, 1, d_head, bits=bits) == expected


@pytest.mark.parametrize(
    ("latent", "rope", "bits", "expected"),
    [(1, 0, 4, 1), (1, 1, 4, 1), (2, 1, 4, 2), (1, 0, 1, 1), (8, 0, 1, 1), (8, 1, 1, 2)],
)
def test_latent_bytes_are_rounded_up_to_whole_bytes(latent, rope, bits, expected):
    assert latent_bytes_per_token(1, latent, rope, bits=bits) == expected


def test_bytes_refuse_impossible_shapes():
    with pytest.raises(AttentionInputError, match="layers must be at least 1"):
        kv_bytes_per_token(0, 1, 64)
    with pytest.raises(AttentionInputError, match="kv_heads must be at least 1"):
        kv_bytes_per_token(1, 0, 64)
    with pytest.raises(AttentionInputError, match="d_head must be at least 1"):
        kv_bytes_per_token(1, 1, 0)
    with pytest.raises(AttentionInputError, match="bits must be at least 1"):
        kv_bytes_per_token(1, 1, 64, bits=0)
    with pytest.raises(AttentionInputError, match="scale_bits must be at least 0"):
        kv_bytes_per_token(1, 1, 64, scale_bits=-1)
    with pytest.raises(AttentionInputError, match="layers must be at least 1"):
        latent_bytes_per_token(0, 512, 64)
    with pytest.raises(AttentionInputError, match="latent_dim must be at least 1"):
        latent_bytes_per_token(1, 0, 64)
    with pytest.raises(AttentionInputError, match="rope_dim must be at least 0"):
        latent_bytes_per_token(1, 512, -1)
    with pytest.raises(AttentionInputError, match="bits must be at least 1"):
        latent_bytes_per_token(1, 512, 64, bits=0)
    with pytest.raises(AttentionInputError, match="'GQB' is not one of MHA, GQA, MQA, MLA"):
        variant_bytes_per_token(LLAMA_3_8B, "GQB")


# ----------------------------------------------------------------------------- context and window


def test_a_sliding_window_caps_the_cache():
    per_token = variant_bytes_per_token(MISTRAL_7B, "GQA")
    assert cache_bytes(per_token, 32_768, MISTRAL_7B.window) == 4096 * 128 * KIB  # 512 MiB
    assert cache_bytes(per_token, 32_768) == 32_768 * 128 * KIB  # 4 GiB without the window
    assert cache_bytes(per_token, 1000, 4096) == 1000 * per_token
    assert [cached_tokens(n, 4096) for n in (0, 1, 4095, 4096, 4097)] == [0, 1, 4095, 4096, 4096]
    assert cached_tokens(5, 1) == 1 and cached_tokens(5) == 5 and cached_tokens(0) == 0
    assert cache_bytes(0, 100) == 0 and cache_bytes(7, 3) == 21


def test_context_and_window_are_checked():
    with pytest.raises(AttentionInputError, match="context must be at least 0"):
        cached_tokens(-1)
    with pytest.raises(AttentionInputError, match="window must be at least 1"):
        cached_tokens(10, 0)
    with pytest.raises(AttentionInputError, match="per_token must be at least 0"):
        cache_bytes(-1, 10)


# ----------------------------------------------------------------------------- quantization


def test_absmax_quantization_by_hand():
    x = np.array([[0.7, -0.26, 0.12], [0.0, 0.0, 0.0]], dtype=np.float32)
    four = absmax_quantize(x, 4)  # q_max = 7, s = 0.7 / 7 = 0.1 for the first vector
    np.testing.assert_array_equal(four.codes, [[7, -3, 1], [0, 0, 0]])
    np.testing.assert_allclose(four.scale, [[0.1], [0.0]], rtol=1e-6)
    np.testing.assert_allclose(four.dequantized, [[0.7, -0.3, 0.1], [0, 0, 0]], rtol=1e-6)
    eight = absmax_quantize(x, 8)  # q_max = 127
    np.testing.assert_array_equal(eight.codes, [[127, -47, 22], [0, 0, 0]])  # -47.17, 21.77
    two = absmax_quantize(x, 2)  # q_max = 1: each number becomes -s, 0 or s
    np.testing.assert_array_equal(two.codes, [[1, 0, 0], [0, 0, 0]])
    assert four.codes.dtype == np.int8 and four.dequantized.dtype == np.float32


def test_each_vector_along_the_last_axis_has_its_own_scale():
    x = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)  # (kv_head, n, d_head)
    quantized = absmax_quantize(x, 8)
    assert quantized.scale.shape == (2, 3, 1)
    np.testing.assert_allclose(quantized.scale[..., 0], x.max(axis=-1) / 127, rtol=1e-6)
    assert np.all(np.abs(quantized.codes).max(axis=-1) == 127)


# Vectors of normal floats: a subnormal max (< 1.2e-38) makes a scale max / q_max that float32
# cannot resolve (it underflows to 0 at 1e-45), outside what the docstring promises.
@given(
    arrays(np.float32, (3, 5, 8), elements=st.floats(-100, 100, width=32, allow_subnormal=False)),
    st.sampled_from([2, 3, 4, 8]),
)
def test_quantization_error_is_at_most_half_a_step(x, bits):
    with np.errstate(divide="raise", invalid="raise"):  # no 0 / 0 for a zero vector
        quantized = absmax_quantize(x, bits)
    q_max = 2 ** (bits - 1) - 1
    assert np.all(np.abs(quantized.codes) <= q_max)
    # The largest entry of every non-zero vector lands on ±q_max exactly.
    nonzero = np.abs(x).max(axis=-1) > 0
    assert np.all(np.abs(quantized.codes).max(axis=-1)[nonzero] == q_max)
    error = np.abs(x - quantized.dequantized)
    assert np.all(error <= quantized.scale / 2 * (1 + 1e-5) + 1e-30)
    np.testing.assert_allclose(quantized.dequantized, quantized.codes * quantized.scale)


def test_eight_bits_are_finer_than_four():
    x = np.random.default_rng(0).normal(size=(3, 50, 64)).astype(np.float32)
    error8 = np.abs(absmax_quantize(x, 8).dequantized - x).mean()
    error4 = np.abs(absmax_quantize(x, 4).dequantized - x).mean()
    assert 10 < error4 / error8 < 25  # the steps' ratio is 127 / 7 ≈ 18


def test_quantization_bits_are_checked():
    with pytest.raises(AttentionInputError, match="bits must be at least 2"):
        absmax_quantize(np.ones(4), 1)
    with pytest.raises(AttentionInputError, match="bits must be 2 to 8"):
        absmax_quantize(np.ones(4), 9)


# ----------------------------------------------------------------------------- pooling


def test_pooling_gives_every_head_the_heads_mean():
    x = np.array([[[1.0, 2.0]], [[3.0, 4.0]], [[5.0, 9.0]]])  # (kv_head 3, n 1, d 2)
    pooled = pool_kv_heads(x)
    assert pooled.shape == (3, 1, 2)
    np.testing.assert_array_equal(pooled, [[[3.0, 5.0]]] * 3)
    rng = np.random.default_rng(1)
    y = rng.normal(size=(3, 7, 4))
    np.testing.assert_allclose(pool_kv_heads(y), np.repeat(y.mean(0, keepdims=True), 3, axis=0))


def test_pooling_needs_kv_heads_positions_and_width():
    with pytest.raises(AttentionInputError, match=r"\(kv_head, n, d_head\)"):
        pool_kv_heads(np.ones((3, 4)))
