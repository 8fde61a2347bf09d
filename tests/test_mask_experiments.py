"""The masking lab's experiments, against hand-worked grids, torch SDPA and float16 arithmetic."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core import AttentionInputError, masks
from attention_core.lessons.mask_experiments import (
    FLOAT16_MIN,
    MASK_KINDS,
    additive_mask_softmax,
    compare_mask,
    example_qkv,
    lab_mask,
    leak_curve,
    padded_batch,
    value_change_effect,
)

T, F_ = True, False


def torch_sdpa(q, k, v, mask=None):
    """Reference attention output from torch, float64."""
    args = [torch.from_numpy(np.ascontiguousarray(a)) for a in (q, k, v)]
    attn = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
    return F.scaled_dot_product_attention(*args, attn_mask=attn).numpy()


# -- lab_mask ------------------------------------------------------------------------------------


def test_lab_mask_each_kind_hand_written():
    assert lab_mask(3, []) is None
    np.testing.assert_array_equal(lab_mask(3, ["causal"]), [[T, F_, F_], [T, T, F_], [T, T, T]])
    # Position 2 (0-based) is padding: column 2 is blocked for every query.
    np.testing.assert_array_equal(
        lab_mask(3, ["padding"], padding=[2]), [[T, T, F_], [T, T, F_], [T, T, F_]]
    )
    # Window 2: query i sees keys i-1 and i.
    np.testing.assert_array_equal(
        lab_mask(4, ["window"], window=2),
        [[T, F_, F_, F_], [T, T, F_, F_], [F_, T, T, F_], [F_, F_, T, T]],
    )
    # Prefix of 2: keys 0 and 1 are visible to all, the rest causal.
    np.testing.assert_array_equal(
        lab_mask(4, ["prefix"], prefix_len=2),
        [[T, T, F_, F_], [T, T, F_, F_], [T, T, T, F_], [T, T, T, T]],
    )
    grid = [[T, F_, T], [F_, F_, F_], [T, T, T]]
    np.testing.assert_array_equal(lab_mask(3, ["custom"], custom=grid), grid)


def test_lab_mask_combines_with_and():
    # causal AND padding at position 1: the lower triangle without column 1.
    np.testing.assert_array_equal(
        lab_mask(3, ["causal", "padding"], padding=[1]),
        [[T, F_, F_], [T, F_, F_], [T, F_, T]],
    )
    # prefix AND causal is just causal (the prefix only adds keys above the diagonal).
    np.testing.assert_array_equal(
        lab_mask(4, ["prefix", "causal"], prefix_len=3), np.tril(np.ones((4, 4), bool))
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kinds": ["diagonal"]}, "Unknown mask kind"),
        ({"kinds": ["padding"], "padding": [5]}, "past the last token"),
        ({"kinds": ["custom"]}, "custom mask is missing"),
        ({"kinds": ["custom"], "custom": np.ones((2, 2), bool)}, "one row per query"),
        ({"kinds": ["custom"], "custom": np.full((3, 3), 0.5)}, "must be boolean"),
    ],
)
def test_lab_mask_refuses_bad_input_with_a_message(kwargs, message):
    with pytest.raises(AttentionInputError, match=message):
        lab_mask(3, **kwargs)


# Each kind alone, written as a one-line NumPy expression over (query i, key j), with the
# parameters it is given: padding at 0-based positions 1 and 3, window 2, prefix 2, a custom grid.
N = 5
QUERY, KEY = np.indices((N, N))  # i and j of every cell
GRID = (QUERY + KEY) % 3 == 0
PARAMETERS = {"padding": [1, 3], "window": 2, "prefix_len": 2, "custom": GRID}
ALONE = {
    "causal": KEY <= QUERY,
    "padding": ~np.isin(KEY, [1, 3]),
    "window": (QUERY - KEY >= 0) & (QUERY - KEY < 2),
    "prefix": (KEY < 2) | (KEY <= QUERY),
    "custom": GRID,
}


def test_mask_kinds_table_is_complete_and_in_the_pages_order():
    assert list(MASK_KINDS) == ["causal", "padding", "window", "prefix", "custom"]
    assert set(ALONE) == set(MASK_KINDS), "a new kind needs its reference expression here"
    for name, kind in MASK_KINDS.items():
        assert kind.name == name
        assert kind.label.strip(), f"{name} has no label for the page"
        assert set(kind.parameters) <= set(PARAMETERS), f"{name} takes an unknown parameter"
    assert [kind.label for kind in MASK_KINDS.values()] == [
        "Causal",
        "Padding",
        "Sliding window",
        "Prefix-LM",
        "Custom grid",
    ]


@pytest.mark.parametrize("name", list(ALONE))
def test_lab_mask_with_one_kind_is_that_kind_alone(name):
    shown = lab_mask(N, [name], **PARAMETERS)
    assert shown.dtype == np.bool_ and shown.shape == (N, N)
    np.testing.assert_array_equal(shown, ALONE[name])


def test_lab_mask_with_one_kind_equals_the_core_builder():
    padded = np.ones(N, bool)
    padded[[1, 3]] = False
    core = {
        "causal": masks.causal_mask(N),
        "padding": masks.padding_mask(padded, N),
        "window": masks.sliding_window_mask(N, 2),
        "prefix": masks.prefix_lm_mask(N, 2),
        "custom": GRID,
    }
    for name, expected in core.items():
        np.testing.assert_array_equal(lab_mask(N, [name], **PARAMETERS), expected)


def test_lab_mask_every_kind_at_once_is_the_and_of_each_alone():
    combined = np.logical_and.reduce(list(ALONE.values()))
    np.testing.assert_array_equal(lab_mask(N, list(reversed(ALONE)), **PARAMETERS), combined)


def test_lab_mask_refuses_an_unknown_kind_naming_every_known_one():
    with pytest.raises(AttentionInputError) as refused:
        lab_mask(3, ["causal", "diagonal"])
    assert str(refused.value) == (
        "Unknown mask kind 'diagonal': choose from causal, padding, window, prefix, custom."
    )


def test_example_qkv_is_reproducible_and_standard_normal():
    q, k, v = example_qkv(5, 4, seed=7)
    assert q.shape == k.shape == v.shape == (5, 4) and q.dtype == np.float64
    for a, b in zip((q, k, v), example_qkv(5, 4, seed=7), strict=True):
        np.testing.assert_array_equal(a, b)  # a deep link reopens the same example
    assert not np.allclose(q, example_qkv(5, 4, seed=8)[0])  # another seed, another example
    assert not (np.allclose(q, k) or np.allclose(k, v))  # three different matrices
    # Standard normal, checked on 3 × 4000 × 8 = 96,000 draws against N(0, 1)'s own numbers:
    # mean 0 and standard deviation 1 (sampling error ~0.003), P(|x| < 1) = 0.6827 and
    # P(|x| < 2) = 0.9545 (error ~0.0015); the bounds are ~5 of those errors wide.
    x = np.stack(example_qkv(4000, 8, seed=3))
    assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02
    assert abs(np.mean(np.abs(x) < 1) - 0.6827) < 0.008
    assert abs(np.mean(np.abs(x) < 2) - 0.9545) < 0.005


# -- compare_mask --------------------------------------------------------------------------------


def test_compare_mask_matches_torch_and_marks_the_fully_masked_row():
    q, k, v = example_qkv(4, 3, seed=1)
    mask = np.tril(np.ones((4, 4), bool))
    mask[2] = False  # query 2 may attend to nothing
    result = compare_mask(q, k, v, mask)
    np.testing.assert_allclose(result.unmasked.output, torch_sdpa(q, k, v), rtol=1e-12)
    # torch 2.13's SDPA also returns zeros for the fully masked row (older versions gave NaN).
    np.testing.assert_allclose(result.masked.output, torch_sdpa(q, k, v, mask), rtol=1e-12)
    # This package: zero weights, zero output, flagged.
    np.testing.assert_array_equal(result.masked.weights[2], 0.0)
    np.testing.assert_array_equal(result.masked.output[2], 0.0)
    np.testing.assert_array_equal(result.masked.fully_masked, [F_, F_, T, F_])
    # The textbook softmax gives 0/0 = NaN there, as torch.softmax does on a row of -inf.
    reference = torch.softmax(torch.from_numpy(result.masked.masked), dim=-1).numpy()
    assert np.isnan(reference[2]).all()
    assert np.isnan(result.naive_weights[2]).all() and np.isnan(result.naive_output[2]).all()
    keep = [0, 1, 3]
    np.testing.assert_allclose(result.naive_weights[keep], reference[keep], rtol=1e-12)
    np.testing.assert_allclose(result.masked.weights[keep], reference[keep], rtol=1e-12)
    np.testing.assert_allclose(result.row_sums, [1, 1, 0, 1], rtol=1e-12)
    # Blocked weights are exactly zero, not merely small.
    assert (result.masked.weights[~mask] == 0).all()


def test_compare_mask_without_mask_is_the_unmasked_attention():
    q, k, v = example_qkv(3, 2, seed=2)
    result = compare_mask(q, k, v, None)
    assert result.mask is None
    np.testing.assert_array_equal(result.masked.weights, result.unmasked.weights)
    np.testing.assert_allclose(result.row_sums, 1.0, rtol=1e-12)


# -- value_change_effect -------------------------------------------------------------------------


@pytest.mark.parametrize("position", [0, 2, 5])
def test_a_later_value_changes_only_rows_at_or_after_it_under_a_causal_mask(position):
    q, k, v = example_qkv(6, 4, seed=3)
    causal = np.tril(np.ones((6, 6), bool))
    effect = value_change_effect(q, k, v, position, 5.0, mask=causal)
    np.testing.assert_array_equal(effect.changed, np.arange(6) >= position)
    # The earlier rows are bit-for-bit identical: their weight on that key is exactly 0.
    np.testing.assert_array_equal(effect.after.output[:position], effect.before.output[:position])
    changed_v = v.copy()
    changed_v[position] += 5.0
    np.testing.assert_allclose(
        effect.after.output, torch_sdpa(q, k, changed_v, causal), rtol=1e-12, atol=1e-12
    )
    # Row i moves by w_i,position · 5 in every feature (output is linear in v).
    np.testing.assert_allclose(
        effect.row_change, 5.0 * effect.before.weights[:, position], rtol=1e-10, atol=1e-14
    )


def test_without_a_mask_every_row_sees_the_change():
    q, k, v = example_qkv(5, 4, seed=4)
    effect = value_change_effect(q, k, v, 4, np.array([1.0, 0.0, 0.0, 0.0]))
    assert effect.changed.all()
    assert effect.position == 4


def test_value_change_refuses_bad_input():
    q, k, v = example_qkv(3, 2, seed=0)
    with pytest.raises(AttentionInputError, match="Position 4 does not exist"):
        value_change_effect(q, k, v, 3)
    with pytest.raises(AttentionInputError, match="3 entries but value vectors have 2"):
        value_change_effect(q, k, v, 0, [1.0, 2.0, 3.0])


# -- padded_batch --------------------------------------------------------------------------------


def two_sentences(dtype=np.float64):
    return [tuple(a.astype(dtype) for a in example_qkv(n, 4, seed=n)) for n in (3, 5)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_mask_makes_the_batch_equal_each_sentence_alone(causal, side):
    batch = padded_batch(two_sentences(), causal=causal, side=side, pad_value=0.7)
    assert batch.lengths == (3, 5)
    np.testing.assert_array_equal(batch.difference, [0.0, 0.0])
    # Independent reference: torch on the same padded batch with a key-padding mask.
    expected = torch_sdpa(batch.q, batch.k, batch.v, batch.mask)
    real = batch.real
    np.testing.assert_allclose(batch.batched.output[real], expected[real], rtol=1e-12)
    short = batch.q[0][real[0]]
    np.testing.assert_array_equal(short, two_sentences()[0][0])
    pad_rows = batch.q[0][~real[0]]
    np.testing.assert_array_equal(pad_rows, 0.7)
    expected_real = (
        [[T, T, T, F_, F_], [T] * 5] if side == "right" else [[F_, F_, T, T, T], [T] * 5]
    )
    np.testing.assert_array_equal(real, expected_real)
    # The batch's mask: real keys only, AND the lower triangle when causal.
    expected_mask = np.array(expected_real)[:, None, :] & (
        np.tril(np.ones((5, 5), bool)) if causal else True
    )
    np.testing.assert_array_equal(batch.mask, np.broadcast_to(expected_mask, (2, 5, 5)))


def test_float32_batch_difference_is_below_1e_6():
    batch = padded_batch(two_sentences(np.float32), dtype=np.float32)
    assert batch.batched.output.dtype == np.float32
    assert (batch.difference < 1e-6).all()


def test_without_the_padding_mask_the_pads_leak_into_the_short_sentence():
    batch = padded_batch(two_sentences(), use_padding_mask=False, pad_value=1.0)
    assert batch.mask is None
    assert batch.difference[0] > 1e-3
    assert batch.difference[1] == 0.0  # the long sentence has no padding
    # The leak is what torch computes with the pads visible.
    expected = torch_sdpa(batch.q, batch.k, batch.v)
    np.testing.assert_allclose(batch.batched.output, expected, rtol=1e-12)


def test_right_padding_is_already_hidden_by_a_causal_mask_but_left_padding_is_not():
    right = padded_batch(two_sentences(), causal=True, use_padding_mask=False, side="right")
    np.testing.assert_array_equal(right.difference, [0.0, 0.0])
    left = padded_batch(two_sentences(), causal=True, use_padding_mask=False, side="left")
    assert left.difference[0] > 1e-3


def test_left_padding_with_causal_and_padding_masks_fully_masks_the_pad_queries():
    batch = padded_batch(two_sentences(), causal=True, side="left")
    # Pad queries 0 and 1 of the short sentence can only see pad keys, all blocked.
    np.testing.assert_array_equal(batch.batched.fully_masked[0], [T, T, F_, F_, F_])
    np.testing.assert_array_equal(batch.batched.weights[0, :2], 0.0)


def test_padded_batch_refuses_bad_input():
    with pytest.raises(AttentionInputError, match="side must be"):
        padded_batch(two_sentences(), side="middle")
    with pytest.raises(AttentionInputError, match="at least one sequence"):
        padded_batch([])
    with pytest.raises(AttentionInputError, match="float32 or float64"):
        padded_batch(two_sentences(), dtype=np.float16)
    q, k, v = example_qkv(3, 4)
    with pytest.raises(AttentionInputError, match="one row per token"):
        padded_batch([(q, k[:2], v)])


# -- additive masks ------------------------------------------------------------------------------

SCORES = np.array([-1.0, -0.5, 1.0, 0.5])  # the blocked keys (2, 3) would win the softmax
ALLOWED = np.array([T, T, F_, F_])


def test_float16_minimum_leaks_everything_at_large_scores_worked_by_hand():
    # scale 6e4 in float16: scores -60000, -30000, 60000, 30000 (all exact in float16).
    # Blocked key 2: 60000 - 65504 = -5504 (exact), larger than the best allowed score -30000,
    # so after the max-shift it is exp(0) = 1 and every other term is exp(<= -24496) = 0.
    row = additive_mask_softmax(SCORES, ALLOWED, fill=FLOAT16_MIN, dtype=np.float16, scale=6e4)
    assert row.dtype == np.float16 and row.weights.dtype == np.float16
    assert row.biased[2] == np.float16(-5504.0)
    # 30000 - 65504 = -35504 is halfway between float16 neighbours -35520 and -35488
    # (spacing 32 there); round-half-to-even picks -35520.
    assert row.biased[3] == np.float16(-35520.0)
    np.testing.assert_array_equal(row.weights, [0, 0, 1, 0])
    assert row.leaked == 1.0
    assert not row.scores_overflow and not row.has_nan


def test_float16_arithmetic_matches_torch_half_precision():
    for scale in (1.0, 10.0, 3e3, 7e3, 2e4):
        for fill in (-1e4, FLOAT16_MIN):
            row = additive_mask_softmax(SCORES, ALLOWED, fill=fill, dtype=np.float16, scale=scale)
            scores16 = torch.tensor(SCORES * scale, dtype=torch.float16)
            bias = torch.where(torch.tensor(ALLOWED), 0.0, fill).to(torch.float16)
            biased = scores16 + bias
            np.testing.assert_array_equal(row.biased, biased.numpy())
            expected = torch.softmax(biased, dim=-1).numpy()
            np.testing.assert_allclose(row.weights.astype(np.float64), expected, atol=2e-3)


def test_minus_1e9_cannot_be_stored_in_float16_and_behaves_like_minus_infinity():
    row = additive_mask_softmax(SCORES, ALLOWED, fill=-1e9, dtype=np.float16, scale=1e4)
    assert row.stored_fill == -np.inf
    assert row.leaked == 0.0


def test_minus_infinity_never_leaks_at_any_scale():
    for dtype in (np.float16, np.float32, np.float64):
        for scale in (1.0, 1e3, 1e4):
            row = additive_mask_softmax(SCORES, ALLOWED, fill=-np.inf, dtype=dtype, scale=scale)
            assert row.leaked == 0.0
            assert row.weights[2] == 0 and row.weights[3] == 0


def test_minus_1e9_leaks_only_once_scores_differ_by_about_1e9():
    # Blocked key 2 minus the best allowed key: (1 - (-0.5)) · scale - 1e9 > 0 for scale > 6.7e8.
    low = additive_mask_softmax(SCORES, ALLOWED, fill=-1e9, dtype=np.float64, scale=1e8)
    high = additive_mask_softmax(SCORES, ALLOWED, fill=-1e9, dtype=np.float64, scale=1e9)
    assert low.leaked == 0.0
    assert high.leaked == 1.0


def test_a_fully_blocked_row_spreads_all_its_weight_over_blocked_keys():
    blocked = np.zeros(4, bool)
    # float32: its spacing near 1e9 is 64, so -1 - 1e9, ..., 1 - 1e9 all round to -1e9 and the
    # row becomes uniform: 1/4 each.
    f32 = additive_mask_softmax(SCORES, blocked, fill=-1e9, dtype=np.float32)
    np.testing.assert_array_equal(f32.weights, np.full(4, 0.25, np.float32))
    assert f32.leaked == pytest.approx(1.0)
    # float64 keeps the scores' differences: the weights are softmax(scores), all on blocked keys.
    f64 = additive_mask_softmax(SCORES, blocked, fill=-1e9, dtype=np.float64)
    expected = np.exp(SCORES) / np.exp(SCORES).sum()
    np.testing.assert_allclose(f64.weights, expected, rtol=1e-6)
    # -inf: zero weights, nothing leaks, and the sum is 0, not NaN.
    inf = additive_mask_softmax(SCORES, blocked, fill=-np.inf, dtype=np.float16)
    np.testing.assert_array_equal(inf.weights, 0.0)
    assert inf.weight_sum == 0.0 and not inf.has_nan


def test_float16_score_overflow_is_reported():
    row = additive_mask_softmax(SCORES, ALLOWED, fill=FLOAT16_MIN, dtype=np.float16, scale=1e5)
    assert row.scores_overflow
    assert row.has_nan


def test_leak_curve_hand_worked_thresholds():
    # fill -1e4, float32: at scale 1e3 the blocked key sits at 1000 - 1e4 = -9000, far below the
    # allowed -500, so nothing leaks; at 1e4 it sits at 0, above the allowed -5000: all leaks.
    curve = leak_curve(SCORES, ALLOWED, [1e3, 1e4], fill=-1e4, dtype=np.float32)
    np.testing.assert_array_equal(curve, [0.0, 1.0])
    # float16 cannot hold 4e5: NaN marks the overflow rather than a made-up number.
    curve16 = leak_curve(SCORES, ALLOWED, [1.0, 4e5], fill=FLOAT16_MIN, dtype=np.float16)
    assert curve16[0] == 0.0 and np.isnan(curve16[1])


def test_additive_mask_refuses_bad_dtype_and_mask():
    with pytest.raises(AttentionInputError, match="float16, float32 or float64"):
        additive_mask_softmax(SCORES, ALLOWED, dtype="int8")
    with pytest.raises(AttentionInputError, match="one row per query"):
        additive_mask_softmax(SCORES, [T, F_], dtype=np.float32)
