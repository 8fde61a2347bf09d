"""attention_core.training.sequences: repeated segments, held out exactly, masks worked by hand."""

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.training.sequences import (
    EXAMPLE_TOKENS,
    check_sizes,
    held_out,
    period_range,
    seen_before,
    training_batch,
)


def test_each_training_row_is_a_segment_of_distinct_tokens_repeated_with_varied_periods():
    rng = np.random.default_rng(0)
    tokens, periods = training_batch(rng, 64, 32, 64)
    assert tokens.shape == (64, 32) and tokens.dtype == np.int64
    assert set(periods.tolist()) <= set(range(8, 17))  # a quarter to a half of the context
    assert len(set(periods.tolist())) >= 6  # no single period to learn by heart
    for row, period in zip(tokens, periods, strict=True):
        segment = row[:period]
        assert len(set(segment.tolist())) == period
        assert np.array_equal(row, np.resize(segment, 32))
        assert row.min() >= 0 and row.max() < 64


def test_a_held_out_segment_is_never_drawn_for_training():
    # 4 tokens, segments of 4: 24 orders in all. Hold out 23 of them, and every row of period 4
    # must be the one left.
    orders = [tuple(p) for p in __import__("itertools").permutations(range(4))]
    left = orders[5]
    exclude = frozenset(orders) - {left}
    tokens, periods = training_batch(np.random.default_rng(1), 200, 8, 4, exclude)
    assert (periods == 4).sum() > 20
    for row in tokens[periods == 4]:
        assert tuple(row[:4]) == left


def test_held_out_sequences_follow_their_seed_and_are_excluded_from_training():
    probe = held_out(3, 32, 32, 64)
    again = held_out(3, 32, 32, 64)
    assert np.array_equal(probe.tokens, again.tokens) and np.array_equal(
        probe.example, again.example
    )
    assert not np.array_equal(probe.tokens, held_out(4, 32, 32, 64).tokens)
    assert probe.period == 16 and probe.tokens.shape == (32, 32)
    assert np.array_equal(probe.tokens[:, 16:], probe.tokens[:, :16])  # two copies
    assert probe.example.size == EXAMPLE_TOKENS and probe.example_period == 8
    assert np.array_equal(probe.example[8:], probe.example[:8])
    assert (
        tuple(probe.example[:8]) in probe.segments and tuple(probe.tokens[0, :16]) in probe.segments
    )
    rng = np.random.default_rng(3)
    for _ in range(20):
        tokens, periods = training_batch(rng, 32, 32, 64, probe.segments)
        for row, period in zip(tokens, periods, strict=True):
            assert tuple(row[:period]) not in probe.segments


@pytest.mark.parametrize(
    ("n_ctx", "periods"), [(10, range(2, 6)), (9, range(2, 5)), (8, range(2, 5))]
)
def test_periods_run_from_a_quarter_to_a_half_of_any_context(n_ctx, periods):
    _tokens, drawn = training_batch(np.random.default_rng(5), 200, n_ctx, 16)
    assert set(drawn.tolist()) == set(periods) and drawn.dtype.kind == "i"


def test_the_period_range_is_in_whole_tokens():
    assert period_range(32) == (8, 16) and period_range(10) == (2, 5) and period_range(9) == (2, 4)
    assert all(isinstance(end, int) for end in period_range(9))


def test_one_held_out_sequence_is_enough():
    assert held_out(1, 1, 8, 8).tokens.shape == (1, 8)


def test_a_short_context_holds_its_whole_example():
    probe = held_out(0, 4, 10, 8)
    assert probe.example.size == 10 and probe.example_period == 5 and probe.period == 5


def test_which_predictions_are_first_seen_and_which_repeat_worked_by_hand():
    # Period 3 over 8 tokens: A B C A B C A B. Prediction i is of token i + 1.
    # Tokens 1, 2 (B, C) are new: predictions 0, 1. Token 3 (A) starts the copy, but C (at 2) was
    # never followed by anything before: neither. Tokens 4..7 repeat: predictions 3..6.
    first, repeated = seen_before([3], 8)
    assert first.tolist() == [[True, True, False, False, False, False, False]]
    assert repeated.tolist() == [[False, False, False, True, True, True, True]]


def test_sizes_no_repeated_sequence_fits_are_refused_with_the_fix():
    assert check_sizes(32, 16) == (32, 16)
    assert check_sizes(4, 2) == (4, 2)  # the smallest: a segment of 2 and its copy
    assert check_sizes(33, 16) == (33, 16)  # an odd context's half is 16
    with pytest.raises(AttentionInputError, match="A context of 1 tokens is too short"):
        check_sizes(1, 64)
    with pytest.raises(AttentionInputError, match="A vocabulary of 1 tokens is too small"):
        check_sizes(4, 1)
    with pytest.raises(AttentionInputError, match="context of 4 or more"):
        check_sizes(3, 64)
    with pytest.raises(AttentionInputError, match="vocabulary of at least 16"):
        check_sizes(32, 15)
