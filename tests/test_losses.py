"""attention_core.losses against torch: cross-entropy (``F.cross_entropy``), log-softmax and KL
divergence (``F.kl_div``), and the same worked by hand on two- and three-token vocabularies."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core import AttentionInputError
from attention_core.losses import kl_divergence, log_softmax, next_token_losses, token_losses


def test_log_softmax_is_torchs_and_exact_where_softmax_underflows():
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(3, 11)) * 4
    expected = torch.log_softmax(torch.from_numpy(logits), -1).numpy()
    np.testing.assert_allclose(log_softmax(logits), expected, rtol=1e-12)
    # exp(-1000) is 0 in float64, yet its log-probability is exactly -1000 - log(1 + e^-1000).
    np.testing.assert_allclose(log_softmax(np.array([0.0, -1000.0])), [0.0, -1000.0], atol=1e-12)


def test_next_token_losses_are_torch_cross_entropy_row_by_row():
    rng = np.random.default_rng(8)
    logits = (rng.normal(size=(5, 13)) * 3).astype(np.float32)
    targets = rng.integers(0, 13, size=5)
    expected = F.cross_entropy(
        torch.from_numpy(logits.astype(np.float64)), torch.from_numpy(targets), reduction="none"
    ).numpy()
    kept = logits.copy()
    losses = next_token_losses(logits, targets)
    assert losses.dtype == np.float64 and losses.shape == (5,)
    np.testing.assert_allclose(losses, expected, rtol=1e-12)
    # Worked on a copy: the caller's logits are as they were.
    np.testing.assert_array_equal(logits, kept)
    # Rows far apart in scale: each is shifted by its own largest logit.
    far = np.array([[1000.0, 1001.0, 990.0], [-1000.0, -1000.0, -1000.0]])
    np.testing.assert_allclose(
        next_token_losses(far, np.array([1, 2])),
        [np.log(1 + np.exp(-1.0) + np.exp(-11.0)), np.log(3.0)],
        rtol=1e-12,
    )


def test_token_losses_are_torch_cross_entropy():
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(6, 9)) * 3
    ids = rng.integers(0, 9, size=6)
    expected = F.cross_entropy(
        torch.from_numpy(logits[:-1]), torch.from_numpy(ids[1:]), reduction="none"
    ).numpy()
    np.testing.assert_allclose(token_losses(logits, ids), expected, rtol=1e-12)
    # A sure prediction costs nothing; a probability of 1/9 costs log 9.
    sure = np.where(np.arange(9) == 4, 1e3, 0.0)[None].repeat(2, 0)
    assert token_losses(sure, [0, 4])[0] == pytest.approx(0.0, abs=1e-12)
    assert token_losses(np.zeros((2, 9)), [0, 4])[0] == pytest.approx(np.log(9))
    with pytest.raises(AttentionInputError, match="one per row of logits"):
        token_losses(logits, ids[:5])


def test_token_losses_stay_exact_for_logits_far_apart():
    # Each row is shifted by its own largest logit: a row of thousands next to a row of ones.
    logits = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, 990.0], [0.0, 0.0, 0.0]])
    ids = np.array([0, 1, 2])
    expected = F.cross_entropy(
        torch.from_numpy(logits[:-1]), torch.from_numpy(ids[1:]), reduction="none"
    ).numpy()
    np.testing.assert_allclose(token_losses(logits, ids), expected, rtol=1e-12)
    assert np.isfinite(token_losses(logits[::-1].copy(), ids)).all()


def test_token_losses_refuse_logits_of_the_wrong_rank_and_a_single_token():
    with pytest.raises(AttentionInputError):
        token_losses(np.ones((2, 3, 4)), [0, 1])
    with pytest.raises(AttentionInputError, match="at least two tokens"):
        token_losses(np.ones((1, 5)), [0])


def test_kl_divergence_by_hand_and_against_torch():
    # p = (1/2, 1/2), q = (3/4, 1/4): KL = ½ ln(½ / ¾) + ½ ln(½ / ¼) = ½ ln(4/3).
    assert kl_divergence([0.0, 0.0], [np.log(3.0), 0.0]) == pytest.approx(0.5 * np.log(4 / 3))
    # The other way round differs: KL is not symmetric. ¾ ln(¾ / ½) + ¼ ln(¼ / ½).
    assert kl_divergence([np.log(3.0), 0.0], [0.0, 0.0]) == pytest.approx(
        0.75 * np.log(1.5) + 0.25 * np.log(0.5)
    )
    # Huge logits (softmax's exp would overflow unshifted) and a shift of all logits: same KL.
    assert kl_divergence([1000.0, 1000.0], [1000.0 + np.log(3.0), 1000.0]) == pytest.approx(
        0.5 * np.log(4 / 3)
    )
    rng = np.random.default_rng(5)
    p, q = rng.normal(size=50) * 3, rng.normal(size=50) * 3
    expected = torch.nn.functional.kl_div(
        torch.log_softmax(torch.tensor(q), 0),
        torch.log_softmax(torch.tensor(p), 0),
        reduction="sum",
        log_target=True,
    )
    assert kl_divergence(p, q) == pytest.approx(float(expected), rel=1e-12)
    assert kl_divergence(p, p) == 0.0
    with pytest.raises(AttentionInputError, match="one shape"):
        kl_divergence(p, q[:-1])


def test_kl_divergence_of_rows_is_each_rows_kl_against_torch():
    rng = np.random.default_rng(6)
    # Rows far apart in scale: a shift taken over the whole block, not per row, would underflow.
    p = rng.normal(size=(3, 40)) * 3 + np.array([[0.0], [800.0], [-800.0]])
    q = rng.normal(size=(3, 40)) * 3 + np.array([[5.0], [790.0], [-805.0]])
    expected = torch.nn.functional.kl_div(
        torch.log_softmax(torch.tensor(q), -1),
        torch.log_softmax(torch.tensor(p), -1),
        reduction="none",
        log_target=True,
    ).sum(-1)
    found = kl_divergence(p, q)
    assert found.shape == (3,)
    np.testing.assert_allclose(found, expected.numpy(), rtol=1e-12)
    rows = [kl_divergence(a, b) for a, b in zip(p, q, strict=True)]
    np.testing.assert_allclose(found, rows, rtol=1e-12)
    # p = (1/2, 1/2) against q = (3/4, 1/4), and a row that agrees: ½ ln(4/3) and 0.
    by_hand = kl_divergence([[0.0, 0.0], [1.0, 2.0]], [[np.log(3.0), 0.0], [1.0, 2.0]])
    np.testing.assert_allclose(by_hand, [0.5 * np.log(4 / 3), 0.0], atol=1e-15)
    with pytest.raises(AttentionInputError, match="one shape"):
        kl_divergence(p, q[:2])
    with pytest.raises(AttentionInputError, match=r"\(rows, vocab\)"):
        kl_divergence(p[None], q[None])
