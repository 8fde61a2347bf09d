"""Positional encodings against their defining formulas, Hugging Face and invariants."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_core import (
    AttentionInputError,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    causal_mask,
    learned_encoding,
    rope_scores,
    scaled_dot_product_attention,
    sinusoid_shift_matrix,
    sinusoid_wavelengths,
    sinusoidal_encoding,
)

PROPERTY = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# --- sinusoidal ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [1, 2, 7, 16])
def test_sinusoidal_matches_paper_formula_entry_by_entry(d_model):
    pe = sinusoidal_encoding(20, d_model)
    for p in range(20):
        for dim in range(d_model):
            i = dim // 2
            angle = p / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
            assert pe[p, dim] == pytest.approx(expected, abs=1e-15)


def test_sinusoidal_hand_values():
    pe = sinusoidal_encoding(3, 4, base=100.0)
    # Position 0: sin 0 = 0, cos 0 = 1 in every pair.
    np.testing.assert_array_equal(pe[0], [0, 1, 0, 1])
    # Pair 0 has frequency 1 (angle = p); pair 1 has 100^(-2/4) = 1/10 (angle = p/10).
    np.testing.assert_allclose(pe[2], [math.sin(2), math.cos(2), math.sin(0.2), math.cos(0.2)])


def test_wavelengths():
    # Pair i turns once every 2π·base^(2i/d_model) positions: 2π, 2π·10000^(1/4), ...
    np.testing.assert_allclose(
        sinusoid_wavelengths(8), 2 * np.pi * 10000 ** (np.arange(4) * 2 / 8), rtol=1e-14
    )
    assert sinusoid_wavelengths(5).shape == (3,)
    # The sine of pair i repeats after one wavelength.
    lam = sinusoid_wavelengths(4, base=16.0)[1]  # 2π·4, not an integer number of positions
    i_freq = 2 * np.pi / lam
    assert math.sin(i_freq * (3 + lam)) == pytest.approx(math.sin(i_freq * 3), abs=1e-12)


@PROPERTY
@given(
    st.integers(1, 16).map(lambda n: 2 * n),
    st.integers(0, 200),
    st.integers(-50, 50),
    st.sampled_from([100.0, 10000.0]),
)
def test_shift_is_a_fixed_rotation(d_model, p, k, base):
    if p + k < 0:
        k = -p
    pe = sinusoidal_encoding(p + max(k, 0) + 1, d_model, base)
    m = sinusoid_shift_matrix(d_model, k, base)
    np.testing.assert_allclose(m @ pe[p], pe[p + k], atol=1e-9)
    # A rotation: orthogonal, and it does not depend on p.
    np.testing.assert_allclose(m @ m.T, np.eye(d_model), atol=1e-12)
    np.testing.assert_allclose(sinusoid_shift_matrix(d_model, -k, base), m.T, atol=1e-15)


def test_shift_matrix_block_hand_values():
    # d_model 2, base irrelevant for pair 0 (ω = 1): rotation by k radians acting on (sin, cos).
    m = sinusoid_shift_matrix(2, 1)
    np.testing.assert_allclose(m, [[math.cos(1), math.sin(1)], [-math.sin(1), math.cos(1)]])


def test_shift_matrix_odd_width_only_last_dimension_inexact():
    pe = sinusoidal_encoding(40, 5)
    m = sinusoid_shift_matrix(5, 3)
    err = np.abs(pe[3:] - pe[:-3] @ m.T).max(axis=0)
    assert err[:4].max() < 1e-12
    assert err[4] > 1e-4  # the lone sine has no cosine partner to rotate with


def test_learned_encoding():
    a = learned_encoding(50, 32, seed=1)
    assert a.shape == (50, 32)
    np.testing.assert_array_equal(a, learned_encoding(50, 32, seed=1))
    assert not np.array_equal(a, learned_encoding(50, 32, seed=2))
    assert a.std() == pytest.approx(0.02, rel=0.1)
    assert learned_encoding(10, 4, std=1.0).std() > 0.3


# --- rotary -------------------------------------------------------------------------------------


def hf_style_reference(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """From the HF Llama code: inv_freq, emb = cat(freqs, freqs), x·cos + rotate_half(x)·sin."""
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (np.arange(0, d, 2) / d))
    emb = np.concatenate([np.outer(positions, inv_freq)] * 2, axis=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * np.cos(emb) + np.concatenate([-x2, x1], axis=-1) * np.sin(emb)


def test_rotary_matches_reference_formula_and_transformers():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 3, 7, 8))  # (batch, head, pos, d_head)
    k = rng.normal(size=(2, 3, 7, 8))
    pos = np.arange(7)
    np.testing.assert_allclose(apply_rotary(q, pos), hf_style_reference(q, pos, 1e4), rtol=1e-13)
    # The real function from transformers, fed cos/sin built as LlamaRotaryEmbedding does.
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float64) / 8))
    emb = torch.cat([torch.outer(torch.arange(7, dtype=torch.float64), inv_freq)] * 2, dim=-1)
    cos, sin = emb.cos()[None].expand(2, -1, -1), emb.sin()[None].expand(2, -1, -1)
    hf_q, hf_k = apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(k), cos, sin)
    np.testing.assert_allclose(apply_rotary(q, pos), hf_q.numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(apply_rotary(k), hf_k.numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("original", [8, 64, 8192])
def test_llama3_frequencies_match_transformers(original):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from attention_core.positional import llama3_frequencies

    scaling = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0)
    config = LlamaConfig(
        hidden_size=64, num_attention_heads=2, max_position_embeddings=original,
        rope_parameters=dict(rope_type="llama3", rope_theta=10000.0,
                             original_max_position_embeddings=original, **scaling),
    )  # fmt: skip
    expected, attention_factor = ROPE_INIT_FUNCTIONS["llama3"](config)  # float32
    ours = llama3_frequencies(32, 10000.0, original_context=original, **scaling)
    assert attention_factor == 1.0 and ours.shape == (16,)
    np.testing.assert_allclose(ours, expected.double().numpy(), rtol=1e-6)
    # All three regimes are met at original 64: kept, slowed by the factor, blended.
    plain = 10000.0 ** (-np.arange(0, 32, 2) / 32)
    if original == 64:
        ratio = ours / plain
        assert ratio.max() == 1.0 and ratio.min() == 1 / 8
        assert np.any((ratio > 1 / 8) & (ratio < 1.0))


def test_rotary_hand_example():
    # d = 2: one pair (x0, x1), frequency 1. Position p rotates by p radians:
    # (x0 cos p - x1 sin p, x1 cos p + x0 sin p). (1, 0) at position π/2 -> (0, 1).
    np.testing.assert_allclose(apply_rotary([[1.0, 0.0]], [math.pi / 2]), [[0.0, 1.0]], atol=1e-15)
    # Position 0 is the identity.
    x = np.random.default_rng(1).normal(size=(1, 6))
    np.testing.assert_allclose(apply_rotary(x, [0]), x, rtol=0, atol=0)


@PROPERTY
@given(
    st.integers(1, 8).map(lambda n: 2 * n),
    st.integers(0, 500),
    st.integers(0, 500),
    st.integers(-100, 100),
    st.integers(0, 2**31),
)
def test_rotary_score_depends_only_on_offset(d, m, n, shift, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(1, d)), rng.normal(size=(1, d))
    shift = max(shift, -min(m, n))
    a = rope_scores(q, k, [m], [n])
    b = rope_scores(q, k, [m + shift], [n + shift])
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    # Rotations keep lengths.
    np.testing.assert_allclose(np.linalg.norm(apply_rotary(q, [m])), np.linalg.norm(q), rtol=1e-12)


def test_rope_scores_shape_and_default_positions():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(4, 6)), rng.normal(size=(5, 6))
    s = rope_scores(q, k)
    assert s.shape == (4, 5)
    np.testing.assert_allclose(s, apply_rotary(q) @ apply_rotary(k).T, rtol=1e-13)


def test_rotary_errors():
    with pytest.raises(AttentionInputError, match="width must be even"):
        apply_rotary(np.ones((3, 5)))
    with pytest.raises(AttentionInputError, match="one position per row"):
        apply_rotary(np.ones((3, 4)), [0, 1])
    with pytest.raises(AttentionInputError, match="base must be greater than 1"):
        apply_rotary(np.ones((3, 4)), base=1.0)


# --- ALiBi --------------------------------------------------------------------------------------


def test_alibi_slopes_for_8_heads_are_powers_of_one_half():
    np.testing.assert_allclose(alibi_slopes(8), [2.0**-i for i in range(1, 9)], rtol=1e-15)


def test_alibi_slopes_non_power_of_two():
    # 6 heads: the 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then every other slope of the
    # 8-head sequence (2^-1, 2^-3, ...) until there are 6: 2^-1, 2^-3.
    np.testing.assert_allclose(
        alibi_slopes(6), [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3], rtol=1e-15
    )
    assert alibi_slopes(1).tolist() == [2**-8]
    # 12 heads: 8-head slopes 2^-1..2^-8, then the 16-head sequence 2^-0.5, 2^-1, 2^-1.5, ...
    # taken every other one: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    expected = [2.0**-i for i in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    np.testing.assert_allclose(alibi_slopes(12), expected, rtol=1e-15)


@pytest.mark.parametrize("num_heads", [1, 3, 5, 8, 12, 16])
def test_alibi_matches_bloom(num_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    seq = 6
    hf = build_alibi_tensor(torch.ones(1, seq), num_heads, torch.float64)  # (head, 1, k_pos)
    hf = hf.numpy()[:, 0, :]
    # Bloom computes the slopes in float32, hence the tolerance.
    np.testing.assert_allclose(alibi_slopes(num_heads), hf[:, 1], rtol=3e-7)
    # Bloom adds slope·j; ours is slope·(j - i), the same up to a constant per row, which
    # softmax ignores: the causal attention weights are identical.
    ours = alibi_bias(num_heads, seq)
    row_constant = -hf[:, 1, None, None] * np.arange(seq)[None, :, None]  # -slope·i
    np.testing.assert_allclose(
        ours - hf[:, None, :], np.broadcast_to(row_constant, ours.shape), atol=1e-6
    )
    rng = np.random.default_rng(num_heads)
    q, k, v = (rng.normal(size=(num_heads, seq, 4)) for _ in range(3))
    base = scaled_dot_product_attention(q, k, v).scaled
    mask = causal_mask(seq)

    def weights(bias):
        s = np.where(mask, base + bias, -np.inf)
        return np.exp(s - s.max(-1, keepdims=True)) / np.exp(s - s.max(-1, keepdims=True)).sum(
            -1, keepdims=True
        )

    np.testing.assert_allclose(weights(ours), weights(hf[:, None, :]), rtol=1e-6)


def test_alibi_bias_hand_values():
    # 2 heads: slopes 2^-4, 2^-8. Query 2 looking at keys 0..2: distance j - i = -2, -1, 0.
    bias = alibi_bias(2, 3)
    assert bias.shape == (2, 3, 3)
    np.testing.assert_allclose(bias[0, 2], [-2 / 16, -1 / 16, 0])
    np.testing.assert_allclose(bias[1, 2], [-2 / 256, -1 / 256, 0])
    # Above the diagonal (future keys) the formula is positive; symmetric mode penalises both.
    assert bias[0, 0, 2] == pytest.approx(2 / 16)
    sym = alibi_bias(2, 3, symmetric=True)
    assert sym[0, 0, 2] == pytest.approx(-2 / 16)
    assert alibi_bias(1, 2, 4).shape == (1, 2, 4)


def test_bad_arguments():
    with pytest.raises(AttentionInputError, match="num_heads must be at least 1"):
        alibi_slopes(0)
    with pytest.raises(AttentionInputError, match="d_model must be at least 1"):
        sinusoidal_encoding(4, 0)
    with pytest.raises(AttentionInputError, match="offset must be a finite number"):
        sinusoid_shift_matrix(4, float("inf"))


# --- the same functions on torch tensors ---------------------------------------------------------


def test_apply_rotary_on_tensors_matches_hugging_face_rotate_half():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=g).requires_grad_()
    positions = torch.tensor([0.0, 1.0, 2.0, 7.0, 11.0])
    # transformers' apply_rotary_pos_emb: x·cos + rotate_half(x)·sin, frequencies base^(-2i/d).
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    emb = torch.cat([positions.double()[:, None] * inv_freq] * 2, dim=-1)
    rotate_half = torch.cat([-x[..., 4:], x[..., :4]], dim=-1)
    expected = x * emb.cos() + rotate_half * emb.sin()
    got = apply_rotary(x, positions)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    torch.testing.assert_close(got, expected, rtol=1e-14, atol=1e-14)
    got.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    # float32 in, float32 out (the angles are still computed in float64).
    assert apply_rotary(x.detach().float(), positions).dtype == torch.float32


# --- added for the mutation check (make mutate): each kills a mutant the tests above missed ---


def test_one_dimensional_shift_matrix_by_hand():
    from attention_core.positional import sinusoid_shift_matrix

    # d_model = 1: the only frequency is base^0 = 1 and the lone sine's corner holds cos(1·k).
    np.testing.assert_allclose(sinusoid_shift_matrix(1, 2.0), [[math.cos(2.0)]], rtol=1e-12)


def test_learned_encoding_is_normal_with_the_given_std():
    from attention_core.positional import learned_encoding
    from attention_core.validation import AttentionInputError

    assert learned_encoding(1, 1).shape == (1, 1)
    np.testing.assert_array_equal(learned_encoding(3, 2), learned_encoding(3, 2, seed=0))
    # 20,000 draws of N(0, 0.02²): mean within ~5 standard errors (0.02/√20000 = 1.4e-4).
    table = learned_encoding(500, 40)
    assert abs(table.mean()) < 7e-4 and abs(table.std() - 0.02) < 5e-4
    with pytest.raises(AttentionInputError):
        learned_encoding(3, 2, std=0.0)


def test_alibi_bias_for_a_single_key_and_query():
    from attention_core.positional import alibi_bias

    np.testing.assert_array_equal(alibi_bias(1, 1), [[[0.0]]])
    # 2 heads: slopes 2^-4 and 2^-8; query i sees key 0 at distance 0 - i.
    np.testing.assert_allclose(
        alibi_bias(2, 2, 1), [[[0.0], [-1 / 16]], [[0.0], [-1 / 256]]], rtol=1e-12
    )


def test_wavelengths_for_one_dimension_and_a_small_base():
    from attention_core.positional import sinusoid_wavelengths
    from attention_core.validation import AttentionInputError

    np.testing.assert_allclose(sinusoid_wavelengths(1), [2 * math.pi], rtol=1e-12)
    # 2π·base^(2i/d) with base 2, d = 4: 2π and 2π·√2. Any base above 1 is allowed.
    np.testing.assert_allclose(
        sinusoid_wavelengths(4, base=2.0), [2 * math.pi, 2 * math.pi * math.sqrt(2)], rtol=1e-12
    )
    with pytest.raises(AttentionInputError, match="greater than 1"):
        sinusoid_wavelengths(4, base=1.0)


def test_llama3_frequencies_worked_by_hand_keep_blend_and_slow_down():
    from attention_core.positional import llama3_frequencies

    # ω = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001: wavelengths 2π·(1, 10, 100, 1000). Trained on
    # 4000 positions with low 2 and high 8: waves under 4000/8 = 500 keep their speed, waves
    # over 4000/2 = 2000 are slowed by 4, and 2π·100 = 628 lies between: s = (4000/628.3 - 2)/6.
    s = (4000 / (2 * np.pi * 100) - 2) / 6
    expected = [1.0, 0.1, (1 - s) * 0.01 / 4 + s * 0.01, 0.001 / 4]
    found = llama3_frequencies(8, 10000.0, 4.0, 2.0, 8.0, original_context=4000)
    np.testing.assert_allclose(found, expected, rtol=1e-12)
