"""attention_core.training.formation: first crossings of a line, and chance scores by hand."""

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.head_roles import induction_scores, previous_token_scores
from attention_core.masks import causal_mask
from attention_core.training.formation import Formation, chance_scores, formations


def test_each_head_is_found_at_its_first_checkpoint_on_the_line_earliest_first():
    steps = np.array([0, 25, 50, 75])
    scores = np.zeros((4, 2, 2))
    scores[:, 1, 0] = [0.1, 0.2, 0.5, 0.9]  # reaches 0.4 at step 50
    scores[:, 0, 1] = [0.1, 0.4, 0.3, 0.6]  # at step 25 (exactly on the line), dips, comes back
    scores[:, 1, 1] = [0.1, 0.2, 0.45, 0.2]  # at 50 too, with a lower score than head 1.0
    found = formations(steps, scores, 0.4)
    assert found == [
        Formation(0, 1, 25, 0.4),
        Formation(1, 0, 50, 0.5),
        Formation(1, 1, 50, 0.45),
    ]
    assert found[1].name == "1.0"
    assert formations(steps, scores, 0.95) == []


def test_scores_of_another_shape_are_refused():
    with pytest.raises(AttentionInputError, match="one row per step"):
        formations(np.arange(3), np.zeros((4, 2, 2)), 0.4)


def test_chance_is_what_uniform_causal_attention_scores():
    # 4 tokens, period 2: query i gives 1/(i+1) to each key. Previous: mean of 1/2, 1/3, 1/4;
    # induction: queries 2 and 3, mean of 1/3 and 1/4.
    previous, induction = chance_scores(4, 2)
    assert previous == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3, rel=1e-15)
    assert induction == pytest.approx((1 / 3 + 1 / 4) / 2, rel=1e-15)
    # A longer context than the two copies: the queries of the second copy only.
    assert chance_scores(10, 2)[1] == pytest.approx((1 / 3 + 1 / 4) / 2, rel=1e-15)
    uniform = causal_mask(32) / np.arange(1, 33)[:, None]
    assert chance_scores(32, 16) == pytest.approx(
        (previous_token_scores(uniform), induction_scores(uniform, 16)), rel=1e-12
    )
