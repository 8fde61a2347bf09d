"""Tests for attention_core/probing.py.

References, all independent of the code under test:
- attention rollout worked out by hand on 2 layers × 2 heads × 2 tokens (the numbers below);
- PCA by the eigenvectors of the covariance matrix (np.linalg.eigh), not the SVD the code uses,
  and softmax written out to check that the AttentionViz scaling and shift move no weight;
- ablation: two forward passes run here, and Hugging Face ``transformers.BertModel`` (eager) on
  the ablated input, pooled like sentence-transformers (mean over the attention mask, then L2);
  head ablation against transformers 4's ``head_mask`` (tests/hf_head_mask.py) and by hand;
- the decoder's next token: two forward passes of our own SmolLM2 run here, KL divergence by hand
  and by ``torch.nn.functional.kl_div`` (transformers' SmolLM2 is compared in test_llama.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.probing import (
    ablate_head,
    ablate_token,
    attention_rollout,
    joint_query_key_projection,
    kl_divergence,
    next_token_change,
    remove_head_mask,
    replacement_id,
    sentence_embedding,
)

# -- attention rollout ---------------------------------------------------------------------------

# Two layers, two heads, two tokens; every row sums to 1.
LAYER_1 = [[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]]
LAYER_2 = [[[0.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]
HAND_WEIGHTS = np.array([LAYER_1, LAYER_2])  # (layer 2, head 2, 2, 2)


def test_rollout_matches_the_hand_worked_two_layer_example():
    steps = attention_rollout(HAND_WEIGHTS)
    # Head means:   Ā_1 = [[1, 0], [.5, .5]],           Ā_2 = [[.5, .5], [0, 1]]
    np.testing.assert_allclose(steps.head_mean[0], [[1.0, 0.0], [0.5, 0.5]])
    np.testing.assert_allclose(steps.head_mean[1], [[0.5, 0.5], [0.0, 1.0]])
    # A' = ½Ā + ½I: A'_1 = [[1, 0], [.25, .75]],        A'_2 = [[.75, .25], [0, 1]]
    np.testing.assert_allclose(steps.with_residual[0], [[1.0, 0.0], [0.25, 0.75]])
    np.testing.assert_allclose(steps.with_residual[1], [[0.75, 0.25], [0.0, 1.0]])
    # R = A'_2 A'_1 = [[.75·1 + .25·.25, .75·0 + .25·.75], [0·1 + 1·.25, 0·0 + 1·.75]]
    #               = [[.8125, .1875], [.25, .75]]
    np.testing.assert_allclose(steps.rollout, [[0.8125, 0.1875], [0.25, 0.75]])
    np.testing.assert_allclose(steps.cumulative[0], steps.with_residual[0])


def test_rollout_order_matters_and_newest_layer_is_on_the_left():
    # The other order, A'_1 A'_2 = [[.75, .25], [.1875, .8125]], is not the rollout.
    swapped = attention_rollout(HAND_WEIGHTS[::-1])
    np.testing.assert_allclose(swapped.rollout, [[0.75, 0.25], [0.1875, 0.8125]])


def test_rollout_follows_the_recursion_on_random_heads():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 3, 5, 5))
    weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    for residual in (0.0, 0.3, 0.5, 1.0):
        steps = attention_rollout(weights, residual=residual)
        joint = np.eye(5)
        for layer in range(4):
            a = (1 - residual) * weights[layer].mean(0) + residual * np.eye(5)
            a /= a.sum(-1, keepdims=True)
            joint = a @ joint
            np.testing.assert_allclose(steps.cumulative[layer], joint, atol=1e-12)
        np.testing.assert_allclose(steps.rollout.sum(-1), 1.0)
    # No residual: the plain product of the layer means; all residual: nothing moves.
    plain = attention_rollout(weights, residual=0.0).rollout
    means = weights.mean(1)
    np.testing.assert_allclose(plain, means[3] @ means[2] @ means[1] @ means[0], atol=1e-12)
    np.testing.assert_allclose(attention_rollout(weights, residual=1.0).rollout, np.eye(5))


def test_rollout_renormalises_rows_that_do_not_sum_to_one():
    # A removed head's weights read as zeros (transformers 4's head_mask returned them so), so
    # a layer's rows may sum to less than 1 and A' divides by the row sums again. By hand, one
    # head of [[.2, .2], [0, 0]]: ½·that + ½·I = [[.6, .1], [0, .5]], rows / .7 and / .5.
    steps = attention_rollout(np.array([[[[0.2, 0.2], [0.0, 0.0]]]]))
    np.testing.assert_allclose(steps.with_residual[0], [[6 / 7, 1 / 7], [0.0, 1.0]])


def test_rollout_of_one_token_is_one_and_of_no_token_an_error():
    np.testing.assert_array_equal(attention_rollout(np.ones((2, 3, 1, 1))).rollout, [[1.0]])
    with pytest.raises(AttentionInputError, match="shaped"):
        attention_rollout(np.ones((1, 1, 0, 0)))


@pytest.mark.parametrize(
    ("weights", "residual"),
    [(np.ones((2, 2)), 0.5), (np.ones((1, 1, 2, 3)), 0.5), (HAND_WEIGHTS, 1.5)],
)
def test_rollout_rejects_bad_input(weights, residual):
    with pytest.raises(AttentionInputError):
        attention_rollout(weights, residual=residual)


# -- the joint query-key map ---------------------------------------------------------------------


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_scale_and_shift_worked_by_hand_and_keep_every_weight():
    # Queries of norm 1, keys of norm 4: s = √(4 / 1) = 2, so queries double and keys halve.
    q = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    k = np.array([[4.0, 0.0], [0.0, 4.0], [0.0, -4.0]])
    p = joint_query_key_projection(q, k)
    assert p.scale == pytest.approx(2.0)
    # Scaled: mean(2q) = (0, 2/3), mean(k/2) = (2/3, 0); the keys move by (-2/3, 2/3).
    np.testing.assert_allclose(p.shift, [-2 / 3, 2 / 3])
    np.testing.assert_allclose(p.queries, 2 * q)
    np.testing.assert_allclose(p.keys, k / 2 + [-2 / 3, 2 / 3])
    np.testing.assert_allclose(p.queries.mean(0), p.keys.mean(0), atol=1e-12)
    before = softmax_rows(q @ k.T / np.sqrt(2))
    after = softmax_rows(p.queries @ p.keys.T / np.sqrt(2))
    np.testing.assert_allclose(after, before, atol=1e-12)


def test_pca_equals_the_eigenvectors_of_the_covariance():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(7, 5)) @ np.diag([3.0, 2.0, 1.0, 0.5, 0.1]) + 2.0
    k = rng.normal(size=(7, 5)) * 0.4 - 1.0
    p = joint_query_key_projection(q, k)
    # Independent route: the same scale and shift written out, then eigh of the covariance.
    s = np.sqrt(np.linalg.norm(k, axis=1).mean() / np.linalg.norm(q, axis=1).mean())
    qs, ks = q * s, k / s
    ks = ks + qs.mean(0) - ks.mean(0)
    x = np.vstack([qs, ks])
    centred = x - x.mean(0)
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred)
    order = np.argsort(eigenvalues)[::-1][:2]
    directions = eigenvectors[:, order].T  # (2, d)
    # Fix each sign by its largest entry, as the code promises.
    directions *= np.sign(directions[np.arange(2), np.abs(directions).argmax(1)])[:, None]
    np.testing.assert_allclose(p.components, directions, atol=1e-10)
    np.testing.assert_allclose(p.query_xy, centred[:7] @ directions.T, atol=1e-10)
    np.testing.assert_allclose(p.key_xy, centred[7:] @ directions.T, atol=1e-10)
    np.testing.assert_allclose(p.explained, eigenvalues[order] / eigenvalues.sum(), atol=1e-12)
    # The picture's spread along each axis is that direction's variance.
    xy = np.vstack([p.query_xy, p.key_xy])
    np.testing.assert_allclose((xy**2).sum(0), eigenvalues[order], rtol=1e-10)


def test_projection_of_points_on_a_line_explains_everything():
    q = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    p = joint_query_key_projection(q, q)
    assert p.explained[0] == pytest.approx(1.0)
    assert p.explained[1] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(p.components[0], [np.sqrt(0.5), np.sqrt(0.5)])
    # Keys identical to queries land on them.
    np.testing.assert_allclose(p.query_xy, p.key_xy)


def test_projection_rejects_mismatched_widths():
    with pytest.raises(AttentionInputError, match="same width"):
        joint_query_key_projection(np.ones((3, 4)), np.ones((3, 5)))


def test_projection_checks_its_sizes_and_takes_the_smallest_valid_ones():
    for q, k in [
        (np.ones((0, 3)), np.ones((3, 3))),  # no query at all
        (np.ones((3, 1)), np.ones((3, 1))),  # d_head 1: no second direction
        (np.ones((1, 2)), np.ones((1, 2))),  # two points
    ]:
        with pytest.raises(AttentionInputError):
            joint_query_key_projection(q, k)
    # Three points in two dimensions (one query, two keys) are enough.
    p = joint_query_key_projection([[1.0, 0.0]], [[0.0, 1.0], [1.0, 1.0]])
    assert p.query_xy.shape == (1, 2) and p.key_xy.shape == (2, 2)
    np.testing.assert_allclose(p.explained.sum(), 1.0)


def test_projection_scale_for_short_keys_and_for_zero_vectors():
    # Queries of norm 4, keys of norm ¼: s = √(¼ / 4) = ¼.
    q = np.array([[4.0, 0.0], [0.0, 4.0], [0.0, -4.0]])
    k = np.array([[0.25, 0.0], [0.0, 0.25], [-0.25, 0.0]])
    assert joint_query_key_projection(q, k).scale == pytest.approx(0.25)
    # All-zero queries (or keys) have no length to balance: the scale stays 1 and all is finite.
    for zq, zk in [(np.zeros_like(q), k), (q, np.zeros_like(k))]:
        p = joint_query_key_projection(zq, zk)
        assert p.scale == 1.0
        assert np.isfinite(p.query_xy).all() and np.isfinite(p.key_xy).all()


def test_projection_of_identical_points_explains_nothing_and_of_a_small_cloud_everything():
    same = joint_query_key_projection(np.ones((3, 2)), np.ones((3, 2)))
    np.testing.assert_array_equal(same.explained, [0.0, 0.0])
    # A spread far below 1 in 2-D: the two directions still keep all of it.
    rng = np.random.default_rng(2)
    small = joint_query_key_projection(rng.normal(size=(4, 2)) * 1e-2, rng.normal(size=(4, 2)))
    np.testing.assert_allclose(small.explained.sum(), 1.0)


def test_sentence_embedding_is_the_masked_mean_normalised():
    hidden = np.array([[3.0, 0.0], [0.0, 4.0], [100.0, 100.0]])
    # Tokens 1 and 2 only: mean (1.5, 2) has norm 2.5, so the embedding is (0.6, 0.8).
    np.testing.assert_allclose(sentence_embedding(hidden, np.array([1, 1, 0])), [0.6, 0.8])


# -- ablation on the real model ------------------------------------------------------------------

TIRED = "The animal didn't cross the street because it was too tired."
IT = 10  # "it": [CLS] the animal didn ' t cross the street because it ...


@pytest.fixture(scope="module")
def real():
    from attention_core.models import load_bert

    return load_bert()


@pytest.fixture(scope="module")
def real_hf(real):
    from transformers import BertModel as HFBertModel

    return HFBertModel.from_pretrained(str(real.location.path), attn_implementation="eager").eval()


def hf_pass(hf_model, ids: np.ndarray, mask: np.ndarray | None = None):
    """transformers' attentions `(layer, head, n, n)` and its sentence-transformers embedding."""
    import torch

    mask = np.ones_like(ids) if mask is None else mask.astype(np.int64)
    with torch.inference_mode():
        out = hf_model(
            torch.tensor(ids)[None], attention_mask=torch.tensor(mask)[None], output_attentions=True
        )
    hidden = out.last_hidden_state[0]
    m = torch.tensor(mask, dtype=hidden.dtype)[:, None]
    pooled = (hidden * m).sum(0) / m.sum()
    embedding = torch.nn.functional.normalize(pooled, dim=0)
    return np.stack([a[0].numpy() for a in out.attentions]), embedding.numpy().astype(np.float64)


@pytest.mark.slow
def test_ablation_difference_is_two_separate_forward_passes(real):
    from attention_core.models import run_bert_ids

    ablation = ablate_token(real, TIRED, IT, "remove")
    ids = real.tokenize(TIRED).input_ids
    full = run_bert_ids(real, ids).attention_weights.astype(np.float64)
    short = run_bert_ids(real, np.delete(ids, IT)).attention_weights.astype(np.float64)
    # Positions after "it" move up one; map them back by hand and subtract.
    old = [i for i in range(len(ids)) if i != IT]
    for a, i in enumerate(old):
        for b, j in enumerate(old):
            np.testing.assert_allclose(
                ablation.difference[:, :, i, j], short[:, :, a, b] - full[:, :, i, j], atol=1e-7
            )
    assert np.isnan(ablation.difference[:, :, IT, :]).all()
    assert np.isnan(ablation.difference[:, :, :, IT]).all()
    assert "it" not in ablation.tokens_after and len(ablation.tokens_after) == len(ids) - 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["remove", "mask", "replace"])
def test_ablated_pass_agrees_with_transformers(real, real_hf, mode):
    ablation = ablate_token(real, TIRED, IT, mode, replacement="dog")
    ids = real.tokenize(TIRED).input_ids
    n = len(ids)
    attend = np.ones(n, dtype=bool)
    if mode == "remove":
        ref_ids, kept = np.delete(ids, IT), np.delete(np.arange(n), IT)
        ref_weights, ref_embedding = hf_pass(real_hf, ref_ids)
    elif mode == "mask":
        attend[IT] = False
        kept = np.arange(n)
        ref_weights, ref_embedding = hf_pass(real_hf, ids, attend)
        assert np.all(ablation.weights_after[:, :, :, IT] == 0)  # nobody looks at it
    else:
        ref_ids = ids.copy()
        ref_ids[IT] = real.tokenizer.token_to_id("dog")
        kept = np.arange(n)
        ref_weights, ref_embedding = hf_pass(real_hf, ref_ids)
        assert ablation.tokens_after[IT] == "dog"
    np.testing.assert_allclose(
        ablation.weights_after[:, :, kept[:, None], kept[None, :]], ref_weights, atol=1e-4
    )
    np.testing.assert_allclose(ablation.embedding_after, ref_embedding, atol=1e-4)
    before_weights, before_embedding = hf_pass(real_hf, ids)
    np.testing.assert_allclose(ablation.weights_before, before_weights, atol=1e-4)
    np.testing.assert_allclose(ablation.embedding_before, before_embedding, atol=1e-4)
    assert ablation.cosine == pytest.approx(float(before_embedding @ ref_embedding), abs=1e-4)


@pytest.mark.slow
def test_the_first_token_may_be_hidden_and_one_word_removed(real):
    hidden = ablate_token(real, TIRED, 0, "mask")
    assert hidden.position == 0 and np.all(hidden.weights_after[:, :, :, 0] == 0)
    # "Hi" is [CLS] hi [SEP]: without the word, the two special tokens still run.
    removed = ablate_token(real, "Hi", 1, "remove")
    assert removed.tokens_after == ("[CLS]", "[SEP]")
    assert np.isfinite(removed.cosine)


@pytest.mark.slow
def test_ablation_rejects_bad_position_mode_and_replacement(real):
    with pytest.raises(AttentionInputError, match="has 16 tokens"):
        ablate_token(real, TIRED, 16)
    with pytest.raises(AttentionInputError, match="mode"):
        ablate_token(real, TIRED, 1, "drop")
    with pytest.raises(AttentionInputError, match="one word piece"):
        ablate_token(real, TIRED, 1, "replace", replacement="two words")


# -- head ablation -------------------------------------------------------------------------------


def test_remove_head_mask_zeroes_one_entry_and_checks_it_exists():
    expected = np.ones((3, 4))
    expected[1, 2] = 0.0
    np.testing.assert_array_equal(remove_head_mask(3, 4, 1, 2), expected)
    corner = np.ones((2, 2))
    corner[0, 0] = 0.0
    np.testing.assert_array_equal(remove_head_mask(2, 2, 0, 0), corner)
    for layer, head in [(3, 0), (0, 4), (-1, 0), (0, -1)]:
        with pytest.raises(AttentionInputError, match="does not exist"):
            remove_head_mask(3, 4, layer, head)


LAYER, HEAD = 2, 3  # layer 3, head 4 (from 1): d_head 32, so features 96..127 of the concat


@pytest.mark.slow
def test_head_ablation_is_two_forward_passes_and_zeroes_the_head_by_hand(real):
    from attention_core.models import run_bert_ids

    ablation = ablate_head(real, TIRED, LAYER, HEAD)
    ids = real.tokenize(TIRED).input_ids
    plain = run_bert_ids(real, ids)
    mask = np.ones((6, 12))
    mask[LAYER, HEAD] = 0.0
    ablated = run_bert_ids(real, ids, head_mask=mask)
    expected = ablated.attention_weights.astype(np.float64) - plain.attention_weights
    np.testing.assert_allclose(ablation.difference, expected, atol=1e-7)
    # Nothing below the head's output changes: its own layer and the ones before are identical.
    assert np.all(ablation.difference[: LAYER + 1] == 0)
    assert np.abs(ablation.difference[LAYER + 1 :]).max() > 1e-3
    # By hand: the head's 32 features of the concat are 0, and the layer's output is the
    # unablated concat with those features zeroed, through W_o.
    steps = ablated.layers[LAYER].attention
    np.testing.assert_array_equal(steps.concat[:, 96:128], 0.0)
    concat = plain.layers[LAYER].attention.concat.copy()
    concat[:, 96:128] = 0.0
    w = real.weights.layers[LAYER].attention
    np.testing.assert_allclose(steps.output, concat @ w.w_o.T + w.b_o, atol=1e-5)
    assert (ablation.mode, ablation.position, ablation.head) == ("head", None, (LAYER, HEAD))
    assert ablation.tokens_after == ablation.tokens
    # Sentence embeddings and per-token turns, pooled by hand.
    before = plain.last_hidden_state.astype(np.float64).mean(0)
    after = ablated.last_hidden_state.astype(np.float64).mean(0)
    cosine = before @ after / np.linalg.norm(before) / np.linalg.norm(after)
    assert ablation.cosine == pytest.approx(cosine, abs=1e-9)
    a, b = plain.last_hidden_state, ablated.last_hidden_state
    turn = 1 - np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(ablation.token_change, turn, atol=1e-6)


@pytest.fixture(scope="module")
def real_hf_head_mask(real):
    from transformers import BertModel as HFBertModel

    from tests.hf_head_mask import use_head_mask

    hf = HFBertModel.from_pretrained(str(real.location.path), attn_implementation="eager").eval()
    use_head_mask(hf)
    return hf


@pytest.mark.slow
def test_head_ablation_matches_transformers_head_mask(real, real_hf_head_mask):
    import torch

    ablation = ablate_head(real, TIRED, LAYER, HEAD)
    ids = real.tokenize(TIRED).input_ids
    mask = torch.ones(6, 12)
    mask[LAYER, HEAD] = 0.0
    with torch.inference_mode():
        out = real_hf_head_mask(torch.tensor(ids)[None], output_attentions=True, head_mask=mask)
    hidden = out.last_hidden_state[0].numpy().astype(np.float64)
    expected = hidden.mean(0) / np.linalg.norm(hidden.mean(0))
    np.testing.assert_allclose(ablation.embedding_after, expected, atol=1e-4)
    reference = np.stack([a[0].numpy() for a in out.attentions])  # (layer, head, n, n)
    # transformers 4 returned the removed head's weights multiplied by 0; ours keep its
    # pattern (the head still computes it), which is the multiplier's only difference.
    assert np.all(reference[LAYER, HEAD] == 0)
    np.testing.assert_allclose(
        ablation.weights_after * mask.numpy()[:, :, None, None], reference, atol=1e-4
    )
    np.testing.assert_array_equal(
        ablation.weights_after[LAYER, HEAD], ablation.weights_before[LAYER, HEAD]
    )


@pytest.mark.slow
def test_head_ablation_rejects_a_missing_head(real):
    with pytest.raises(AttentionInputError, match="layers 1 to 6 and heads 1 to 12"):
        ablate_head(real, TIRED, 6, 0)


# -- the decoder's next token --------------------------------------------------------------------


def test_kl_divergence_by_hand_and_against_torch():
    import torch

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
    import torch

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


@pytest.fixture(scope="module")
def llm():
    from attention_core.models.llama import load_llama

    return load_llama()


PROMPT = "The capital of France is Paris. The capital of Italy is"


def softmax64(logits):
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.slow
def test_next_token_change_is_two_forward_passes_of_our_decoder(llm):
    from attention_core.models.llama import run_llama

    ids = np.asarray(llm.encode(PROMPT))
    n = len(ids)
    plain = run_llama(llm, ids).next_token_logits
    italy = n - 1  # " Italy" is the last word: without it the model cannot say " Rome"
    mask = np.ones((30, 9))
    mask[4, 2] = 0.0
    keep = np.arange(n) != italy
    afters = {
        "remove": run_llama(llm, ids[keep]).next_token_logits,
        "mask": run_llama(llm, ids, attend=keep).next_token_logits,
        "head": run_llama(llm, ids, head_mask=mask).next_token_logits,
    }
    for mode, after in afters.items():
        change = next_token_change(llm, ids, mode, position=italy, layer=4, head=2)
        np.testing.assert_allclose(change.logits_before, plain, atol=1e-6)
        np.testing.assert_allclose(change.logits_after, after, atol=1e-6)
        p, q = softmax64(plain), softmax64(after)
        np.testing.assert_allclose(change.probs_before, p, atol=1e-12)
        np.testing.assert_allclose(change.probs_after, q, atol=1e-12)
        assert change.kl == pytest.approx(float(np.sum(p * np.log(p / q))), rel=1e-6)
        assert change.kl > 0
        assert change.top_before == int(np.argmax(plain))
        assert change.top_after == int(np.argmax(after))
        assert change.mode == mode
        assert change.position == (None if mode == "head" else italy)
        assert change.head == ((4, 2) if mode == "head" else None)
        expected_ids = ids[keep] if mode == "remove" else ids
        np.testing.assert_array_equal(change.input_ids_after, expected_ids)
    assert llm.token_text(change.top_before) == " Rome"
    removed = next_token_change(llm, ids, "remove", position=italy)
    assert llm.token_text(removed.top_after) != " Rome"


@pytest.mark.slow
def test_next_token_change_rejects_bad_input(llm):
    ids = llm.encode(PROMPT)
    n = len(ids)
    with pytest.raises(AttentionInputError, match=f"has {n} tokens"):
        next_token_change(llm, ids, "remove", position=n)
    with pytest.raises(AttentionInputError, match=f"has {n} tokens"):
        next_token_change(llm, ids, "mask", position=-1)
    with pytest.raises(AttentionInputError, match="mode"):
        next_token_change(llm, ids, "replace", position=0)
    with pytest.raises(AttentionInputError, match="heads 1 to 9"):
        next_token_change(llm, ids, "head", layer=0, head=9)
    with pytest.raises(AttentionInputError, match="one token cannot lose it"):
        next_token_change(llm, ids[:1], "remove", position=0)
    with pytest.raises(AttentionInputError, match="which token"):
        next_token_change(llm, ids, "mask", layer=0, head=0)
    with pytest.raises(AttentionInputError, match="which head"):
        next_token_change(llm, ids, "head", layer=0)
    with pytest.raises(AttentionInputError, match="which head"):
        next_token_change(llm, ids, "head", head=0)
    # Two tokens may lose one, one token may still lose a head, and the last position may go.
    assert next_token_change(llm, ids[:2], "remove", position=0).input_ids_after.tolist() == [
        ids[1]
    ]
    assert next_token_change(llm, ids[:1], "head", layer=0, head=0).kl > 0
    assert next_token_change(llm, ids, "mask", position=n - 1).position == n - 1


@pytest.mark.slow
def test_replacement_words_are_looked_up_as_typed_then_in_lower_case(real):
    # [MASK] exists only as typed (its lower case is no word piece); "Dog" only in lower case.
    assert replacement_id(real, " [MASK] ") == 103
    assert replacement_id(real, "Dog") == real.tokenizer.token_to_id("dog")
    with pytest.raises(AttentionInputError, match=r"“\(nothing\)” is not one word piece"):
        replacement_id(real, "   ")
