"""Entropy and per-head summaries of attention patterns, against formulas and by hand."""

import math

import numpy as np
import pytest
import torch

from attention_core import (
    AttentionInputError,
    attention_entropy,
    causal_mask,
    head_statistics,
    scaled_dot_product_attention,
    softmax,
)


def test_entropy_hand_values():
    # Uniform over n keys: -Σ (1/n) log(1/n) = log n.
    assert attention_entropy([0.25] * 4) == pytest.approx(math.log(4), rel=1e-15)
    # One-hot: 1·log 1 = 0, and 0·log 0 counts as 0.
    assert attention_entropy([0.0, 1.0, 0.0]) == 0.0
    # (1/2, 1/4, 1/4): 1/2·log 2 + 2·1/4·log 4 = 1.5 log 2.
    assert attention_entropy([0.5, 0.25, 0.25]) == pytest.approx(1.5 * math.log(2), rel=1e-15)
    # A fully masked (all-zero) row.
    assert attention_entropy([0.0, 0.0]) == 0.0


def test_entropy_matches_torch_distributions_and_axis():
    p = softmax(np.random.default_rng(0).normal(size=(3, 4, 6)))
    expected = torch.distributions.Categorical(probs=torch.from_numpy(p)).entropy().numpy()
    np.testing.assert_allclose(attention_entropy(p), expected, rtol=1e-12)
    np.testing.assert_allclose(attention_entropy(p.swapaxes(-1, -2), axis=-2), expected, rtol=1e-12)


def test_entropy_rejects_negative_weights():
    with pytest.raises(AttentionInputError, match="between 0 and 1"):
        attention_entropy([0.5, -0.5, 1.0])
    with pytest.raises(AttentionInputError, match="axis 3 does not exist"):
        attention_entropy([[0.5, 0.5]], axis=3)


def test_head_statistics_on_hand_built_patterns():
    n = 4
    prev = np.zeros((n, n))
    prev[0, 0] = 1.0
    prev[np.arange(1, n), np.arange(n - 1)] = 1.0  # previous-token head
    first = np.zeros((n, n))
    first[:, 0] = 1.0  # attends to the first token only
    uniform = np.where(causal_mask(n), 1.0, 0.0)
    uniform /= uniform.sum(-1, keepdims=True)  # causal uniform: row i spreads over i+1 keys
    stats = head_statistics(np.stack([prev, first, uniform]))  # (head, q_pos, k_pos)
    # Previous-token head: queries 1..3 put weight 1 on i-1; query 0 puts 1 on itself.
    np.testing.assert_allclose(stats.previous_token, [1.0, 1 / 3, (1 / 2 + 1 / 3 + 1 / 4) / 3])
    # Self: prev head only at query 0 (1/4 of queries); first-token head only at query 0;
    # uniform head has weight 1/(i+1) on itself.
    np.testing.assert_allclose(stats.self_token, [0.25, 0.25, (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4])
    # First token: in the previous-token head queries 0 (itself) and 1 (its predecessor) both
    # land on key 0, so 2 of 4 queries -> 1/2.
    np.testing.assert_allclose(stats.first_token, [0.5, 1.0, (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4])
    np.testing.assert_allclose(stats.mean_max_weight, [1.0, 1.0, (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4])
    # Entropy: one-hot rows 0; uniform row i has log(i+1).
    np.testing.assert_allclose(
        stats.mean_entropy, [0.0, 0.0, sum(math.log(i + 1) for i in range(n)) / n], atol=1e-15
    )


def test_head_statistics_averages_batches_and_skips_fully_masked_rows():
    rng = np.random.default_rng(2)
    mask = np.ones((5, 5), bool)
    mask[4] = False  # a query with nothing to see
    w = scaled_dot_product_attention(
        rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(2, 3, 5, 4)), np.ones((5, 1)), mask=mask
    ).weights
    stats = head_statistics(w)
    assert stats.first_token.shape == (3,)
    np.testing.assert_allclose(stats.first_token, w[:, :, :4, 0].mean(axis=(0, 2)), rtol=1e-12)
    np.testing.assert_allclose(
        stats.mean_entropy, attention_entropy(w[:, :, :4]).mean(axis=(0, 2)), rtol=1e-12
    )
    # With a single query there is no previous token: NaN by definition, not a made-up 0.
    assert np.isnan(head_statistics(w[..., :1, :]).previous_token).all()


def test_head_statistics_needs_heads_axis():
    with pytest.raises(AttentionInputError, match="at least 3"):
        head_statistics(np.ones((2, 2)) / 2)
