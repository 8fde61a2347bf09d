"""attention_core.training.circuits: each reading against its formula written out with einsum,
built heads that copy or suppress, and ablations against the evaluation they stand for."""

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.training.attn_only import AttnOnlyConfig, init_params
from attention_core.training.circuits import (
    ablation_losses,
    composition_scores,
    copied_share,
    copying_score,
    ov_circuit,
    positional_qk,
    qk_circuit,
    random_composition,
    w_ov,
    w_qk,
)
from attention_core.training.run import evaluate
from attention_core.training.sequences import held_out

CONFIG = AttnOnlyConfig(n_layers=2, n_heads=2, d_model=8, d_vocab=10, n_ctx=8)


@pytest.fixture
def params():
    rng = np.random.default_rng(9)
    return {
        k: v + rng.normal(0, 0.3, v.shape) for k, v in init_params(CONFIG, 1, np.float64).items()
    }


def test_the_head_matrices_and_circuits_are_their_products(params):
    W = params
    for layer, head in ((0, 1), (1, 0)):
        a = f"blocks.{layer}.attn"
        np.testing.assert_allclose(
            w_qk(W, layer, head), W[f"{a}.W_Q"][head] @ W[f"{a}.W_K"][head].T
        )
        np.testing.assert_allclose(w_ov(W, layer, head), W[f"{a}.W_V"][head] @ W[f"{a}.W_O"][head])
    qk = (
        np.einsum(
            "am,mk,nk,bn->ab",
            W["embed.W_E"],
            W["blocks.1.attn.W_Q"][0],
            W["blocks.1.attn.W_K"][0],
            W["embed.W_E"],
        )
        / 2
    )
    np.testing.assert_allclose(qk_circuit(W, 1, 0), qk, rtol=1e-12)  # √d_head = √4 = 2
    # K-composition: the key side is what head 0.1 writes when it attends to token b.
    keys = W["embed.W_E"] @ W["blocks.0.attn.W_V"][1] @ W["blocks.0.attn.W_O"][1]
    composed = W["embed.W_E"] @ w_qk(W, 1, 0) @ keys.T / 2
    np.testing.assert_allclose(qk_circuit(W, 1, 0, through=(0, 1)), composed, rtol=1e-12)
    pos = W["pos_embed.W_pos"] @ w_qk(W, 0, 1) @ W["pos_embed.W_pos"].T / 2
    np.testing.assert_allclose(positional_qk(W, 0, 1), pos, rtol=1e-12)
    ov = W["embed.W_E"] @ W["blocks.0.attn.W_V"][1] @ W["blocks.0.attn.W_O"][1] @ W["unembed.W_U"]
    np.testing.assert_allclose(ov_circuit(W, 0, 1), ov, rtol=1e-12)
    assert ov.shape == (10, 10) and pos.shape == (8, 8)


def test_the_copying_score_from_the_small_product_is_the_full_circuits(params):
    for layer, head in ((0, 0), (1, 1)):
        eigenvalues = np.linalg.eigvals(ov_circuit(params, layer, head))
        full = eigenvalues.sum().real / np.abs(eigenvalues).sum()
        assert copying_score(params, layer, head) == pytest.approx(full, abs=1e-9)


@pytest.mark.parametrize(("sign", "score"), [(1.0, 1.0), (-1.0, -1.0)])
def test_a_head_that_copies_scores_one_and_one_that_suppresses_minus_one(params, sign, score):
    built = dict(params)
    built["embed.W_E"] = np.eye(10, 8)  # token t is the t-th direction (tokens 8, 9: nothing)
    built["unembed.W_U"] = np.eye(8, 10)
    w_v = np.zeros((2, 8, 4))
    w_v[0, :4] = np.eye(4)
    built["blocks.0.attn.W_V"] = w_v
    w_o = np.zeros((2, 4, 8))
    w_o[0, :, :4] = sign * 3 * np.eye(4)  # OV reads tokens 0-3 and writes ±3 on their logits
    built["blocks.0.attn.W_O"] = w_o
    assert copying_score(built, 0, 0) == pytest.approx(score, abs=1e-12)
    np.testing.assert_allclose(np.diag(ov_circuit(built, 0, 0))[:4], sign * 3)
    # Tokens 0-3 raise (or lower) only their own logit; 4-9 move nothing, their rows all 0,
    # whose first entry is the largest: token 0's, which is not theirs.
    assert copied_share(ov_circuit(built, 0, 0)) == (0.4 if sign > 0 else 0.0)


def test_a_head_that_writes_nothing_copies_nothing_and_a_quiet_one_still_copies(params):
    silent = dict(params, **{"blocks.0.attn.W_V": np.zeros_like(params["blocks.0.attn.W_V"])})
    assert copying_score(silent, 0, 0) == 0.0
    built = dict(params)
    built["embed.W_E"], built["unembed.W_U"] = np.eye(10, 8), np.eye(8, 10)
    w_v, w_o = np.zeros((2, 8, 4)), np.zeros((2, 4, 8))
    w_v[0, :4], w_o[0, :, :4] = np.eye(4), 1e-3 * np.eye(4)  # eigenvalues 0.001: small, positive
    built["blocks.0.attn.W_V"], built["blocks.0.attn.W_O"] = w_v, w_o
    assert copying_score(built, 0, 0) == pytest.approx(1.0, abs=1e-12)


def test_composition_scores_are_the_normalised_products(params):
    scores = composition_scores(params)
    for i in range(2):
        for j in range(2):
            a, qk, ov = w_ov(params, 0, i), w_qk(params, 1, j), w_ov(params, 1, j)

            def score(x, y):
                return np.sqrt(np.sum((x @ y) ** 2) / (np.sum(x**2) * np.sum(y**2)))

            assert scores.q[i, j] == pytest.approx(score(a, qk), rel=1e-12)
            assert scores.k[i, j] == pytest.approx(score(a, qk.T), rel=1e-12)
            assert scores.v[i, j] == pytest.approx(score(a, ov), rel=1e-12)
    # A score reads directions, not sizes: a head writing 5 times louder composes the same.
    louder = dict(params, **{"blocks.0.attn.W_V": params["blocks.0.attn.W_V"] * 5})
    np.testing.assert_allclose(composition_scores(louder).k, scores.k, rtol=1e-12)


def test_the_random_baseline_is_seeded_and_small():
    baseline = random_composition(64, 16, samples=50, seed=3)
    assert baseline == random_composition(64, 16, samples=50, seed=3)
    assert 0.0 < baseline < 0.3
    # By default 200 pairs of rank-16 products of standard normals, from seed 0.
    rng = np.random.default_rng(0)
    scores = []
    for _ in range(200):
        a, b, c, d = (rng.standard_normal(shape) for shape in [(64, 16), (16, 64)] * 2)
        x, y = a @ b, c @ d
        scores.append(np.linalg.norm(x @ y) / (np.linalg.norm(x) * np.linalg.norm(y)))
    assert random_composition(64, 16) == pytest.approx(np.mean(scores), rel=1e-12)
    assert random_composition(8, 2, samples=1, seed=0) > 0


def test_layers_of_one_head_compose_too():
    config = AttnOnlyConfig(n_layers=2, n_heads=1, d_model=8, d_vocab=10, n_ctx=8)
    scores = composition_scores(init_params(config, 2, np.float64))
    assert scores.k.shape == (1, 1) and 0 < scores.k[0, 0] < 1


def test_each_ablation_is_the_evaluation_with_that_head_removed(params):
    probe = held_out(0, 6, 8, 10)
    whole, first, repeated = ablation_losses(CONFIG, params, probe)
    assert whole.loss_repeated == evaluate(CONFIG, params, probe).loss_repeated
    mask = np.ones((2, 2))
    mask[1, 0] = 0
    removed = evaluate(CONFIG, params, probe, head_mask=mask)
    assert (first[1, 0], repeated[1, 0]) == (removed.loss_first, removed.loss_repeated)
    assert first.shape == repeated.shape == (2, 2)


def test_heads_that_are_not_there_are_refused(params):
    with pytest.raises(AttentionInputError, match="no layer 2"):
        w_qk(params, 2, 0)
    with pytest.raises(AttentionInputError, match="heads 0 to 1"):
        w_ov(params, 0, 2)
    with pytest.raises(AttentionInputError, match="earlier layer"):
        qk_circuit(params, 1, 0, through=(1, 1))
    with pytest.raises(AttentionInputError, match="earlier layers"):
        composition_scores(params, 1, 1)
