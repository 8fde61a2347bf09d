"""Predict-then-reveal questions, against hand-worked numbers and one-line NumPy formulas.

Every expected answer is recomputed here: softmax(QKᵀ/√d_k) for "which key wins", its max and
entropy with and without the scale, the mask's row for "which keys can query 2 see", the mean
of each head's diagonal below the main one for "previous token", Σ cos(ω_i k) for positions.
"""

import math

import numpy as np
import pytest

from attention_core import causal_mask, combine_masks, padding_mask, scaled_dot_product_attention
from attention_core.lessons.position_experiments import order_blindness
from attention_core.lessons.quiz import (
    NOTHING,
    QUESTIONS,
    TIE,
    attention_agrees_with_hiding,
    head_attends_to_previous,
    nearest_position,
    parse_question_ids,
    reorder_changes_outputs,
    row_weight_sum,
    visible_keys,
    weights_without_scale,
    winning_key,
)


def np_softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def labels(n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(n)]


# The 3-token example worked by hand: q3 = (1, 1) against k = (1, 1), (1, 0), (0, 1) scores
# 2, 1, 1; divided by √2: 1.414, 0.707, 0.707; weights e^1.414 / (e^1.414 + 2e^0.707) = 0.503.
Q3 = np.array([[1.0, 0], [0, 1], [1, 1]])
K3 = np.array([[1.0, 1], [1, 0], [0, 1]])
V3 = np.array([[1.0, 0], [0, 1], [1, 1]])


def test_winner_of_the_hand_worked_row():
    steps = scaled_dot_product_attention(Q3, K3, V3)
    question = winning_key(steps, 2, ["the", "cat", "sat"], ["the", "cat", "sat"])
    assert question.correct == {0}
    assert question.options[0] == "1 · the"
    top = math.exp(2 / math.sqrt(2)) / (math.exp(2 / math.sqrt(2)) + 2 * math.exp(1 / math.sqrt(2)))
    assert f"{top:.3f}" == "0.503"
    assert "0.503" in question.explanation and "1.414" in question.explanation
    assert question.is_right(0) and not question.is_right(1) and not question.is_right(None)


@pytest.mark.parametrize("seed", range(8))
def test_winner_is_numpy_argmax_of_the_softmax(seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    weights = np_softmax(q @ k.T / math.sqrt(3))
    steps = scaled_dot_product_attention(q, k, v)
    for row in range(4):
        question = winning_key(steps, row, labels(4, "q"), labels(5, "k"))
        assert question.correct == {int(np.argmax(weights[row]))}
        assert f"{weights[row].max():.3f}" in question.explanation


def test_a_tie_is_its_own_answer_and_each_tied_key_counts():
    k = np.array([[2.0, 0], [0, 1], [2, 0]])  # keys 1 and 3 are the same vector
    steps = scaled_dot_product_attention(np.array([[1.0, 0]]), k, np.eye(3, 2))
    question = winning_key(steps, 0, ["q"], ["a", "b", "c"])
    tie = question.options.index(TIE)
    assert question.correct == {0, 2, tie}
    assert not question.is_right(1)
    assert "tie" in question.explanation


def test_a_fully_masked_row_has_no_winner():
    allowed = np.array([[True, True], [False, False]])
    steps = scaled_dot_product_attention(np.eye(2), np.eye(2), np.eye(2), mask=allowed)
    question = winning_key(steps, 1, ["a", "b"], ["a", "b"])
    assert question.answer == NOTHING
    assert "−∞" in question.explanation


@pytest.mark.parametrize("seed", range(6))
def test_without_the_scale_the_weights_get_sharper(seed):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((3, 4)), rng.standard_normal((6, 4))
    scaled, unscaled = np_softmax(q @ k.T / 2.0)[2], np_softmax(q @ k.T)[2]

    def entropy(p):
        return -(p * np.log(p)).sum()

    question = weights_without_scale(q, k, 2, labels(3, "q"))
    sharper = unscaled.max() > scaled.max()
    assert sharper and entropy(unscaled) < entropy(scaled)  # what softmax(β s), β = 2 > 1, does
    assert question.answer.startswith("Sharper")
    for number in (scaled.max(), unscaled.max(), entropy(scaled), entropy(unscaled)):
        assert f"{number:.3f}" in question.explanation


def test_without_the_scale_with_the_causal_mask_uses_only_visible_keys():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    row = 1  # sees keys 1 and 2 only
    scaled = np_softmax(q[row] @ k[:2].T / 2.0)
    question = weights_without_scale(q, k, row, labels(4, "q"), causal=True)
    assert f"{scaled.max():.3f}" in question.explanation
    assert "0.000, 0.000" in question.explanation  # the two future keys


@pytest.mark.parametrize(
    ("q", "k", "row", "causal", "reason"),
    [
        (np.array([[2.0], [1.0]]), np.array([[1.0], [3.0]]), 0, False, "√1 = 1"),
        (np.zeros((2, 4)), np.ones((3, 4)), 1, False, "scores this query sees are equal"),
        (np.ones((3, 4)), np.arange(12.0).reshape(3, 4), 0, True, "single key"),
    ],
)
def test_no_change_without_the_scale_says_why(q, k, row, causal, reason):
    question = weights_without_scale(q, k, row, labels(q.shape[0], "q"), causal=causal)
    assert question.answer == "No change"
    assert reason in question.explanation


def test_causal_query_2_sees_keys_1_and_2():
    tokens = ["the", "cat", "sat", "on", "the"]
    question = visible_keys(causal_mask(5), 1, tokens, "Causal")
    assert question.multiple
    assert question.correct == set(np.flatnonzero(np.tril(np.ones((5, 5), bool))[1]))
    assert question.is_right([0, 1]) and question.is_right([1, 0])
    assert not question.is_right([0]) and not question.is_right([0, 1, 2])
    assert "blocks 3 · sat, 4 · on, 5 · the" in question.explanation


def test_visible_keys_follow_a_combined_mask_and_no_mask():
    allowed = combine_masks(causal_mask(4), padding_mask([True, False, True, True], 4))
    assert visible_keys(allowed, 2, list("abcd"), "x").correct == {0, 2}
    assert visible_keys(None, 1, list("abcd"), "no mask").correct == {0, 1, 2, 3}


def test_a_fully_masked_query_sees_nothing_and_sums_to_zero():
    allowed = np.array([[True, False], [False, False]])
    question = visible_keys(allowed, 1, ["a", "b"], "custom")
    assert question.answer == NOTHING
    steps = scaled_dot_product_attention(np.eye(2), np.eye(2), np.eye(2), mask=allowed)
    total = row_weight_sum(steps, 1, ["a", "b"])
    assert total.answer == "0"
    assert "NaN" in total.explanation


def test_masked_weights_sum_to_one():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((3, 5, 4))
    steps = scaled_dot_product_attention(q, k, v, mask=causal_mask(5))
    question = row_weight_sum(steps, 1, list("abcde"))
    w = np_softmax(q[1] @ k[:2].T / 2.0)
    assert question.answer == "Exactly 1"
    assert f"{w[0]:.3f} + {w[1]:.3f} = 1.000" in question.explanation


def test_previous_token_head_built_by_hand():
    n = 4
    uniform = np.full((n, n), 1 / n)
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1.0  # the first token has no previous one: it looks at itself
    weights = np.stack([uniform, previous, np.eye(n)])  # (head, q_pos, k_pos)
    question = head_attends_to_previous(weights, list("abcd"))
    assert question.answer == "head 2"
    assert "head 1: 0.250; head 2: 1.000; head 3: 0.000" in question.explanation


@pytest.mark.parametrize("seed", range(4))
def test_previous_token_head_is_numpy_argmax_of_the_subdiagonal(seed):
    rng = np.random.default_rng(seed)
    weights = np_softmax(rng.standard_normal((4, 6, 6)) * 3)
    means = np.array([np.diagonal(w, offset=-1).mean() for w in weights])
    question = head_attends_to_previous(weights, labels(6, "t"))
    assert question.correct == {int(np.argmax(means))}


def test_identical_heads_tie():
    weights = np.stack([np.eye(3, k=-1) + np.diag([1.0, 0, 0])] * 2)
    question = head_attends_to_previous(weights, list("abc"))
    assert question.correct == {0, 1, 2}


def test_reordering_without_positions_changes_no_output():
    tokens = ("the", "cat", "sat")
    blind = order_blindness(tokens, np.array([2, 1, 0]), 4, encoding="none")
    question = reorder_changes_outputs(
        tokens, blind.permuted.tokens, blind.max_abs_difference, 1.0, "none"
    )
    assert question.answer.startswith("No")
    with_positions = order_blindness(tokens, np.array([2, 1, 0]), 4, encoding="sinusoidal")
    changed = reorder_changes_outputs(
        tokens, with_positions.permuted.tokens, with_positions.max_abs_difference, 1.0, "sin"
    )
    assert changed.answer.startswith("Yes")
    assert f"{with_positions.max_abs_difference:.2e}" in changed.explanation


def test_a_reversed_palindrome_moves_its_words_and_one_word_stays_put():
    # “a b a” reversed reads the same, but the first “a” now stands last: with positions its
    # output is the last position's, which differs.
    tokens = ("a", "b", "a")
    blind = order_blindness(tokens, np.array([2, 1, 0]), 4, encoding="sinusoidal")
    assert blind.permuted.tokens == tokens
    question = reorder_changes_outputs(
        tokens, blind.permuted.tokens, blind.max_abs_difference, 1.0, "sinusoidal"
    )
    assert question.answer.startswith("Yes")
    alone = order_blindness(("a",), np.array([0]), 4, encoding="sinusoidal")
    assert alone.max_abs_difference == 0.0
    stays = reorder_changes_outputs(("a",), ("a",), 0.0, 1.0, "sinusoidal")
    assert stays.answer.startswith("No")
    assert "leaves every word where it was" in stays.explanation


@pytest.mark.parametrize(("d_model", "base"), [(2, 10000.0), (4, 10.0), (64, 10000.0), (8, 2.0)])
def test_nearest_position_is_numpy_argmax_of_the_cosine_sum(d_model, base):
    omega = base ** (-np.arange(0, d_model, 2) / d_model)  # (d_model/2,)
    dots = np.cos(np.outer(np.arange(1, 9), omega)).sum(axis=1)  # k = 1..8
    question = nearest_position(d_model, base)
    assert question.correct == {int(np.argmax(dots))}


def test_nearest_position_for_one_frequency_is_a_full_turn_away():
    # d_model = 2: PE(p)·PE(p + k) = cos k, largest for k = 1..8 at k = 6 (6 ≈ 2π − 0.28).
    question = nearest_position(2, 10000.0)
    assert question.answer == "k = 6"
    assert f"{math.cos(6):.3f}" in question.explanation


def test_link_ids_keep_this_pages_and_explain_the_rest():
    where = {"mask": "the masking lab page"}
    asked, problems = parse_question_ids("sdpa.noscale, mask.row2,nope,sdpa.noscale", "sdpa", where)
    assert asked == ["sdpa.noscale"]
    assert problems == [
        "`mask.row2` is asked on the masking lab page, not here.",
        "`nope` is not a question; this page asks `sdpa.winner`, `sdpa.noscale`.",
    ]
    assert parse_question_ids("", "pe") == ([], [])
    # Without a place for the prefix, the message still says it is another page's question.
    assert parse_question_ids("mask.row2", "sdpa")[1] == [
        "`mask.row2` is asked on another page, not here."
    ]
    assert all(
        qid.split(".")[0]
        in {"sdpa", "mask", "mha", "pe", "bert", "heads", "patching", "learning", "attends"}
        for qid in QUESTIONS
    )


def test_a_trained_layer_asks_the_pretrained_pages_question():
    weights = np.stack([np.full((3, 3), 1 / 3), np.eye(3, k=-1) + np.diag([1.0, 0, 0])])
    question = head_attends_to_previous(weights, ["[CLS]", "hi", "[SEP]"], layer=2)
    assert question.id == "bert.previous" and question.id in QUESTIONS
    assert question.prompt.startswith("In layer 3: which of the 2 heads")
    assert question.answer == "head 2"


def test_precomputed_previous_scores_give_the_same_question():
    rng = np.random.default_rng(5)
    weights = np_softmax(rng.standard_normal((3, 5, 5)))
    means = np.array([np.diagonal(w, offset=-1).mean() for w in weights])
    direct = head_attends_to_previous(weights, labels(5, "t"), layer=0)
    given = head_attends_to_previous(None, labels(5, "t"), layer=0, previous=means)
    assert direct == given


def test_the_most_attended_token_against_the_one_whose_hiding_matters():
    tokens = ["The", " capital", " of", " France"]
    # Attention piles onto the first token (a sink); hiding " France" changes the most.
    question = attention_agrees_with_hiding(
        [0.7, 0.1, 0.05, 0.15], [0.01, 0.2, 0.05, 1.3], tokens, " is"
    )
    assert question.id == "heads.agree"
    assert question.correct == frozenset({1})
    assert "1 · The" in question.prompt and "0.700" in question.prompt
    assert "4 ·  France" in question.explanation and "1.3000" in question.explanation
    agreeing = attention_agrees_with_hiding([0.1, 0.6, 0.3], [0.0, 2.0, 1.0], tokens[:3], "x")
    assert agreeing.correct == frozenset({0}) and agreeing.is_right(0)
    with pytest.raises(ValueError, match="one value per key"):
        attention_agrees_with_hiding([1.0], [1.0], ["a"], "a")


def test_the_answer_reaches_the_last_token_at_the_first_boundary_past_half():
    from attention_core.lessons.patching_quiz import answer_reaches_last_token
    from attention_core.validation import AttentionInputError

    # Boundaries 0..10 in five bands: 0–1, 2–3, 4–6, 7–8, 9–10 (edges 0, 2, 4, 7, 9, 11).
    shares = [0.0, 0.0, 0.1, 0.2, 0.3, 0.4, 0.45, 0.55, 0.9, 1.0, 1.0]
    question = answer_reaches_last_token(shares)
    assert question.id == "patching.arrives" and len(question.options) == 6
    assert question.options[0] == "the embedding to after layer 1"
    assert question.answer == "after layer 7 to after layer 8"  # 0.55 at boundary 7
    assert "From after layer 7" in question.explanation and "55%" in question.explanation
    assert question.is_right(3) and not question.is_right(2)
    never = answer_reaches_last_token([0.1] * 11)
    assert never.answer.startswith("Never") and "10%" in never.explanation
    assert answer_reaches_last_token([0.7] * 11).answer.startswith("the embedding")
    with pytest.raises(AttentionInputError):
        answer_reaches_last_token([0.5, 0.6])
