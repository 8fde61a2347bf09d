"""Mask builders: hand-written grids, torch's is_causal convention, and combination rules."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from attention_core import (
    AttentionInputError,
    causal_mask,
    combine_masks,
    mask_to_additive,
    max_elements,
    padding_mask,
    prefix_lm_mask,
    scaled_dot_product_attention,
    sink_window_mask,
    sliding_window_mask,
)

T, F_ = True, False


def test_causal_mask_hand_written():
    assert causal_mask(3).dtype == np.bool_
    np.testing.assert_array_equal(causal_mask(3), [[T, F_, F_], [T, T, F_], [T, T, T]])


@pytest.mark.parametrize(("q_len", "k_len"), [(4, 4), (3, 5), (5, 3), (1, 6), (6, 1)])
def test_causal_mask_follows_torch_is_causal(q_len, k_len):
    # torch documents is_causal as `ones(L, S).tril(diagonal=0)`: top-left aligned.
    np.testing.assert_array_equal(
        causal_mask(q_len, k_len), torch.ones(q_len, k_len, dtype=torch.bool).tril().numpy()
    )
    # ...and the attention results agree with torch's own is_causal path.
    rng = np.random.default_rng(q_len * 10 + k_len)
    q, k, v = rng.normal(size=(q_len, 4)), rng.normal(size=(k_len, 4)), rng.normal(size=(k_len, 3))
    expected = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), is_causal=True
    ).numpy()
    got = scaled_dot_product_attention(q, k, v, mask=causal_mask(q_len, k_len)).output
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_padding_mask_from_length_and_from_flags():
    # Two real tokens out of four keys: every query sees keys 0 and 1 only.
    expected = np.array([[T, T, F_, F_]] * 3)
    np.testing.assert_array_equal(padding_mask(2, 3, k_len=4), expected)
    np.testing.assert_array_equal(padding_mask([True, True, False, False], 3), expected)
    np.testing.assert_array_equal(padding_mask([1, 1, 0, 0], 3), expected)
    # Default k_len = q_len (self-attention).
    np.testing.assert_array_equal(padding_mask(1, 2), [[T, F_], [T, F_]])


def test_padding_mask_zeroes_padded_values_like_torch_key_padding():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 2)), rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    mask = padding_mask(3, 3, k_len=5)
    # Dropping the padded keys entirely must give the same answer.
    trimmed = scaled_dot_product_attention(q, k[:3], v[:3]).output
    np.testing.assert_allclose(
        scaled_dot_product_attention(q, k, v, mask=mask).output, trimmed, rtol=1e-14
    )


def test_sliding_window_hand_written():
    # window 2: query i sees keys i-1 and i.
    np.testing.assert_array_equal(
        sliding_window_mask(4, 2),
        [[T, F_, F_, F_], [T, T, F_, F_], [F_, T, T, F_], [F_, F_, T, T]],
    )
    np.testing.assert_array_equal(sliding_window_mask(3, 1), np.eye(3, dtype=bool))
    np.testing.assert_array_equal(sliding_window_mask(5, 5), causal_mask(5))
    np.testing.assert_array_equal(sliding_window_mask(3, 9, k_len=4), causal_mask(3, 4))


def test_sliding_window_matches_definition():
    q_len, k_len, w = 7, 9, 3
    expected = np.array([[i - w + 1 <= j <= i for j in range(k_len)] for i in range(q_len)])
    np.testing.assert_array_equal(sliding_window_mask(q_len, w, k_len), expected)


def test_prefix_lm_hand_written():
    # Prefix of 2: keys 0 and 1 visible to all; afterwards causal.
    np.testing.assert_array_equal(
        prefix_lm_mask(4, 2),
        [[T, T, F_, F_], [T, T, F_, F_], [T, T, T, F_], [T, T, T, T]],
    )
    np.testing.assert_array_equal(prefix_lm_mask(3, 0), causal_mask(3))
    assert prefix_lm_mask(3, 3).all()


def test_combine_masks_is_logical_and_with_broadcasting():
    combined = combine_masks(causal_mask(3), padding_mask(2, 3))
    np.testing.assert_array_equal(combined, [[T, F_, F_], [T, T, F_], [T, T, F_]])
    # A per-batch (batch, 1, k_pos) padding mask broadcasts against a (q_pos, k_pos) mask.
    per_batch = np.array([[[T, T, T]], [[T, F_, F_]]])
    out = combine_masks(per_batch, causal_mask(3))
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out[0], causal_mask(3))
    np.testing.assert_array_equal(out[1], [[T, F_, F_]] * 3)


def test_combine_masks_ignores_none():
    np.testing.assert_array_equal(combine_masks(None, causal_mask(2), None), causal_mask(2))
    assert combine_masks() is None
    assert combine_masks(None, None) is None


def test_combine_masks_rejects_mismatch_and_floats():
    with pytest.raises(AttentionInputError, match="cannot be combined"):
        combine_masks(causal_mask(3), causal_mask(4))
    with pytest.raises(AttentionInputError, match="boolean"):
        combine_masks(np.ones((2, 2)))


def test_mask_to_additive_matches_boolean_masking_in_torch():
    mask = combine_masks(causal_mask(4), padding_mask(3, 4))
    additive = mask_to_additive(mask)
    np.testing.assert_array_equal(additive[1], [0.0, 0.0, -np.inf, -np.inf])
    assert additive.dtype == np.float64
    assert mask_to_additive(mask, fill=-1e9, dtype=np.float32)[0, 1] == np.float32(-1e9)
    rng = np.random.default_rng(4)
    q, k, v = (torch.from_numpy(rng.normal(size=(4, 3))) for _ in range(3))
    with_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(mask))
    with_float = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(additive))
    torch.testing.assert_close(with_float, with_bool, rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: causal_mask(0), "at least 1"),
        (lambda: causal_mask(2.5), "whole number"),
        (lambda: causal_mask(True), "whole number"),
        (lambda: sliding_window_mask(3, 0), "window must be at least 1"),
        (lambda: prefix_lm_mask(3, 4), "longer than the sequence"),
        (lambda: padding_mask(5, 3), "larger than the number of keys"),
        (lambda: padding_mask([0.5, 1.0], 2), "True/False"),
        (lambda: padding_mask([True, False], 2, k_len=3), "one entry per key"),
    ],
)
def test_bad_arguments(call, fragment):
    with pytest.raises(AttentionInputError, match=fragment):
        call()


def test_size_cap():
    with max_elements(100), pytest.raises(AttentionInputError, match="more than the limit"):
        causal_mask(11, 10)
    assert causal_mask(10, 10).shape == (10, 10)


def test_combine_masks_on_tensors_is_torch_logical_and_and_numpy_masks_join():
    causal = torch.ones(4, 6, dtype=torch.bool).tril()
    keep = [True, True, False, True, True, False]  # a list joins the tensor
    got = combine_masks(causal, keep, None)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bool
    torch.testing.assert_close(got, causal & torch.tensor(keep))
    with pytest.raises(AttentionInputError, match="must be boolean"):
        combine_masks(causal, torch.ones(4, 6))


# --- added for the mutation check (make mutate): each kills a mutant the tests above missed ---


def test_padding_mask_edges_by_hand():
    from attention_core.masks import padding_mask
    from attention_core.validation import AttentionInputError

    np.testing.assert_array_equal(padding_mask(1, 1), [[True]])  # one query, one key
    np.testing.assert_array_equal(padding_mask(1, 1, 1), [[True]])
    np.testing.assert_array_equal(padding_mask(0, 2), [[False, False], [False, False]])
    np.testing.assert_array_equal(padding_mask(3, 1, 3), [[True, True, True]])  # no padding
    np.testing.assert_array_equal(padding_mask([True], 2), [[True], [True]])
    np.testing.assert_array_equal(padding_mask([1, 0], 1), [[True, False]])  # 1/0 flags
    for flags, said in (([], r"got shape \(0,\)"), ([[True, False]], r"got shape \(1, 2\)")):
        with pytest.raises(AttentionInputError, match=said):
            padding_mask(flags, 2)
    for flags in ([0, 2], [0.0, 1.0]):  # only True/False or the integers 1/0
        with pytest.raises(AttentionInputError, match="must hold True/False"):
            padding_mask(flags, 2)


def test_mask_to_additive_refuses_a_nan_fill():
    from attention_core.masks import mask_to_additive
    from attention_core.validation import AttentionInputError

    np.testing.assert_array_equal(mask_to_additive([[True, False]], fill=-1e9), [[0.0, -1e9]])
    with pytest.raises(AttentionInputError):
        mask_to_additive([[True, False]], fill=float("nan"))


def test_sink_window_hand_written():
    # 5 tokens, window 2, the first token kept: query 4 sees keys 3, 4 and key 0.
    np.testing.assert_array_equal(
        sink_window_mask(5, 2, 1),
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 1, 1]],
    )
    np.testing.assert_array_equal(sink_window_mask(6, 3, 0), sliding_window_mask(6, 3))
    np.testing.assert_array_equal(sink_window_mask(4, 1, 4), causal_mask(4))


@given(n=st.integers(1, 12), window=st.integers(1, 12), sinks=st.integers(0, 12))
def test_sink_window_matches_its_definition(n, window, sinks):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    expected = (j <= i) & ((i - j < window) | (j < sinks))
    np.testing.assert_array_equal(sink_window_mask(n, window, sinks), expected)
    with pytest.raises(AttentionInputError, match="sinks must be at least 0"):
        sink_window_mask(n, window, -1)
