"""The √d_k scaling experiment: the paper's argument reproduced, and by direct computation."""

import math

import numpy as np
import pytest

from attention_core import AttentionInputError, softmax, softmax_jacobian
from attention_core.lessons.scaling import _jacobian_norm, scaling_experiment


def test_jacobian_norm_closed_form_matches_explicit_matrix():
    p = softmax(np.random.default_rng(1).normal(size=(5, 7)) * 3)
    explicit = np.linalg.norm(softmax_jacobian(p), axis=(-2, -1))  # Frobenius
    np.testing.assert_allclose(_jacobian_norm(p), explicit, rtol=1e-12)


def test_scaling_experiment_reproduces_the_paper_argument():
    r = scaling_experiment([4, 64, 256], num_samples=1500, num_keys=16, seed=3)
    np.testing.assert_array_equal(r.d_k, [4, 64, 256])
    # Var(q·k) = d_k for unit-variance entries; the scaled scores have variance 1.
    np.testing.assert_allclose(r.dot_variance, [4, 64, 256], rtol=0.1)
    np.testing.assert_allclose(r.scaled_dot_variance, [1, 1, 1], rtol=0.1)
    # Unscaled: the softmax sharpens with d_k (max weight up, entropy and gradient down).
    assert np.all(np.diff(r.max_weight_unscaled) > 0)
    assert np.all(np.diff(r.entropy_unscaled) < 0)
    assert r.gradient_norm_unscaled[-1] < 0.5 * r.gradient_norm_scaled[-1]
    assert r.max_weight_unscaled[-1] > 0.85
    # Scaled: the same picture at every d_k.
    assert np.ptp(r.entropy_scaled) < 0.1 and np.ptp(r.max_weight_scaled) < 0.05
    # Entropies lie between 0 and log(num_keys).
    assert (r.entropy_scaled < math.log(16)).all() and (r.entropy_unscaled > 0).all()
    assert (r.num_keys, r.num_samples, r.seed) == (16, 1500, 3)


def test_scaling_experiment_matches_direct_computation_and_is_deterministic():
    r = scaling_experiment([8], num_samples=200, num_keys=5, seed=11)
    again = scaling_experiment([8], num_samples=200, num_keys=5, seed=11)
    np.testing.assert_array_equal(r.entropy_scaled, again.entropy_scaled)
    # Recompute with the same random stream (one chunk: q then k draws) by plain NumPy.
    rng = np.random.default_rng(11)
    q = rng.standard_normal((200, 1, 8))
    k = rng.standard_normal((200, 5, 8))
    s = (q * k).sum(-1)
    p = np.exp(s / math.sqrt(8))
    p /= p.sum(-1, keepdims=True)
    assert r.dot_variance[0] == pytest.approx(s.var(), rel=1e-12)
    assert r.max_weight_scaled[0] == pytest.approx(p.max(-1).mean(), rel=1e-12)
    assert r.entropy_scaled[0] == pytest.approx((-(p * np.log(p)).sum(-1)).mean(), rel=1e-12)


def test_scaling_experiment_bad_input():
    with pytest.raises(AttentionInputError, match="each d_k must be a whole number"):
        scaling_experiment([2.5])
    with pytest.raises(AttentionInputError, match="num_samples must be at least 2"):
        scaling_experiment([2], num_samples=1)
