"""attention_core.head_roles: hand-built heads score what they were built to do. Real models'
heads are probed in test_readouts.py."""

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.head_roles import (
    duplicate_token_scores,
    first_token_scores,
    head_roles,
    induction_scores,
    previous_token_scores,
    repeated_tokens,
    strongest_heads,
    token_share,
)

L = 4  # period: positions 0..3, then the same tokens at 4..7
N = 2 * L


def head(pairs, n=N):
    """A causal head that puts all of query i's weight on key pairs[i]."""
    w = np.zeros((n, n))
    for i, j in enumerate(pairs):
        w[i, j] = 1.0
    return w


PREVIOUS = head([0, 0, 1, 2, 3, 4, 5, 6])
# Query i in the second half looks at i - L + 1, the token after its earlier copy.
INDUCTION = head([0, 0, 0, 0, 1, 2, 3, 4])
DUPLICATE = head([0, 1, 2, 3, 0, 1, 2, 3])
SINK = head([0] * N)


def test_each_built_head_scores_one_on_its_role_and_zero_on_the_others():
    weights = np.stack([PREVIOUS, INDUCTION, DUPLICATE, SINK])[None]  # (layer 1, head 4, n, n)
    roles = head_roles(weights, L)
    # Only query 1 of the induction and sink heads looks one back (at key 0): 1 of 7 rows.
    np.testing.assert_allclose(roles.previous, [[1.0, 1 / 7, 0.0, 1 / 7]])
    np.testing.assert_allclose(roles.induction, [[0.0, 1.0, 0.0, 0.0]])
    # The sink head's query 4 looks at key 0, its copy one period back: 1 of 4 rows.
    np.testing.assert_allclose(roles.duplicate, [[0.0, 0.0, 1.0, 0.25]])
    np.testing.assert_allclose(roles.first, [[1 / 7, 3 / 7, 1 / 7, 1.0]])
    assert roles.period == L
    np.testing.assert_array_equal(roles.score("induction"), roles.induction)
    with pytest.raises(AttentionInputError, match="not a role"):
        roles.score("copy")


def test_scores_are_the_means_written_out_on_a_random_pattern():
    rng = np.random.default_rng(3)
    w = rng.random((2, 3, N, N))
    w /= w.sum(-1, keepdims=True)
    i = np.arange(L, N)
    np.testing.assert_allclose(induction_scores(w, L), w[..., i, i - L + 1].mean(-1))
    np.testing.assert_allclose(duplicate_token_scores(w, L), w[..., i, i - L].mean(-1))
    one_back = w[..., np.arange(1, N), np.arange(N - 1)]
    np.testing.assert_allclose(previous_token_scores(w), one_back.mean(-1))
    np.testing.assert_allclose(first_token_scores(w), w[..., 1:, 0].mean(-1))
    np.testing.assert_allclose(token_share(w, [0, 5, 5]), (w[..., 0] + w[..., 5]).mean(-1))


def test_a_probe_after_a_leading_token_is_read_from_its_start():
    # [CLS] + the probe + [SEP]: the induction head's pattern moved one position on.
    w = np.zeros((N + 2, N + 2))
    w[:, 0] = 1.0
    for i in range(L, N):
        w[1 + i] = 0.0
        w[1 + i, 1 + i - L + 1] = 1.0
    assert induction_scores(w, L, start=1) == 1.0
    # Read from 0, the rows are one early: row 4 is still the first half's last token.
    assert induction_scores(w, L) == 0.75
    assert duplicate_token_scores(w, L, start=1) == 0.0


def test_a_probe_is_random_tokens_repeated_twice():
    pool = np.arange(100, 200)
    ids = repeated_tokens(pool, 10, seed=7)
    assert ids.shape == (20,)
    np.testing.assert_array_equal(ids[:10], ids[10:])
    assert len(set(ids[:10].tolist())) == 10 and set(ids.tolist()) <= set(pool.tolist())
    np.testing.assert_array_equal(ids, repeated_tokens(pool, 10, seed=7))
    assert not np.array_equal(ids, repeated_tokens(pool, 10, seed=8))
    with pytest.raises(AttentionInputError, match="pool of at least 101"):
        repeated_tokens(pool, 101, seed=0)


def test_a_sequence_that_is_not_two_periods_is_refused():
    with pytest.raises(AttentionInputError, match="from position 1 needs 9"):
        induction_scores(np.full((8, 8), 1 / 8), 4, start=1)
    with pytest.raises(AttentionInputError, match="3 query rows and 4 key columns"):
        previous_token_scores(np.full((3, 4), 0.25))


def test_strongest_heads_best_first_ties_in_layer_then_head_order():
    scores = np.array([[0.1, 0.9, 0.5], [0.9, 0.2, 0.5]])
    assert strongest_heads(scores, 4) == [(0, 1, 0.9), (1, 0, 0.9), (0, 2, 0.5), (1, 2, 0.5)]
    assert strongest_heads(scores, 0) == []


def test_the_smallest_probe_and_pool_and_pattern_are_accepted():
    # Two tokens repeated from a pool of exactly two: the halves are a permutation of it.
    ids = repeated_tokens([3, 9], 2, seed=1)
    assert sorted(ids[:2].tolist()) == [3, 9] and ids[:2].tolist() == ids[2:].tolist()
    # A pool the size of the half: every token once per half, never twice.
    ids = repeated_tokens(np.arange(10), 10, seed=4)
    assert sorted(ids[:10].tolist()) == list(range(10))
    with pytest.raises(AttentionInputError, match="at least 2"):
        repeated_tokens(np.arange(10), 1, seed=0)
    # Two tokens are a pattern; one token of period 1 repeated is the shortest probe.
    two = np.array([[1.0, 0.0], [0.25, 0.75]])
    assert previous_token_scores(two) == 0.25
    assert induction_scores(two, 1) == 0.75 and duplicate_token_scores(two, 1) == 0.25
    with pytest.raises(AttentionInputError, match="at least 2 tokens"):
        previous_token_scores(np.ones((1, 1)))


def test_positions_past_the_end_are_refused_whichever_comes_first():
    w = np.full((4, 4), 0.25)
    assert token_share(w, [3]) == 0.25
    for positions in ([4], [0, 1, 9], [9, 0, 1]):
        with pytest.raises(AttentionInputError, match="past the last of the 4 tokens"):
            token_share(w, positions)


def test_inputs_of_the_wrong_rank_are_refused():
    with pytest.raises(AttentionInputError):
        strongest_heads(np.ones((2, 2, 2)), 1)
