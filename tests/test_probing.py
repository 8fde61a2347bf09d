"""Tests for attention_core/probing.py.

References, all independent of the code under test:
- attention rollout worked out by hand on 2 layers × 2 heads × 2 tokens (the numbers below);
- PCA by the eigenvectors of the covariance matrix (np.linalg.eigh), not the SVD the code uses,
  and softmax written out to check that the AttentionViz scaling and shift move no weight;
- the sentence embedding by a mean and a norm worked by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.probing import (
    attention_rollout,
    joint_query_key_projection,
    sentence_embedding,
)

# -- attention rollout ---------------------------------------------------------------------------

# Two layers, two heads, two tokens; every row sums to 1.
LAYER_1 = [[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]]
LAYER_2 = [[[0.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]
HAND_WEIGHTS = np.array([LAYER_1, LAYER_2])  # (layer 2, head 2, 2, 2)


def test_rollout_matches_the_hand_worked_two_layer_example():
    steps = attention_rollout(HAND_WEIGHTS)
    # Head means:   Ā_1 = [[1, 0], [.5, .5]],           Ā_2 = [[.5, .5], [0, 1]]
    np.testing.assert_allclose(steps.head_mean[0], [[1.0, 0.0], [0.5, 0.5]])
    np.testing.assert_allclose(steps.head_mean[1], [[0.5, 0.5], [0.0, 1.0]])
    # A' = ½Ā + ½I: A'_1 = [[1, 0], [.25, .75]],        A'_2 = [[.75, .25], [0, 1]]
    np.testing.assert_allclose(steps.with_residual[0], [[1.0, 0.0], [0.25, 0.75]])
    np.testing.assert_allclose(steps.with_residual[1], [[0.75, 0.25], [0.0, 1.0]])
    # R = A'_2 A'_1 = [[.75·1 + .25·.25, .75·0 + .25·.75], [0·1 + 1·.25, 0·0 + 1·.75]]
    #               = [[.8125, .1875], [.25, .75]]
    np.testing.assert_allclose(steps.rollout, [[0.8125, 0.1875], [0.25, 0.75]])
    np.testing.assert_allclose(steps.cumulative[0], steps.with_residual[0])


def test_rollout_order_matters_and_newest_layer_is_on_the_left():
    # The other order, A'_1 A'_2 = [[.75, .25], [.1875, .8125]], is not the rollout.
    swapped = attention_rollout(HAND_WEIGHTS[::-1])
    np.testing.assert_allclose(swapped.rollout, [[0.75, 0.25], [0.1875, 0.8125]])


def test_rollout_follows_the_recursion_on_random_heads():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 3, 5, 5))
    weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    for residual in (0.0, 0.3, 0.5, 1.0):
        steps = attention_rollout(weights, residual=residual)
        joint = np.eye(5)
        for layer in range(4):
            a = (1 - residual) * weights[layer].mean(0) + residual * np.eye(5)
            a /= a.sum(-1, keepdims=True)
            joint = a @ joint
            np.testing.assert_allclose(steps.cumulative[layer], joint, atol=1e-12)
        np.testing.assert_allclose(steps.rollout.sum(-1), 1.0)
    # No residual: the plain product of the layer means; all residual: nothing moves.
    plain = attention_rollout(weights, residual=0.0).rollout
    means = weights.mean(1)
    np.testing.assert_allclose(plain, means[3] @ means[2] @ means[1] @ means[0], atol=1e-12)
    np.testing.assert_allclose(attention_rollout(weights, residual=1.0).rollout, np.eye(5))


def test_rollout_renormalises_rows_that_do_not_sum_to_one():
    # A removed head's weights read as zeros (transformers 4's head_mask returned them so), so
    # a layer's rows may sum to less than 1 and A' divides by the row sums again. By hand, one
    # head of [[.2, .2], [0, 0]]: ½·that + ½·I = [[.6, .1], [0, .5]], rows / .7 and / .5.
    steps = attention_rollout(np.array([[[[0.2, 0.2], [0.0, 0.0]]]]))
    np.testing.assert_allclose(steps.with_residual[0], [[6 / 7, 1 / 7], [0.0, 1.0]])


def test_rollout_of_one_token_is_one_and_of_no_token_an_error():
    np.testing.assert_array_equal(attention_rollout(np.ones((2, 3, 1, 1))).rollout, [[1.0]])
    with pytest.raises(AttentionInputError, match="shaped"):
        attention_rollout(np.ones((1, 1, 0, 0)))


@pytest.mark.parametrize(
    ("weights", "residual"),
    [(np.ones((2, 2)), 0.5), (np.ones((1, 1, 2, 3)), 0.5), (HAND_WEIGHTS, 1.5)],
)
def test_rollout_rejects_bad_input(weights, residual):
    with pytest.raises(AttentionInputError):
        attention_rollout(weights, residual=residual)


# -- the joint query-key map ---------------------------------------------------------------------


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_scale_and_shift_worked_by_hand_and_keep_every_weight():
    # Queries of norm 1, keys of norm 4: s = √(4 / 1) = 2, so queries double and keys halve.
    q = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    k = np.array([[4.0, 0.0], [0.0, 4.0], [0.0, -4.0]])
    p = joint_query_key_projection(q, k)
    assert p.scale == pytest.approx(2.0)
    # Scaled: mean(2q) = (0, 2/3), mean(k/2) = (2/3, 0); the keys move by (-2/3, 2/3).
    np.testing.assert_allclose(p.shift, [-2 / 3, 2 / 3])
    np.testing.assert_allclose(p.queries, 2 * q)
    np.testing.assert_allclose(p.keys, k / 2 + [-2 / 3, 2 / 3])
    np.testing.assert_allclose(p.queries.mean(0), p.keys.mean(0), atol=1e-12)
    before = softmax_rows(q @ k.T / np.sqrt(2))
    after = softmax_rows(p.queries @ p.keys.T / np.sqrt(2))
    np.testing.assert_allclose(after, before, atol=1e-12)


def test_pca_equals_the_eigenvectors_of_the_covariance():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(7, 5)) @ np.diag([3.0, 2.0, 1.0, 0.5, 0.1]) + 2.0
    k = rng.normal(size=(7, 5)) * 0.4 - 1.0
    p = joint_query_key_projection(q, k)
    # Independent route: the same scale and shift written out, then eigh of the covariance.
    s = np.sqrt(np.linalg.norm(k, axis=1).mean() / np.linalg.norm(q, axis=1).mean())
    qs, ks = q * s, k / s
    ks = ks + qs.mean(0) - ks.mean(0)
    x = np.vstack([qs, ks])
    centred = x - x.mean(0)
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred)
    order = np.argsort(eigenvalues)[::-1][:2]
    directions = eigenvectors[:, order].T  # (2, d)
    # Fix each sign by its largest entry, as the code promises.
    directions *= np.sign(directions[np.arange(2), np.abs(directions).argmax(1)])[:, None]
    np.testing.assert_allclose(p.components, directions, atol=1e-10)
    np.testing.assert_allclose(p.query_xy, centred[:7] @ directions.T, atol=1e-10)
    np.testing.assert_allclose(p.key_xy, centred[7:] @ directions.T, atol=1e-10)
    np.testing.assert_allclose(p.explained, eigenvalues[order] / eigenvalues.sum(), atol=1e-12)
    # The picture's spread along each axis is that direction's variance.
    xy = np.vstack([p.query_xy, p.key_xy])
    np.testing.assert_allclose((xy**2).sum(0), eigenvalues[order], rtol=1e-10)


def test_projection_of_points_on_a_line_explains_everything():
    q = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    p = joint_query_key_projection(q, q)
    assert p.explained[0] == pytest.approx(1.0)
    assert p.explained[1] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(p.components[0], [np.sqrt(0.5), np.sqrt(0.5)])
    # Keys identical to queries land on them.
    np.testing.assert_allclose(p.query_xy, p.key_xy)


def test_projection_rejects_mismatched_widths():
    with pytest.raises(AttentionInputError, match="same width"):
        joint_query_key_projection(np.ones((3, 4)), np.ones((3, 5)))


def test_projection_checks_its_sizes_and_takes_the_smallest_valid_ones():
    for q, k in [
        (np.ones((0, 3)), np.ones((3, 3))),  # no query at all
        (np.ones((3, 1)), np.ones((3, 1))),  # d_head 1: no second direction
        (np.ones((1, 2)), np.ones((1, 2))),  # two points
    ]:
        with pytest.raises(AttentionInputError):
            joint_query_key_projection(q, k)
    # Three points in two dimensions (one query, two keys) are enough.
    p = joint_query_key_projection([[1.0, 0.0]], [[0.0, 1.0], [1.0, 1.0]])
    assert p.query_xy.shape == (1, 2) and p.key_xy.shape == (2, 2)
    np.testing.assert_allclose(p.explained.sum(), 1.0)


def test_projection_scale_for_short_keys_and_for_zero_vectors():
    # Queries of norm 4, keys of norm ¼: s = √(¼ / 4) = ¼.
    q = np.array([[4.0, 0.0], [0.0, 4.0], [0.0, -4.0]])
    k = np.array([[0.25, 0.0], [0.0, 0.25], [-0.25, 0.0]])
    assert joint_query_key_projection(q, k).scale == pytest.approx(0.25)
    # All-zero queries (or keys) have no length to balance: the scale stays 1 and all is finite.
    for zq, zk in [(np.zeros_like(q), k), (q, np.zeros_like(k))]:
        p = joint_query_key_projection(zq, zk)
        assert p.scale == 1.0
        assert np.isfinite(p.query_xy).all() and np.isfinite(p.key_xy).all()


def test_projection_of_identical_points_explains_nothing_and_of_a_small_cloud_everything():
    same = joint_query_key_projection(np.ones((3, 2)), np.ones((3, 2)))
    np.testing.assert_array_equal(same.explained, [0.0, 0.0])
    # A spread far below 1 in 2-D: the two directions still keep all of it.
    rng = np.random.default_rng(2)
    small = joint_query_key_projection(rng.normal(size=(4, 2)) * 1e-2, rng.normal(size=(4, 2)))
    np.testing.assert_allclose(small.explained.sum(), 1.0)


def test_sentence_embedding_is_the_masked_mean_normalised():
    hidden = np.array([[3.0, 0.0], [0.0, 4.0], [100.0, 100.0]])
    # Tokens 1 and 2 only: mean (1.5, 2) has norm 2.5, so the embedding is (0.6, 0.8).
    np.testing.assert_allclose(sentence_embedding(hidden, np.array([1, 1, 0])), [0.6, 0.8])
    # Without a mask every token counts: mean (1, 1) of three tokens in two dimensions.
    every = np.array([[3.0, 0.0], [0.0, 4.0], [0.0, -1.0]])
    np.testing.assert_allclose(sentence_embedding(every), [np.sqrt(0.5), np.sqrt(0.5)])
