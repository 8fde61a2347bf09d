"""Choosing the next token (attention_core.sampling) against hand-worked examples, properties that
hold for any logits, and Hugging Face transformers' own logits processors on the same logits."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from transformers import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from attention_core import AttentionInputError
from attention_core.models.generation import Sampling, next_token_probabilities
from attention_core.sampling import (
    apply_temperature,
    continuation_probability,
    greedy_token,
    min_p_filter,
    sample_token,
    sampling_steps,
    top_k_filter,
    top_p_filter,
)

PROPERTY = settings(max_examples=60, deadline=None)
# Probabilities 1/2, 1/4, 1/8, 1/8: each stage's numbers can be worked out by hand.
HALVES = np.log([4.0, 2.0, 1.0, 1.0])
logits_rows = arrays(np.float64, st.integers(1, 40), elements=st.floats(-30, 30))
# transformers sorts equal logits in no set order: its kept sets are compared on distinct ones.
distinct_logits_rows = arrays(
    np.float64, st.integers(1, 40), elements=st.floats(-30, 30), unique=True
)
temperatures = st.floats(0.05, 3.0)
top_ks = st.integers(0, 45)
top_ps = st.floats(0.01, 1.0)
min_ps = st.floats(0.0, 1.0)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


# -- hand-worked --------------------------------------------------------------------------------


def test_temperature_divides_the_logits_and_zero_is_greedy():
    # softmax([0, ln 3]) = [1/4, 3/4]; at T = 2 the logits are [0, ln √3]: [1, √3] / (1 + √3).
    z = np.array([0.0, math.log(3.0)])
    steps = apply_temperature(z, 2.0)
    np.testing.assert_allclose(steps.before, [0.25, 0.75], rtol=1e-15)
    np.testing.assert_allclose(steps.filtered, z / 2, rtol=1e-15)
    r = math.sqrt(3.0)
    np.testing.assert_allclose(steps.after, [1 / (1 + r), r / (1 + r)], rtol=1e-14)
    assert steps.kept.all() and steps.kept_mass == pytest.approx(1.0, abs=1e-15)
    assert steps.name == "temperature" and steps.setting == 2.0 and not steps.removed.any()
    # T = 1/2 squares the odds: [1, 9] / 10.
    np.testing.assert_allclose(apply_temperature(z, 0.5).after, [0.1, 0.9], rtol=1e-14)
    # T = 0: the limit, everything on the argmax; what it removed had 1/4 of the mass.
    greedy = apply_temperature(z, 0)
    np.testing.assert_array_equal(greedy.after, [0.0, 1.0])
    np.testing.assert_array_equal(greedy.kept, [False, True])
    np.testing.assert_array_equal(greedy.removed, [True, False])
    np.testing.assert_array_equal(greedy.filtered, [-np.inf, z[1]])
    assert greedy.kept_mass == pytest.approx(0.75, rel=1e-15) and greedy.kept_count == 1
    # Tied top logits: greedy takes the lowest id, as np.argmax and torch.argmax do.
    assert greedy_token([1.0, 3.0, 3.0]) == 1
    np.testing.assert_array_equal(apply_temperature([1.0, 3.0, 3.0], 0).kept, [0, 1, 0])


def test_top_k_keeps_the_k_largest_logits_and_their_ties():
    z = np.array([2.0, 1.0, 0.5, -1.0, 3.0])
    steps = top_k_filter(z, 2)
    np.testing.assert_array_equal(steps.kept, [True, False, False, False, True])
    e = math.e
    np.testing.assert_allclose(steps.after[[0, 4]], [1 / (1 + e), e / (1 + e)], rtol=1e-14)
    assert steps.after[[1, 2, 3]].sum() == 0
    np.testing.assert_array_equal(steps.filtered, [2.0, -np.inf, -np.inf, -np.inf, 3.0])
    mass = (np.exp(2.0) + np.exp(3.0)) / np.exp(z).sum()
    assert steps.kept_mass == pytest.approx(mass, rel=1e-14) and steps.kept_count == 2
    np.testing.assert_array_equal(steps.removed, ~steps.kept)
    # A token tied with the k-th largest stays (transformers keeps it too).
    np.testing.assert_array_equal(top_k_filter([2.0, 1.0, 1.0, 0.0], 2).kept, [1, 1, 1, 0])
    np.testing.assert_array_equal(top_k_filter([1.0, 2.0, 2.0, 0.0], 2).kept, [0, 1, 1, 0])
    # k = 0 is off; k = vocab and beyond keep everything; k = vocab - 1 drops the smallest.
    for k in (0, 5, 6):
        assert top_k_filter(z, k).kept.all()
    np.testing.assert_array_equal(top_k_filter(z, 4).kept, [1, 1, 1, 0, 1])
    np.testing.assert_array_equal(top_k_filter(z, 1).kept, [0, 0, 0, 0, 1])
    # A vocabulary-sized row, where np.partition leaves the rest unsorted: exactly the k best.
    shuffled = np.random.default_rng(3).permutation(5000).astype(np.float64)
    for k in (1, 2, 50, 1000, 4999):
        np.testing.assert_array_equal(top_k_filter(shuffled, k).kept, shuffled >= 5000 - k)
    # Tokens an earlier stage removed (−inf) stay removed even when k asks for more.
    np.testing.assert_array_equal(top_k_filter([0.0, -np.inf, 1.0], 3).kept, [1, 0, 1])
    np.testing.assert_array_equal(top_k_filter([0.0, -np.inf, 1.0], 2).kept, [1, 0, 1])
    np.testing.assert_array_equal(top_k_filter([0.0, -np.inf, 1.0], 2).removed, [0, 0, 0])


def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p():
    steps = top_p_filter(HALVES, 0.6)
    # Masses before each token: 0, 1/2, 3/4: the third would start at 3/4 ≥ 0.6.
    np.testing.assert_array_equal(steps.kept, [True, True, False, False])
    np.testing.assert_allclose(steps.after, [2 / 3, 1 / 3, 0, 0], rtol=1e-14)
    assert steps.kept_mass == pytest.approx(0.75, rel=1e-14)
    np.testing.assert_array_equal(steps.order, [0, 1, 2, 3])
    np.testing.assert_allclose(steps.cumulative, [0.5, 0.75, 0.875, 1.0], rtol=1e-14)
    assert steps.name == "top-p" and steps.setting == 0.6
    # p = 0.8: three tokens; of the tied 1/8s the lower id joins first.
    steps = top_p_filter(HALVES, 0.8)
    np.testing.assert_array_equal(steps.kept, [True, True, True, False])
    np.testing.assert_allclose(steps.after, [4 / 7, 2 / 7, 1 / 7, 0], rtol=1e-14)
    np.testing.assert_array_equal(top_p_filter(HALVES[::-1], 0.8).order, [3, 2, 0, 1])
    np.testing.assert_array_equal(top_p_filter(HALVES[::-1], 0.8).kept, [True, False, True, True])
    # A mass exactly p is enough: [1/2, 1/2] at p = 1/2 keeps one token, just above keeps both.
    np.testing.assert_array_equal(top_p_filter([0.0, 0.0], 0.5).kept, [True, False])
    np.testing.assert_array_equal(top_p_filter([0.0, 0.0], 0.5000001).kept, [True, True])
    # The top token always stays, however small p; p = 1 keeps every token, even one whose
    # probability underflows to 0.
    np.testing.assert_array_equal(top_p_filter(HALVES, 0.01).kept, [True, False, False, False])
    assert top_p_filter([0.0, -1000.0], 1.0).kept.all()
    np.testing.assert_array_equal(top_p_filter([0.0, -1000.0], 0.99).kept, [True, False])


def test_min_p_scales_its_bar_by_the_top_probability():
    steps = min_p_filter(HALVES, 0.3)
    assert steps.threshold == pytest.approx(0.15, rel=1e-14)
    np.testing.assert_array_equal(steps.kept, [True, True, False, False])
    np.testing.assert_allclose(steps.after, [2 / 3, 1 / 3, 0, 0], rtol=1e-14)
    assert steps.name == "min-p" and steps.kept_mass == pytest.approx(0.75, rel=1e-14)
    assert min_p_filter(HALVES, 0.2).kept.all()  # the bar 0.1 is under 1/8
    # Equal to the bar is enough: three equal tokens at min_p = 1 all stay.
    assert min_p_filter([0.0, 0.0, 0.0], 1.0).kept.all()
    np.testing.assert_array_equal(min_p_filter([0.0, 0.0, -1.0], 1.0).kept, [1, 1, 0])
    # min_p = 0 keeps every token the earlier stages left, even a probability of 0.
    assert min_p_filter([0.0, -1000.0], 0.0).kept.all()
    np.testing.assert_array_equal(min_p_filter([0.0, -np.inf], 0.0).kept, [True, False])


def test_the_stages_compose_in_transformers_order():
    # T = 1, k = 3 (a tie with the 3rd keeps all 4), p = 0.7 keeps 2, min-p 0.3 of 2/3 keeps both.
    steps = sampling_steps(HALVES, 1.0, 3, 0.7, 0.3)
    assert [s.name for s in steps.stages] == ["temperature", "top-k", "top-p", "min-p"]
    assert [s.kept_count for s in steps.stages] == [4, 4, 2, 2]
    for earlier, later in zip(steps.stages, steps.stages[1:], strict=False):
        assert later.logits is earlier.filtered  # each stage reads what the one before left
    np.testing.assert_allclose(steps.probabilities, [2 / 3, 1 / 3, 0, 0], rtol=1e-14)
    np.testing.assert_allclose(steps.model_probabilities, [0.5, 0.25, 0.125, 0.125], rtol=1e-14)
    np.testing.assert_array_equal(steps.logits, HALVES)
    np.testing.assert_array_equal(steps.kept, [True, True, False, False])
    assert steps.kept_mass == pytest.approx(0.75, rel=1e-14)
    # min-p reads the renormalised distribution: after p = 0.85 it sees [4/7, 2/7, 1/7] and a
    # bar of 0.45 · 4/7 = 0.257, which drops 1/7.
    steps = sampling_steps(HALVES, 1.0, 0, 0.85, 0.45)
    assert [s.kept_count for s in steps.stages] == [4, 4, 3, 2]
    assert steps.min_p.threshold == pytest.approx(0.45 * 4 / 7, rel=1e-14)
    # T = 1/2 squares the odds before any filter: [16, 4, 1, 1] / 22, and the kept mass is
    # measured in that tempered distribution.
    steps = sampling_steps(HALVES, 0.5, 0, 0.8, 0.0)
    np.testing.assert_allclose(steps.temperature.after, np.array([16, 4, 1, 1]) / 22, rtol=1e-14)
    np.testing.assert_array_equal(steps.kept, [True, True, False, False])
    assert steps.kept_mass == pytest.approx(20 / 22, rel=1e-14)
    np.testing.assert_allclose(steps.probabilities, [0.8, 0.2, 0, 0], rtol=1e-14)
    # Greedy leaves the filters nothing to do.
    steps = sampling_steps(HALVES, 0.0, 3, 0.5, 0.5)
    assert [s.kept_count for s in steps.stages] == [1, 1, 1, 1]
    assert steps.kept_mass == 1.0


def test_the_defaults_are_softmax_at_temperature_one():
    z = np.random.default_rng(4).normal(size=30) * 3
    steps = sampling_steps(z)
    np.testing.assert_allclose(steps.probabilities, softmax(z), rtol=1e-13)
    assert all(stage.kept.all() for stage in steps.stages)
    np.testing.assert_allclose(next_token_probabilities(z), softmax(z), rtol=1e-13)
    assert steps.stages[0].setting == 1.0 and steps.top_k.setting == 0
    assert steps.top_p.setting == 1.0 and steps.min_p.setting == 0.0


def test_a_seeded_draw_repeats_and_follows_the_kept_distribution():
    steps = sampling_steps(HALVES, 1.0, 0, 0.7, 0.0)  # [2/3, 1/3, 0, 0]
    draws = [sample_token(steps, np.random.default_rng(11)) for _ in range(3)]
    assert len(set(draws)) == 1
    rng = np.random.default_rng(0)
    counts = np.bincount([sample_token(steps, rng) for _ in range(6000)], minlength=4)
    assert counts[2:].sum() == 0
    assert counts[0] / 6000 == pytest.approx(2 / 3, abs=0.025)
    # The model's functions: a draw through them is this draw; greedy is the argmax.
    z = np.array([0.5, 2.0, 1.5, -1.0])
    for seed in range(5):
        expected = sample_token(sampling_steps(z, 0.8, 3, 0.9, 0.1), np.random.default_rng(seed))
        got = Sampling(temperature=0.8, top_k=3, top_p=0.9, min_p=0.1).choose(
            z, np.random.default_rng(seed)
        )
        assert got == expected
    assert Sampling(temperature=0.0, top_k=1, top_p=0.1).choose(z, None) == 1
    assert Sampling(temperature=0.5, top_k=1).choose(z, np.random.default_rng(0)) == 1
    np.testing.assert_allclose(
        next_token_probabilities(z, 0.8, 3, 0.9, 0.1),
        sampling_steps(z, 0.8, 3, 0.9, 0.1).probabilities,
        rtol=0,
    )
    np.testing.assert_array_equal(next_token_probabilities(z, 1.0, None, 0.5) > 0, [0, 1, 0, 0])


def test_continuation_probability_is_the_chain_rule():
    score = continuation_probability([0.5, 0.25, 0.8])
    assert score.log_probability == pytest.approx(math.log(0.1), rel=1e-14)
    assert score.probability == pytest.approx(0.1, rel=1e-14)
    np.testing.assert_array_equal(score.token_probabilities, [0.5, 0.25, 0.8])
    assert continuation_probability([1.0]).probability == 1.0
    never = continuation_probability([0.5, 0.0])
    assert never.log_probability == -math.inf and never.probability == 0.0
    assert continuation_probability([0.0, 1.0]).probability == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: apply_temperature([0.0, 1.0], -0.5), "0 (greedy) or positive"),
        (lambda: apply_temperature([0.0, np.nan], 1.0), "finite"),
        (lambda: apply_temperature([[0.0, 1.0]], 1.0), "at most 1"),
        (lambda: apply_temperature([-np.inf, -np.inf], 1.0), "no token is left"),
        (lambda: top_k_filter([0.0, 1.0], -1), "at least 0"),
        (lambda: top_k_filter([0.0, 1.0], 1.5), "whole number"),
        (lambda: top_p_filter([0.0, 1.0], 0.0), "(0, 1]"),
        (lambda: top_p_filter([0.0, 1.0], 1.5), "(0, 1]"),
        (lambda: top_p_filter([0.0, 1.0], -0.5), "(0, 1]"),
        (lambda: min_p_filter([0.0, 1.0], -0.1), "[0, 1]"),
        (lambda: min_p_filter([0.0, 1.0], 1.1), "[0, 1]"),
        (lambda: continuation_probability([0.5, 1.5]), "[0, 1]"),
        (lambda: continuation_probability([-0.5]), "[0, 1]"),
        (lambda: continuation_probability([[0.5]]), "at most 1"),
        (lambda: next_token_probabilities([0.0, 1.0], 0.0), "positive"),
    ],
)
def test_bad_settings_are_explained(call, message):
    with pytest.raises(AttentionInputError, match=re.escape(message)):
        call()


def test_edges_of_each_range_are_accepted():
    z = [0.0, 1.0, 2.0]
    assert top_p_filter(z, 1.0).kept.all() and min_p_filter(z, 0.0).kept.all()
    assert min_p_filter(z, 1.0).kept_count == 1
    assert apply_temperature(np.array(z, dtype=np.float32), 1.0).after.dtype == np.float64
    np.testing.assert_allclose(continuation_probability([0.0, 1.0]).token_probabilities, [0, 1])


# -- properties ---------------------------------------------------------------------------------


@PROPERTY
@given(logits_rows, temperatures, top_ks, top_ps, min_ps)
def test_every_stage_renormalises_what_it_keeps(z, temperature, k, p, min_p):
    steps = sampling_steps(z, temperature, k, p, min_p)
    kept = np.isfinite(z)
    for stage in steps.stages:
        np.testing.assert_allclose(stage.after.sum(), 1.0, rtol=1e-12)
        assert (stage.after[~stage.kept] == 0).all()
        assert not (stage.kept & ~kept).any(), "a stage brought back a removed token"
        # A likeliest token of what the stage was given stays. Which one, among tokens whose
        # probabilities round to a tie (z / T, or logits 1e-308 apart), is the stage's order:
        # top-p's is by logit, argmax's by id.
        assert stage.before[stage.kept].max() == stage.before.max(), "the likeliest was removed"
        np.testing.assert_array_equal(stage.kept, np.isfinite(stage.filtered))
        np.testing.assert_allclose(stage.kept_mass, stage.before[stage.kept].sum(), rtol=1e-12)
        if stage.kept.any() and (~stage.kept & kept).any():
            # What a stage keeps is at least as likely as anything it removes.
            assert stage.before[stage.kept].min() >= stage.before[stage.removed].max()
        kept = stage.kept
    for stage in steps.stages[1:]:  # a filter only cuts: the kept tokens keep their ratios
        expected = stage.before[stage.kept] / stage.kept_mass
        np.testing.assert_allclose(stage.after[stage.kept], expected, rtol=1e-9)
    np.testing.assert_allclose(
        steps.kept_mass, np.prod([s.kept_mass for s in steps.stages[1:]]), rtol=1e-9
    )


@PROPERTY
# Distinct logits: with ties the k-th largest value keeps every token equal to it. Drawn distinct
# rather than filtered (`assume`), which threw away so many rows that hypothesis gave up.
@given(distinct_logits_rows, top_ks, top_ps, min_ps)
def test_each_filter_keeps_exactly_what_its_rule_says(z, k, p, min_p):
    by_k = top_k_filter(z, k)
    assert by_k.kept_count == (z.size if k == 0 else min(k, z.size))
    by_p = top_p_filter(z, p)
    kept_sorted = by_p.before[by_p.order][: by_p.kept_count]
    assert by_p.kept[by_p.order[: by_p.kept_count]].all()
    if p < 1:
        # Enough mass, and no token to spare: without its least likely token the set falls short.
        assert by_p.kept_mass >= p - 1e-12
        assert by_p.kept_mass - kept_sorted[-1] < p + 1e-12
    np.testing.assert_allclose(by_p.cumulative[-1], 1.0, rtol=1e-12)
    by_min_p = min_p_filter(z, min_p)
    np.testing.assert_array_equal(by_min_p.kept, by_min_p.before >= by_min_p.threshold)
    np.testing.assert_allclose(by_min_p.threshold, min_p * by_min_p.before.max(), rtol=1e-15)


@PROPERTY
@given(logits_rows, temperatures, temperatures)
def test_a_colder_temperature_sharpens_without_reordering(z, t1, t2):
    cold, warm = sorted((t1, t2))
    colder, warmer = apply_temperature(z, cold).after, apply_temperature(z, warm).after
    assert colder.max() >= warmer.max() - 1e-12
    # Greedy's token is the likeliest at every temperature (nearly equal logits may round to
    # equal probabilities, so compare values, not positions).
    top = greedy_token(z)
    assert colder[top] == colder.max() and warmer[top] == warmer.max()
    # Ranks are kept: a likelier token at one temperature is likelier at every other.
    order = np.argsort(-z, kind="stable")
    assert (np.diff(colder[order]) <= 1e-15).all() and (np.diff(warmer[order]) <= 1e-15).all()


# -- transformers --------------------------------------------------------------------------------


def transformers_filtered(z: np.ndarray, temperature: float, k: int, p: float, min_p: float):
    """transformers' warpers in generate's order, skipped at their neutral settings as generate
    skips them; float64 like ours. Returns the processed scores `(vocab,)`."""
    processors = [TemperatureLogitsWarper(float(temperature))]
    if k:
        processors.append(TopKLogitsWarper(k))
    if p < 1:
        processors.append(TopPLogitsWarper(p))
    if min_p:
        processors.append(MinPLogitsWarper(min_p))
    scores = torch.tensor(z, dtype=torch.float64)[None]
    return LogitsProcessorList(processors)(None, scores)[0]


def check_against_transformers(z, temperature, k, p, min_p):
    ours = sampling_steps(z, temperature, k, p, min_p)
    theirs = transformers_filtered(z, temperature, k, p, min_p)
    np.testing.assert_array_equal(ours.kept, torch.isfinite(theirs).numpy())
    np.testing.assert_allclose(ours.probabilities, torch.softmax(theirs, -1).numpy(), atol=1e-6)
    return ours


def near_a_boundary(z, temperature, k, p, min_p) -> bool:
    """A kept set that float rounding may decide either way (a mass or a probability within
    1e-9 of its bar, logits made equal by the temperature): transformers sums in another
    order there."""
    steps = sampling_steps(z, temperature, k, p, min_p)
    nucleus = steps.top_p
    mass_before = nucleus.cumulative - nucleus.before[nucleus.order]
    if p < 1 and np.isclose(mass_before, p, rtol=0, atol=1e-9).any():
        return True
    bar = steps.min_p
    if min_p and np.isclose(bar.before, bar.threshold, rtol=1e-9, atol=0).any():
        return True
    scaled = steps.top_k.filtered[steps.top_k.kept]
    return len(np.unique(scaled)) != scaled.size


@PROPERTY
@given(distinct_logits_rows, temperatures, top_ks, top_ps, min_ps)
def test_kept_sets_and_probabilities_equal_transformers_warpers(z, temperature, k, p, min_p):
    assume(not near_a_boundary(z, temperature, k, p, min_p))
    check_against_transformers(z, temperature, k, p, min_p)


@pytest.mark.parametrize(
    ("temperature", "k", "p", "min_p"),
    [(1.0, 0, 0.9, 0.0), (0.7, 50, 0.95, 0.0), (1.3, 0, 1.0, 0.05), (1.0, 40, 0.8, 0.1)],
)
def test_a_vocabulary_sized_row_equals_transformers(temperature, k, p, min_p):
    # 49152 logits shaped like a language model's: a few likely tokens and a long tail.
    rng = np.random.default_rng(7)
    z = rng.standard_t(3, size=49152) * 2.0
    z[rng.choice(z.size, 5, replace=False)] += np.array([9.0, 8.5, 8.0, 7.0, 6.0])
    ours = check_against_transformers(z, temperature, k, p, min_p)
    assert 1 < ours.min_p.kept_count < z.size  # the filters did something here
