"""What the "why a head attends there" page says (attention_core.lessons.attends), on splits
worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from attention_core.lessons import attends
from attention_core.validation import AttentionInputError

NAMES = ("token embedding", "head 0.1", "head 1.0", "MLP 1", "biases")


def test_the_cause_is_the_largest_part_of_the_keys_excess():
    above = np.zeros((5, 3))
    above[:, 2] = [0.5, 3.0, 0.25, 0.25, 0.0]  # head 0.1 carries 3.0 of 4.0
    sentence = attends.cause_sentence("Head 2.3", " fox", " jumps", NAMES, above, key=2)
    assert sentence == (
        "Head 2.3 attends from ‘ fox’ to ‘ jumps’ mostly because of what head 0.1 wrote at "
        "‘ jumps’ (+3.0 of the +4.0 by which its score beats the average visible key's)."
    )
    above[:, 2] = [1.0, 1.5, 1.0, 0.5, 0.0]  # the largest, but not half of 4.0
    assert "most of all because of what head 0.1" in attends.cause_sentence(
        "Head 2.3", " fox", " jumps", NAMES, above, key=2
    )


def test_a_key_below_the_average_is_said_to_be_so():
    above = np.zeros((5, 2))
    above[:, 1] = [-2.0, 0.5, 0.0, 0.0, 0.0]
    sentence = attends.cause_sentence("Head 0.0", "a", "b", NAMES, above, key=1)
    assert sentence.startswith("Head 0.0 gives ‘b’ no more than the average key from ‘a’")
    assert "-1.5 from the visible keys' mean" in sentence
    assert "what head 0.1 wrote there (+0.5)" in sentence


def test_the_largest_terms_are_ordered_by_size_with_their_sign():
    terms = np.zeros((3, 3, 2))
    terms[0, 1, 1], terms[2, 2, 1], terms[1, 0, 1] = 2.0, -5.0, 1.0
    terms[0, 0, 0] = 99.0  # another key's
    assert attends.largest_terms(NAMES[:3], terms, key=1, count=2) == [
        ("head 1.0", "head 1.0", -5.0),
        ("token embedding", "head 0.1", 2.0),
    ]


@pytest.mark.parametrize(
    ("bands", "made"),
    [
        ([[4.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], "fast-turning pairs: position"),
        ([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [3.0, 0.0]], "slow-turning pairs"),
        ([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], "fast and slow pairs alike"),
    ],
)
def test_the_bands_that_carry_the_attended_keys_name_the_pattern(bands, made):
    weights = np.array([1.0, 0.0])  # all on key 0: key 1's parts do not count
    sentence = attends.band_sentence("Head 3.1", np.array(bands), weights)
    assert made in sentence


def test_the_band_shares_are_computed_where_the_weight_goes():
    bands = np.array([[3.0, -10.0], [1.0, 10.0]])  # key 1 would make it slow
    sentence = attends.band_sentence("Head 3.1", bands, np.array([0.75, 0.25]))
    # Fast: 0.75·3 − 0.25·10 = −0.25; slow: 0.75 + 2.5 = 3.25; total 3.0.
    assert "(-8% from the faster half of the pairs, 108% from the slower)" in sentence


def test_a_pattern_no_band_makes_is_said_so():
    sentence = attends.band_sentence("Head 3.1", np.array([[-1.0], [0.0]]), np.array([1.0]))
    assert "not made by the rotation's frequencies" in sentence


def test_the_dominant_source_names_the_kind_of_head():
    names = ("token embedding", "position embedding", "head 0.1", "MLP 0", "biases")
    cases = {
        (5.0, 1.0, 1.0, 0.0, 0.0): "content",
        (1.0, 6.0, 1.0, 0.0, 0.0): "positional",
        (1.0, 1.0, 6.0, 0.0, 0.0): "induction",
        (1.0, 1.0, 1.0, 7.0, -3.0): "composed",
    }
    for totals, kind in cases.items():
        said, sentence = attends.head_kind(names, np.array(totals), previous_heads={"head 0.1"})
        assert said == kind
    _, sentence = attends.head_kind(names, np.array((1.0, 1.0, 6.0, 0, 0)), {"head 0.1"})
    assert sentence == (
        "Over the whole pattern, 75% of what sets the attended keys apart is what head 0.1, a "
        "previous-token head, wrote at each key: the token before it (K-composition)."
    )
    # Another head that is not a previous-token head composes, but not as an induction head.
    assert attends.head_kind(names, np.array((1.0, 1.0, 6.0, 0, 0)), set())[0] == "composed"
    with pytest.raises(AttentionInputError, match="5 names for 2 sources"):
        attends.head_kind(names, np.zeros(2), set())


def test_the_question_offers_the_largest_sources_and_content_alone():
    above = np.zeros((5, 1))
    above[:, 0] = [-1.0, 0.5, 4.0, 2.0, 0.0]
    question = attends.source_question("Head 2.0", "x", "y", NAMES, above, key=0)
    assert question.options == ("token embedding", "head 0.1", "head 1.0", "MLP 1")
    assert question.answer == "head 1.0"
    assert question.is_right(2) and not question.is_right(3)
    assert question.explanation == (
        "What head 1.0 wrote at ‘y’ adds +4.0 to its score above the average visible key's; "
        "MLP 1 +2.0, head 0.1 +0.5."
    )
