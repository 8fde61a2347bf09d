"""attention_core.reference: torch.nn.MultiheadAttention loaded with our parameters.

Two independent checks meet here: the torch module (loaded by `torch_multi_head_reference`) is
checked against a per-head NumPy loop written out in this file, and attention_core's
`multi_head_attention` is checked against the torch module.
"""

import math
import subprocess
import sys

import numpy as np
import pytest

from attention_core import (
    AttentionInputError,
    MultiHeadParams,
    causal_mask,
    init_multi_head_params,
    multi_head_attention,
)
from attention_core.reference import (
    TORCH_INSTALL_COMMAND,
    TorchNotInstalledError,
    compare_with_torch,
    token_embeddings,
    torch_multi_head_reference,
)


def loop_reference(x_q, x_kv, p, num_heads, mask=None):
    """Multi-head attention head by head with explicit slices (no reshapes), float64."""
    q = x_q @ p.w_q.T + p.b_q
    k = x_kv @ p.w_k.T + p.b_k
    v = x_kv @ p.w_v.T + p.b_v
    d_head = q.shape[-1] // num_heads
    heads, weights = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        s = q[:, cols] @ k[:, cols].T / math.sqrt(d_head)
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        weights.append(w)
        heads.append(w @ v[:, cols])
    return np.concatenate(heads, axis=1) @ p.w_o.T + p.b_o, np.stack(weights)


def test_hand_worked_single_head_with_identity_projections():
    # d_model=2, one head, every W = I, every b = 0: q = k = v = x = I₂.
    # scores = x xᵀ / √2 = [[1/√2, 0], [0, 1/√2]], so row 0 is softmax([a, 0]) with a = 1/√2:
    # w00 = e^a / (e^a + 1) = 1 / (1 + e^-a) ≈ 0.66976, w01 = 1 - w00 ≈ 0.33024 (row 1 mirrored).
    # output = weights @ v @ W_Oᵀ = weights.
    eye, zero = np.eye(2), np.zeros(2)
    params = MultiHeadParams(eye, eye, eye, eye, zero, zero, zero, zero)
    ref = torch_multi_head_reference(np.eye(2), None, params, 1, dtype="float64")
    w00 = 1 / (1 + math.exp(-1 / math.sqrt(2)))
    expected = np.array([[w00, 1 - w00], [1 - w00, w00]])
    assert abs(w00 - 0.66976) < 1e-5
    np.testing.assert_allclose(ref.weights, expected[None], atol=1e-12)
    np.testing.assert_allclose(ref.output, expected, atol=1e-12)
    assert ref.weights.shape == (1, 2, 2)
    assert ref.dtype == "float64"


@pytest.mark.parametrize(
    ("d_model", "num_heads", "q_len", "k_len", "causal"),
    [
        (4, 1, 3, None, False),
        (8, 2, 5, None, True),
        (12, 3, 4, 7, False),
        (12, 4, 6, 2, True),
        (16, 16, 3, None, True),
        (64, 8, 9, 5, False),
    ],
)
def test_torch_module_matches_a_head_by_head_loop(d_model, num_heads, q_len, k_len, causal):
    rng = np.random.default_rng(d_model * 100 + num_heads)
    params = init_multi_head_params(d_model, num_heads, seed=3)
    x_q = rng.normal(size=(q_len, d_model))
    x_kv = x_q if k_len is None else rng.normal(size=(k_len, d_model))
    mask = causal_mask(q_len, x_kv.shape[0]) if causal else None
    ref = torch_multi_head_reference(
        x_q, None if k_len is None else x_kv, params, num_heads, mask, dtype="float64"
    )
    output, weights = loop_reference(x_q, x_kv, params, num_heads, mask)
    np.testing.assert_allclose(ref.output, output, atol=1e-12)
    np.testing.assert_allclose(ref.weights, weights, atol=1e-12)


@pytest.mark.parametrize(
    ("d_model", "num_heads", "q_len", "k_len", "causal", "seed"),
    [
        (4, 2, 3, None, False, 0),
        (8, 4, 6, None, True, 1),
        (12, 3, 5, 8, True, 2),
        (24, 6, 7, 3, False, 3),
        (32, 8, 12, None, True, 4),
        (64, 16, 12, 10, False, 5),
    ],
)
def test_attention_core_matches_torch_multihead(d_model, num_heads, q_len, k_len, causal, seed):
    rng = np.random.default_rng(seed)
    params = init_multi_head_params(d_model, num_heads, seed=seed)
    x_q = rng.normal(size=(q_len, d_model))
    x_kv = None if k_len is None else rng.normal(size=(k_len, d_model))
    mask = causal_mask(q_len, k_len) if causal else None
    steps = multi_head_attention(x_q, x_kv, params=params, num_heads=num_heads, mask=mask)

    in_float32 = compare_with_torch(steps, params, num_heads, mask)
    assert in_float32.dtype == "float32"
    assert in_float32.output_difference < 1e-5
    assert in_float32.weights_difference < 1e-5
    # float32 rounding is visible (the numbers really went through torch) but tiny.
    assert in_float32.largest > 1e-10

    in_float64 = compare_with_torch(steps, params, num_heads, mask, dtype="float64")
    assert in_float64.largest < 1e-12
    ref = torch_multi_head_reference(x_q, x_kv, params, num_heads, mask, dtype="float64")
    np.testing.assert_allclose(steps.output, ref.output, atol=1e-12)
    np.testing.assert_allclose(steps.attention.weights, ref.weights, atol=1e-12)


def test_comparison_notices_a_real_difference():
    rng = np.random.default_rng(0)
    params = init_multi_head_params(8, 2, seed=0)
    other = init_multi_head_params(8, 2, seed=1)
    x = rng.normal(size=(4, 8))
    steps = multi_head_attention(x, params=params, num_heads=2)
    # Our steps were made with `params`; torch runs `other`: the gap must show up.
    assert compare_with_torch(steps, other, 2).largest > 1e-2
    with pytest.raises(AttentionInputError, match="2 heads but num_heads=4"):
        compare_with_torch(steps, params, 4)


def test_our_mask_convention_is_inverted_for_torch():
    # Ours: True = may attend. Blocking key 1 for every query must zero column 1 in torch's
    # weights; with torch's own convention passed unchanged it would be the only key left.
    rng = np.random.default_rng(1)
    params = init_multi_head_params(6, 3, seed=2)
    x_q, x_kv = rng.normal(size=(2, 6)), rng.normal(size=(4, 6))
    mask = np.array([[True, False, True, True], [True, False, True, True]])
    ref = torch_multi_head_reference(x_q, x_kv, params, 3, mask, dtype="float64")
    assert np.all(ref.weights[..., 1] == 0)
    np.testing.assert_allclose(ref.weights.sum(axis=-1), 1.0, atol=1e-12)
    causal = torch_multi_head_reference(x_kv, None, params, 3, causal_mask(4), dtype="float64")
    assert np.all(np.triu(np.ones((4, 4)), k=1)[None] * causal.weights == 0)


def test_batched_input_matches_each_example_alone():
    rng = np.random.default_rng(2)
    params = init_multi_head_params(8, 2, seed=5)
    x_q, x_kv = rng.normal(size=(3, 4, 8)), rng.normal(size=(3, 6, 8))
    batched = torch_multi_head_reference(x_q, x_kv, params, 2, dtype="float64")
    assert batched.output.shape == (3, 4, 8)
    assert batched.weights.shape == (3, 2, 4, 6)
    for b in range(3):
        alone = torch_multi_head_reference(x_q[b], x_kv[b], params, 2, dtype="float64")
        np.testing.assert_allclose(batched.output[b], alone.output, atol=1e-12)
        np.testing.assert_allclose(batched.weights[b], alone.weights, atol=1e-12)


def test_fully_masked_query_is_left_out_of_the_comparison():
    rng = np.random.default_rng(3)
    params = init_multi_head_params(4, 2, seed=0)
    x = rng.normal(size=(3, 4))
    mask = np.array([[True, False, False], [False, False, False], [True, True, True]])
    ref = torch_multi_head_reference(x, None, params, 2, mask, dtype="float64")
    assert np.isnan(ref.weights[:, 1]).all()  # torch: softmax over nothing
    steps = multi_head_attention(x, params=params, num_heads=2, mask=mask)
    comparison = compare_with_torch(steps, params, 2, mask, dtype="float64")
    assert math.isfinite(comparison.largest)
    assert comparison.largest < 1e-12
    np.testing.assert_allclose(steps.attention.weights[:, [0, 2]], ref.weights[:, [0, 2]])


def test_missing_torch_gives_the_install_command(monkeypatch):
    # A None entry in sys.modules makes `import torch` raise ImportError, as on a machine
    # without torch.
    monkeypatch.setitem(sys.modules, "torch", None)
    params = init_multi_head_params(4, 2)
    with pytest.raises(TorchNotInstalledError) as info:
        torch_multi_head_reference(np.ones((2, 4)), None, params, 2)
    assert TORCH_INSTALL_COMMAND == "pip install torch==2.13.0"
    assert TORCH_INSTALL_COMMAND in str(info.value)
    assert isinstance(info.value, ImportError)


def test_importing_attention_core_does_not_import_torch():
    code = "import sys, attention_core, attention_core.reference; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: torch_multi_head_reference(np.ones((2, 8)), None, p, 3), "choose one of"),
        (lambda p: torch_multi_head_reference(np.ones((2, 6)), None, p, 2), "d_model=8"),
        (lambda p: torch_multi_head_reference(np.ones((2, 8)), None, p, 2, dtype="int"), "dtype"),
        (lambda p: torch_multi_head_reference(np.ones((2, 8)), None, "p", 2), "MultiHeadParams"),
        (
            lambda p: torch_multi_head_reference(np.ones((2, 8)), None, p, 2, np.ones((3, 3))),
            "mask",
        ),
        (lambda p: torch_multi_head_reference([[1.0, np.nan] * 4], None, p, 2), "finite"),
        (lambda p: compare_with_torch("steps", p, 2), "MultiHeadSteps"),
    ],
)
def test_bad_input_gives_a_learner_message(call, message):
    params = init_multi_head_params(8, 2)
    with pytest.raises(AttentionInputError, match=message):
        call(params)


def test_token_embeddings_follow_the_token_not_its_position():
    first = token_embeddings(["the", "cat", "sat", "on", "the", "mat"], 8, seed=3)
    assert first.shape == (6, 8)
    np.testing.assert_array_equal(first[0], first[4])  # "the" twice: one vector
    assert not np.allclose(first[1], first[2])
    # "cat" keeps its vector in another sentence; another seed gives another vector.
    other = token_embeddings(["a", "cat"], 8, seed=3)
    np.testing.assert_array_equal(other[1], first[1])
    assert not np.allclose(token_embeddings(["cat"], 8, seed=4)[0], first[1])
    # Same call, same numbers: a link reproduces the example.
    np.testing.assert_array_equal(token_embeddings(["the", "cat"], 8, seed=3), first[:2])


def test_token_embeddings_are_standard_normal():
    x = token_embeddings([f"w{i}" for i in range(400)], 64, seed=0)
    assert abs(x.mean()) < 0.02  # 25,600 draws: standard error 1/160
    assert abs(x.std() - 1) < 0.02


@pytest.mark.parametrize(
    ("tokens", "d_model", "seed", "message"),
    [([], 8, 0, "no tokens"), (["a"], 0, 0, "d_model"), (["a"], 8, -1, "seed")],
)
def test_token_embeddings_bad_input(tokens, d_model, seed, message):
    with pytest.raises(AttentionInputError, match=message):
        token_embeddings(tokens, d_model, seed)
