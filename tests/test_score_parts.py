"""The score split's formulas (attention_core.score_parts) against the score computed whole by
torch: the norm on the summed stream, the projections, the rotation, the scaled dot product."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core import score_parts
from attention_core.positional import rotary_tables
from attention_core.validation import AttentionInputError

RNG = np.random.default_rng(58)


def _whole_scores(stream, gamma, beta, w_q, b_q, w_k, b_k, eps, centred, rotation, scale):
    """`(n, n)` every query's score of every key, computed whole in float64 by torch."""
    x = torch.from_numpy(stream)
    if centred:
        normed = torch.nn.functional.layer_norm(
            x, (x.shape[-1],), torch.from_numpy(gamma), torch.from_numpy(beta), eps
        )
    else:
        normed = torch.nn.functional.rms_norm(x, (x.shape[-1],), torch.from_numpy(gamma), eps)
    q = torch.nn.functional.linear(normed, torch.from_numpy(w_q), torch.from_numpy(b_q))
    k = torch.nn.functional.linear(normed, torch.from_numpy(w_k), torch.from_numpy(b_k))
    if rotation is not None:
        cos, sin = (torch.from_numpy(t) for t in rotation)
        half = q.shape[-1] // 2

        def rotate(t):
            return t * cos + torch.cat([-t[..., half:], t[..., :half]], dim=-1) * sin

        q, k = rotate(q), rotate(k)
    return (scale * q @ k.T).numpy()


@pytest.mark.parametrize("centred", [False, True], ids=["rmsnorm", "layernorm"])
@pytest.mark.parametrize("rope", [False, True], ids=["learned", "rope"])
def test_the_terms_sum_to_the_score_computed_whole(centred, rope):
    n_sources, n, d_model, d_head = 5, 7, 16, 8
    parts = RNG.normal(size=(n_sources, n, d_model))
    gamma = 1 + 0.2 * RNG.normal(size=d_model)
    beta = 0.3 * RNG.normal(size=d_model) if centred else None
    w_q, w_k = RNG.normal(size=(2, d_head, d_model))
    b_q, b_k = 0.5 * RNG.normal(size=(2, d_head))
    rotation = (
        rotary_tables(np.arange(n, dtype=np.float64), d_head, 100.0, like=parts) if rope else None
    )
    eps, scale = 1e-5, d_head**-0.5
    stream = parts.sum(axis=0)
    scales = score_parts.held_scales(stream, eps, centred=centred)
    normed, constant = score_parts.normed_parts(parts, scales, gamma, beta, centred=centred)
    q = score_parts.head_parts(normed, constant, w_q, b_q, rotation)
    k = score_parts.head_parts(normed, constant, w_k, b_k, rotation)
    whole = _whole_scores(
        stream, gamma, np.zeros(d_model) if beta is None else beta, w_q, b_q, w_k, b_k, eps,
        centred, rotation, scale,
    )  # fmt: skip
    for query in range(n):
        terms = score_parts.score_terms(q.parts[:, query], k.parts, scale)
        assert terms.shape == (n_sources + 1, n_sources + 1, n)
        np.testing.assert_allclose(terms.sum(axis=(0, 1)), whole[query], rtol=1e-10, atol=1e-10)
        if rope:
            pairs = score_parts.frequency_terms(q.total[query], k.total, scale)
            assert pairs.shape == (d_head // 2, n)
            np.testing.assert_allclose(pairs.sum(axis=0), whole[query], rtol=1e-10, atol=1e-10)


def test_a_term_is_one_source_at_the_query_meeting_one_at_the_key():
    """Hand-worked: no norm scale (r = 1 by a unit stream), identity projections, two sources
    that each fill one dimension: each term is the product of the two numbers it names."""
    parts = np.zeros((2, 2, 2))
    parts[0, :, 0] = [1.0, 2.0]  # source 0 writes dimension 0
    parts[1, :, 1] = [3.0, 4.0]  # source 1 writes dimension 1
    normed, constant = score_parts.normed_parts(parts, np.ones(2), None)
    q = score_parts.head_parts(normed, constant, np.eye(2))
    k = score_parts.head_parts(normed, constant, np.eye(2), bias=np.array([0.0, 10.0]))
    terms = score_parts.score_terms(q.parts[:, 1], k.parts, scale=0.5)
    # Query 1 holds (2, 4); key 0 holds (1, 3) plus the bias (0, 10).
    expected_key_0 = 0.5 * np.array([[2 * 1, 0, 0], [0, 4 * 3, 4 * 10], [0, 0, 0]])
    np.testing.assert_array_equal(terms[:, :, 0], expected_key_0)
    assert terms[:, :, 0].sum() == 0.5 * (2 * 1 + 4 * 13)


def test_a_layernorm_takes_each_sources_own_mean():
    parts = np.array([[[1.0, 3.0]], [[10.0, 10.0]]])  # the second source is all mean
    normed, constant = score_parts.normed_parts(
        parts, np.array([0.5]), np.ones(2), np.array([7.0, 8.0]), centred=True
    )
    np.testing.assert_array_equal(normed, [[[-0.5, 0.5]], [[0.0, 0.0]]])
    np.testing.assert_array_equal(constant, [7.0, 8.0])


def test_the_held_scale_is_the_norms_own():
    stream = RNG.normal(size=(4, 6))
    rms = score_parts.held_scales(stream, 1e-6, centred=False)
    np.testing.assert_allclose(rms, 1 / np.sqrt((stream**2).mean(axis=1) + 1e-6), rtol=1e-12)
    layer = score_parts.held_scales(stream, 1e-6, centred=True)
    np.testing.assert_allclose(layer, 1 / np.sqrt(stream.var(axis=1) + 1e-6), rtol=1e-12)


def test_a_pair_is_a_dimension_and_its_partner_half_a_head_away():
    query = np.array([1.0, 2.0, 3.0, 4.0])
    keys = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, -1.0]])
    pairs = score_parts.frequency_terms(query, keys, scale=2.0)
    np.testing.assert_array_equal(pairs, [[2 * (1 + 3), 0.0], [2 * (2 + 4), 2 * (2 - 4)]])


def test_bands_split_the_pairs_fastest_first():
    np.testing.assert_array_equal(score_parts.band_edges(32, 4), [0, 8, 16, 24, 32])
    np.testing.assert_array_equal(score_parts.band_edges(5, 2), [0, 2, 5])
    np.testing.assert_array_equal(score_parts.band_edges(5, 1), [0, 5])
    for bad in (0, 6):
        with pytest.raises(AttentionInputError, match="cannot split 5 pairs"):
            score_parts.band_edges(5, bad)


def test_parts_of_two_heads_cannot_meet():
    with pytest.raises(AttentionInputError, match="from one head"):
        score_parts.score_terms(np.zeros((2, 4)), np.zeros((2, 3, 8)), 1.0)


def test_bands_of_pairs_keep_the_score_and_one_pair_a_band_is_the_pairs():
    pairs = RNG.normal(size=(8, 5))
    bands = score_parts.band_terms(pairs, 3)  # pairs 0-2, 3-4, 5-7 (edges 0, 3, 5, 8)
    np.testing.assert_allclose(bands[0], pairs[:3].sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(bands[1], pairs[3:5].sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(bands.sum(axis=0), pairs.sum(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(score_parts.band_terms(pairs, 8), pairs)


def test_above_average_is_what_sets_one_visible_key_apart():
    side = np.array([[1.0, 3.0, 100.0], [5.0, 5.0, -7.0]])  # source 1 is even over keys 0, 1
    visible = np.array([True, True, False])
    above = score_parts.above_average(side, visible)
    np.testing.assert_array_equal(above, [[-1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    # The rows sum to each key's score minus the visible keys' mean score.
    scores = side.sum(axis=0)
    np.testing.assert_array_equal(above.sum(axis=0)[:2], scores[:2] - scores[:2].mean())
    with pytest.raises(AttentionInputError, match="sees no key"):
        score_parts.above_average(side, np.zeros(3, dtype=bool))


def test_the_source_map_weighs_each_query_by_where_it_attends():
    # Two queries over two keys; query 0 sees key 0 only, query 1 both.
    key_sides = np.array([[[2.0, 0.0]], [[1.0, 5.0]]])  # (query, source, key)
    weights = np.array([[1.0, 0.0], [0.25, 0.75]])
    visible = np.array([[True, False], [True, True]])
    both = score_parts.source_map(key_sides, weights, visible, [0, 1])
    # Query 0: one visible key, nothing above its average. Query 1: (-2, +2) weighted.
    np.testing.assert_array_equal(both, [[0.25 * -2.0, 0.75 * 2.0]])
    np.testing.assert_array_equal(
        score_parts.source_map(key_sides, weights, visible, [0]), [[0, 0]]
    )


def test_the_sharpest_queries_are_the_rows_with_the_largest_weight():
    weights = np.array([[1.0, 0, 0], [0.5, 0.5, 0], [0.1, 0.8, 0.1], [0.4, 0.3, 0.3]])
    np.testing.assert_array_equal(score_parts.sharpest_queries(weights, 2), [0, 2])
    np.testing.assert_array_equal(score_parts.sharpest_queries(weights, 99), [0, 1, 2, 3])
    np.testing.assert_array_equal(score_parts.sharpest_queries(weights, 0), [0])
