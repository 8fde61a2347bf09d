"""Head-pattern detectors, checked on hand-built attention patterns whose scores are derived
by hand in each test (positions from 0, w[i, j] = weight of query i on key j)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.head_patterns import HEAD_PATTERNS, head_average, head_patterns


def one_hot_rows(columns: list[int], n: int) -> np.ndarray:
    w = np.zeros((n, n))
    w[np.arange(n), columns] = 1.0
    return w


def scores_of(w: np.ndarray, **options) -> dict[str, float]:
    """Every score of a single head `(n, n)`, as plain floats."""
    result = head_patterns(w[None], **options)
    return {p: float(result.score(p)[0]) for p in HEAD_PATTERNS} | {"label": str(result.labels[0])}


def test_previous_token_head():
    # Row 0 has no previous token and looks at itself; rows 1..3 put all weight on i-1.
    w = one_hot_rows([0, 0, 1, 2], 4)
    s = scores_of(w)
    assert s["previous"] == 1.0  # w[1,0] = w[2,1] = w[3,2] = 1
    assert s["next"] == 0.0
    assert s["self"] == pytest.approx(1 / 4)  # only w[0,0] = 1 on the diagonal
    assert s["cls"] == pytest.approx(2 / 4)  # column 0 holds rows 0 and 1
    assert s["sep"] == 0.0  # nobody looks at the last token
    assert s["broad"] == 0.0  # one-hot rows have zero entropy
    assert s["label"] == "previous"


def test_uniform_head_is_broad():
    w = np.full((4, 4), 0.25)
    s = scores_of(w)
    for pattern in ("previous", "next", "self", "cls", "sep"):
        assert s[pattern] == pytest.approx(0.25)
    assert s["broad"] == pytest.approx(1.0)  # H = log 4 on every row
    assert s["label"] == "broad"


def test_sep_sink_head():
    # Every query gives everything to the last token, [SEP].
    w = one_hot_rows([4] * 5, 5)
    s = scores_of(w)
    assert s["sep"] == 1.0
    assert s["next"] == pytest.approx(1 / 4)  # only w[3,4] among w[0,1], w[1,2], w[2,3], w[3,4]
    assert s["self"] == pytest.approx(1 / 5)  # only w[4,4]
    assert s["cls"] == 0.0
    assert s["label"] == "sep"


def test_cls_and_self_heads():
    assert scores_of(one_hot_rows([0] * 3, 3))["label"] == "cls"
    s = scores_of(np.eye(3))
    assert (s["self"], s["previous"], s["next"], s["label"]) == (1.0, 0.0, 0.0, "self")


def test_next_token_head():
    # Rows 0..2 look one ahead; the last row has no next token and looks at itself.
    s = scores_of(one_hot_rows([1, 2, 3, 3], 4))
    assert s["next"] == 1.0
    assert s["label"] == "next"


def test_mixed_head_by_hand():
    w = np.array([[0.6, 0.4, 0.0], [0.2, 0.4, 0.4], [0.4, 0.4, 0.2]])
    s = scores_of(w)
    assert s["previous"] == pytest.approx((0.2 + 0.4) / 2)  # w[1,0], w[2,1]
    assert s["next"] == pytest.approx((0.4 + 0.4) / 2)  # w[0,1], w[1,2]
    assert s["self"] == pytest.approx((0.6 + 0.4 + 0.2) / 3)
    assert s["cls"] == pytest.approx((0.6 + 0.2 + 0.4) / 3)
    assert s["sep"] == pytest.approx((0.0 + 0.4 + 0.2) / 3)
    # Entropies: row 0 −(.6 ln .6 + .4 ln .4) ≈ 0.6730; rows 1 and 2 −(.2 ln .2 + 2·.4 ln .4)
    # ≈ 1.0549; mean ≈ 0.9276, over ln 3 ≈ 1.0986 gives ≈ 0.8443.
    h0 = -(0.6 * math.log(0.6) + 0.4 * math.log(0.4))
    h1 = -(0.2 * math.log(0.2) + 2 * 0.4 * math.log(0.4))
    assert s["broad"] == pytest.approx((h0 + 2 * h1) / 3 / math.log(3))
    assert s["broad"] == pytest.approx(0.8443, abs=1e-4)
    # No targeted score reaches 0.5; the spread passes 0.8 but not 0.9.
    assert s["label"] == "broad"
    assert scores_of(w, broad_threshold=0.9)["label"] == "mixed"
    # A one-hot previous-token head is "mixed" once the bar is above its score of 1.
    assert scores_of(one_hot_rows([0, 0, 1, 2], 4), threshold=1.01)["label"] == "mixed"


def test_ties_go_to_the_earlier_pattern():
    # Two tokens, both rows on key 0: previous (w[1,0] = 1) and cls (column 0 = 1) tie.
    s = scores_of(np.array([[1.0, 0.0], [1.0, 0.0]]))
    assert s["previous"] == s["cls"] == 1.0
    assert s["label"] == "previous"


def test_several_special_positions_are_summed():
    # Weight .3 on key 0 and .3 on key 2 and .4 on key 4 in every row.
    row = np.array([0.3, 0.0, 0.3, 0.0, 0.4])
    w = np.tile(row, (5, 1))
    s = scores_of(w, sep_positions=(2, -1), cls_positions=(0, 0))
    assert s["sep"] == pytest.approx(0.7)
    assert s["cls"] == pytest.approx(0.3)  # a repeated position counts once


def test_batched_layers_and_heads_match_single_heads():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 6, 6))
    w = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    batched = head_patterns(w)
    assert batched.labels.shape == (2, 3)
    for layer in range(2):
        for head in range(3):
            single = scores_of(w[layer, head])
            for pattern in HEAD_PATTERNS:
                assert batched.score(pattern)[layer, head] == pytest.approx(single[pattern])
            # previous straight from the definition: mean of w[i, i-1]
            expected = np.mean([w[layer, head, i, i - 1] for i in range(1, 6)])
            assert batched.previous[layer, head] == pytest.approx(expected)
            assert batched.labels[layer, head] == single["label"]


def test_label_score_and_special_share():
    w = np.stack([one_hot_rows([0, 0, 1, 2], 4), one_hot_rows([3] * 4, 4), np.full((4, 4), 0.25)])
    result = head_patterns(w)
    assert list(result.labels) == ["previous", "sep", "broad"]
    np.testing.assert_allclose(result.label_score(), [1.0, 1.0, 1.0])
    # cls + sep per head: 2/4 + 0, 0 + 1, 0.25 + 0.25 -> mean (0.5 + 1 + 0.5) / 3
    assert result.special_share() == pytest.approx(2 / 3)


def test_head_average():
    rng = np.random.default_rng(1)
    w = rng.dirichlet(np.ones(5), size=(2, 4, 5))  # (layer, head, q, k)
    avg = head_average(w)
    assert avg.shape == (2, 5, 5)
    np.testing.assert_allclose(avg[1, 3], sum(w[1, h, 3] for h in range(4)) / 4)
    np.testing.assert_allclose(avg.sum(-1), 1.0)


@pytest.mark.parametrize(
    ("weights", "options", "message"),
    [
        (np.full((1, 2, 3), 1 / 3), {}, "self-attention"),
        (np.ones((1, 1, 1)), {}, "at least 2 tokens"),
        (np.array([[[1.5, -0.5], [0.5, 0.5]]]), {}, "between 0 and 1"),
        (np.full((1, 3, 3), 1 / 3), {"sep_positions": (3,)}, "outside the 3 tokens"),
        (np.full((1, 3, 3), 1 / 3), {"cls_positions": (0.5,)}, "whole-number"),
        (np.full((3, 3), 1 / 3), {}, "at least 3"),
    ],
)
def test_bad_input_is_explained(weights, options, message):
    with pytest.raises(AttentionInputError, match=message):
        head_patterns(weights, **options)


def test_unknown_pattern_name():
    result = head_patterns(np.full((1, 3, 3), 1 / 3))
    with pytest.raises(AttentionInputError, match="not a head pattern"):
        result.score("diagonal")
