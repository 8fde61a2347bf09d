"""KV-cache decoding against full causal attention, torch SDPA and a step worked by hand."""

import math
import pickle

import numpy as np
import pytest

from attention_core import (
    AttentionInputError,
    KVCache,
    causal_mask,
    decode_step,
    incremental_causal_attention,
    scaled_dot_product_attention,
)
from tests.test_chunked import random_qkv, torch_sdpa


def test_incremental_decoding_equals_full_causal_attention():
    q, k, v = random_qkv(11, 11, d_k=6, d_v=3, batch=(2,), dtype=np.float64, seed=14)
    decoded = incremental_causal_attention(q, k, v)
    full = scaled_dot_product_attention(q, k, v, mask=causal_mask(11))
    # Equal up to the order of float additions (the full rows also add the masked zeros).
    np.testing.assert_allclose(decoded.output, full.output, atol=1e-14, rtol=0)
    np.testing.assert_allclose(decoded.weights, full.weights, atol=1e-15, rtol=0)
    np.testing.assert_allclose(
        decoded.output, torch_sdpa(q, k, v, is_causal=True), atol=1e-13, rtol=0
    )
    assert decoded.cache.length == 11
    np.testing.assert_array_equal(decoded.cache.keys, k)
    np.testing.assert_array_equal(decoded.cache.values, v)


def test_prompt_then_one_token_at_a_time_equals_full_causal():
    # A prompt of 4 positions in one step (bottom-right causal inside it), then 3 single steps.
    q, k, v = random_qkv(7, 7, dtype=np.float64, seed=15)
    step = decode_step(None, q[:4], k[:4], v[:4])
    assert step.position == 0 and step.cache.length == 4
    outputs = [step.output]
    for t in range(4, 7):
        step = decode_step(step.cache, q[t : t + 1], k[t : t + 1], v[t : t + 1])
        assert step.position == t and step.cache.length == t + 1
        assert step.attention.weights.shape == (1, t + 1)
        outputs.append(step.output)
    full = scaled_dot_product_attention(q, k, v, mask=causal_mask(7))
    np.testing.assert_allclose(np.concatenate(outputs), full.output, atol=1e-14, rtol=0)


def test_decode_step_hides_keys_on_top_of_the_causal_mask():
    # A prompt of 5 with key 1 hidden, then one step with keys 1 and 3 hidden: the same as
    # causal attention over all positions with those columns blocked as well.
    q, k, v = random_qkv(6, 6, dtype=np.float64, seed=16)
    attend = np.array([True, False, True, True, True])
    step = decode_step(None, q[:5], k[:5], v[:5], attend=attend)
    blocked = causal_mask(5) & attend[None, :]
    full = scaled_dot_product_attention(q[:5], k[:5], v[:5], mask=blocked)
    np.testing.assert_allclose(step.output, full.output, atol=1e-14, rtol=0)
    assert np.all(step.attention.weights[:, 1] == 0)
    later = np.array([True, False, True, False, True, True])
    one = decode_step(step.cache, q[5:], k[5:], v[5:], attend=later)
    expected = scaled_dot_product_attention(q[5:], k, v, mask=later[None, :])
    np.testing.assert_allclose(one.output, expected.output, atol=1e-14, rtol=0)


def test_a_decode_step_by_hand():
    # Cache holds keys (1, 0), (0, 1) and values 2, 4; the new token has q = k = (2, 0), v = 6.
    cache = KVCache([[1.0, 0.0], [0.0, 1.0]], [[2.0], [4.0]])
    step = decode_step(cache, [[2.0, 0.0]], [[2.0, 0.0]], [[6.0]], scale=1.0)
    # Scores q·k = 2, 0, 4 -> weights ∝ e², 1, e⁴; output = (2e² + 4 + 6e⁴) / (e² + 1 + e⁴).
    e2, e4 = math.exp(2), math.exp(4)
    np.testing.assert_allclose(step.attention.scores, [[2.0, 0.0, 4.0]])
    assert step.output[0, 0] == pytest.approx((2 * e2 + 4 + 6 * e4) / (e2 + 1 + e4), rel=1e-14)
    # append returns a new cache; the old one is unchanged.
    assert cache.length == 2 and step.cache.length == 3


def test_kv_cache_grows_in_place_and_earlier_caches_keep_their_rows():
    rng = np.random.default_rng(21)
    k, v = rng.normal(size=(2, 30, 4)), rng.normal(size=(2, 30, 3))
    caches = [KVCache(k[:, :5], v[:, :5])]
    for t in range(5, 30):
        caches.append(caches[-1].append(k[:, t : t + 1], v[:, t : t + 1]))
    # Every cache of the chain still holds exactly its own prefix (the one-line reference).
    for cache in caches:
        n = cache.length
        np.testing.assert_array_equal(cache.keys, k[:, :n])
        np.testing.assert_array_equal(cache.values, v[:, :n])
        assert cache.keys.nbytes + cache.values.nbytes == 2 * n * (4 + 3) * 8
        assert not cache.keys.flags.writeable and not cache.values.flags.writeable
    # 25 appends to the newest cache took 1 copy, not 25: the first buffer has 16 rows, the
    # 17th row moves everything into one of twice the 17 rows needed.
    buffers = {id(c._store) for c in caches}
    assert len(buffers) == 2
    assert caches[-1].reserved_bytes == 2 * 34 * (4 + 3) * 8


def test_kv_cache_branching_copies_and_leaves_both_branches_right():
    rng = np.random.default_rng(22)
    k, v = rng.normal(size=(3, 2)), rng.normal(size=(3, 1))
    other_k, other_v = rng.normal(size=(1, 2)), rng.normal(size=(1, 1))
    prefix = KVCache(k[:2], v[:2])
    first = prefix.append(k[2:], v[2:])
    second = prefix.append(other_k, other_v)  # row 2 is taken: a copy, not an overwrite
    np.testing.assert_array_equal(first.keys, k)
    np.testing.assert_array_equal(second.keys, np.concatenate([k[:2], other_k]))
    np.testing.assert_array_equal(second.values, np.concatenate([v[:2], other_v]))
    assert first._store is prefix._store and second._store is not prefix._store
    # A pickled cache is the same rows in a buffer of its own.
    copy = pickle.loads(pickle.dumps(first))
    np.testing.assert_array_equal(copy.keys, k)
    assert copy._store is not first._store and copy.append(other_k, other_v).length == 4


def test_a_cache_prefix_is_a_view_that_copies_before_it_grows():
    rng = np.random.default_rng(24)
    k, v = rng.normal(size=(4, 2)), rng.normal(size=(4, 1))
    whole = KVCache(k[:1], v[:1]).append(k[1:], v[1:])
    first_two = whole.prefix(2)
    np.testing.assert_array_equal(first_two.keys, k[:2])
    np.testing.assert_array_equal(first_two.values, v[:2])
    assert np.shares_memory(first_two.keys, whole.keys) and first_two.prefix(2).length == 2
    # Rows 2 and 3 are taken by `whole`: growing the prefix copies, `whole` keeps its rows.
    other = rng.normal(size=(1, 2))
    grown = first_two.append(other, v[:1])
    np.testing.assert_array_equal(grown.keys, np.concatenate([k[:2], other]))
    np.testing.assert_array_equal(whole.keys, k)
    assert KVCache(k, v).prefix(0).length == 0
    with pytest.raises(AttentionInputError, match="holds 4 positions, not 5"):
        whole.prefix(5)


def test_unchecked_decode_step_is_the_same_formula():
    q, k, v = random_qkv(6, 6, d_k=4, d_v=3, batch=(2,), dtype=np.float64, seed=23)
    checked = decode_step(None, q[:, :5], k[:, :5], v[:, :5])
    trusted = decode_step(None, q[:, :5], k[:, :5], v[:, :5], checked=False)
    np.testing.assert_array_equal(checked.attention.weights, trusted.attention.weights)
    step = decode_step(checked.cache, q[:, 5:], k[:, 5:], v[:, 5:], scale=0.5)
    fast = decode_step(trusted.cache, q[:, 5:], k[:, 5:], v[:, 5:], scale=0.5, checked=False)
    np.testing.assert_array_equal(step.attention.weights, fast.attention.weights)
    np.testing.assert_array_equal(step.output, fast.output)
    expected = scaled_dot_product_attention(q[:, 5:], k, v, scale=0.5)
    np.testing.assert_allclose(fast.output, expected.output, atol=1e-15, rtol=0)


def test_incremental_decoding_reports_overflow_once():
    big = np.full((3, 2), 1e20, dtype=np.float32)
    with pytest.raises(AttentionInputError, match="overflowed"):
        incremental_causal_attention(big, big, np.ones((3, 1), dtype=np.float32))


def test_kv_cache_errors():
    with pytest.raises(AttentionInputError, match="3 keys but 2 values"):
        KVCache(np.ones((3, 2)), np.ones((2, 2)))
    cache = KVCache(np.ones((2, 2)), np.ones((2, 3)))
    with pytest.raises(AttentionInputError, match="new keys have 4 columns"):
        cache.append(np.ones((1, 4)), np.ones((1, 3)))
    with pytest.raises(AttentionInputError, match="2 new queries but 1 new keys"):
        decode_step(cache, np.ones((2, 2)), np.ones((1, 2)), np.ones((1, 3)))
    with pytest.raises(AttentionInputError, match="must be a KVCache"):
        decode_step("cache", np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 3)))
    with pytest.raises(AttentionInputError, match="decoding is self-attention"):
        incremental_causal_attention(np.ones((2, 2)), np.ones((3, 2)), np.ones((3, 2)))
