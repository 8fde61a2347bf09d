"""attention_core.lessons.learning: the learning page's sentences and questions, from scores
built by hand (steps every 25; layer 0's head 1 a previous-token head, layer 1's head 0 an
induction head)."""

import numpy as np
import pytest

from attention_core.lessons.learning import (
    first_formed_question,
    induction_layer_question,
    one_layer_sentence,
    phase_change_sentence,
)

STEPS = np.arange(0, 300, 25)  # 12 checkpoints


def scores(previous_from: int | None, induction_from: int | None):
    """(previous, induction) `(checkpoint, 2, 2)`: 0.1 and 0.05 everywhere, rising to 0.5 and
    0.9 from the given steps for heads 0.1 and 1.0."""
    previous = np.full((12, 2, 2), 0.1)
    induction = np.full((12, 2, 2), 0.05)
    if previous_from is not None:
        previous[STEPS >= previous_from, 0, 1] = 0.5
    if induction_from is not None:
        induction[STEPS >= induction_from, 1, 0] = 0.9
    return previous, induction


def test_the_sentence_names_the_phase_change_and_its_previous_token_head():
    said = phase_change_sentence(STEPS, *scores(50, 200))
    assert said == (
        "At step 200 head 1.0 became an induction head (prefix matching 0.90, past 0.4), 150 "
        "steps after head 0.1 became a previous-token head (0.50)."
    )
    together = phase_change_sentence(STEPS, *scores(225, 200))
    assert (
        "25 steps before head 0.1" in together and "form together, in one phase change" in together
    )
    same = phase_change_sentence(STEPS, *scores(200, 200))
    assert "at the same step as head 0.1" in same and "form together" in same


def test_the_sentence_says_when_nothing_formed_or_no_earlier_head_did():
    assert phase_change_sentence(STEPS, *scores(None, None)) == (
        "No head has become an induction head by step 275: the best prefix-matching score is "
        "head 0.0's 0.05, and an induction head passes 0.4."
    )
    lonely = phase_change_sentence(STEPS, *scores(None, 100))
    assert lonely.endswith(
        "before any head of an earlier layer passed 0.3 as a previous-token head."
    )


def test_one_layer_says_why_with_its_numbers():
    said = one_layer_sentence(0.123, 0.0456)
    assert "only a head of an earlier layer can write that" in said
    assert said.endswith(
        "best prefix-matching score is 0.12, against 0.05 for attention spread evenly over the "
        "past."
    )


def test_which_layer_is_pending_until_the_run_ends_then_answered():
    induction = scores(50, 200)[1]
    pending = induction_layer_question(2, STEPS, induction, finished=False)
    assert pending.pending and pending.correct == frozenset()
    assert pending.options == ("Layer 0", "Layer 1", "No layer: none forms")
    answered = induction_layer_question(2, STEPS, induction, finished=True)
    assert not answered.pending and answered.correct == frozenset({1})
    assert "Head 1.0 ends at 0.90" in answered.explanation
    # Same prompt and options: a prediction locked in while pending is judged by the answer.
    assert (pending.prompt, pending.options) == (answered.prompt, answered.options)
    none = induction_layer_question(2, STEPS, scores(50, None)[1], finished=True)
    assert none.correct == frozenset({2}) and "best is head 0.0 at 0.05" in none.explanation
    one = induction_layer_question(1, STEPS, np.full((12, 1, 4), 0.1), finished=True)
    assert one.options == ("Layer 0", "No layer: none forms") and one.correct == frozenset({1})
    assert "One layer cannot compose two heads." in one.explanation


@pytest.mark.parametrize(
    ("previous_from", "induction_from", "right"),
    [(50, 200, 0), (250, 100, 1), (225, 200, 2), (200, 250, 2), (None, None, 3), (None, 100, 1)],
)
def test_which_forms_first(previous_from, induction_from, right):
    previous, induction = scores(previous_from, induction_from)
    assert first_formed_question(STEPS, previous, induction, finished=False).pending
    question = first_formed_question(STEPS, previous, induction, finished=True)
    assert question.correct == frozenset({right})
    if right == 2:
        assert "form together, in one phase change" in question.explanation
