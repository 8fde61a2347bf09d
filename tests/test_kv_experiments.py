"""SmolLM2 with a smaller KV cache (attention_core/models/kv_experiments.py) against independent
paths: the pooled cache against a model whose W_k and W_v are mean-pooled across KV heads (run
by our code and by transformers), the quantized cache against transformers with its keys and
values quantized by a torch formula written here, the chunked KL against torch on whole logits,
and the cache formula against the bytes a real cache holds.

The formulas themselves (bytes, quantization, pooling) are tested in test_kv_cache.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attention_core.models.kv_experiments import (
    KV_VARIANTS,
    kv_experiment,
    mean_pooled_kv,
    quantized_kv,
    variant_cache_bytes,
)
from attention_core.models.llama import load_llama, read_text, run_llama
from attention_core.models.llama.files import widen
from attention_core.models.scoring import compare_next_tokens, score_text
from attention_core.validation import AttentionInputError
from tests.hf_models import smollm2_gguf_or_skip, smollm2_reference

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

TEXT = (
    "The lighthouse keeper woke before dawn, as he had every morning for thirty years. He "
    "climbed the narrow spiral stairs, counting the steps out of habit, and checked the great "
    "lens for salt and dust. Outside, the sea was grey and restless, and a thin rain blew in from "
    "the west. He wrote the weather in the logbook: wind from the southwest, visibility poor."
)


@pytest.fixture(scope="module")
def gguf_path():
    return smollm2_gguf_or_skip()


@pytest.fixture(scope="module")
def model(gguf_path):
    return load_llama(gguf_path)


@pytest.fixture(scope="module")
def reference(gguf_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return smollm2_reference(gguf_path)[0]


def text_ids(model, n: int) -> np.ndarray:
    ids = model.encode(TEXT)
    assert len(ids) >= n
    return np.asarray(ids[:n])


def pooled_rows(w: np.ndarray, kv_heads: int) -> np.ndarray:
    """W_k or W_v `(kv_head·d_head, d_model)` with every head's rows replaced by their mean."""
    heads = w.reshape(kv_heads, -1, w.shape[-1])
    return np.broadcast_to(heads.mean(axis=0), heads.shape).reshape(w.shape)


# ----------------------------------------------------------------------------- pooled heads (MQA)


def test_pooling_the_cache_equals_pooling_the_projections(model):
    config = model.config
    q_rows = config.num_attention_heads * config.head_dim
    kv_rows = config.num_key_value_heads * config.head_dim
    layers = []
    for layer in model.weights.layers:
        w = widen(layer.w_qkv)  # float32: the mean of bfloat16 rows is exact in it
        w_k, w_v = w[q_rows : q_rows + kv_rows], w[q_rows + kv_rows :]
        pooled = np.concatenate(
            [w[:q_rows], pooled_rows(w_k, config.num_key_value_heads),
             pooled_rows(w_v, config.num_key_value_heads)]
        )  # fmt: skip
        layers.append(dataclasses.replace(layer, w_qkv=pooled))
    pooled_model = dataclasses.replace(
        model, weights=dataclasses.replace(model.weights, layers=tuple(layers))
    )
    ids = text_ids(model, 24)
    by_weights = score_text(pooled_model, ids)
    by_codec = score_text(model, ids, kv_codec=mean_pooled_kv)
    # Only the order of the float32 sums differs (RoPE after the mean, or the mean after RoPE).
    np.testing.assert_allclose(by_codec.losses, by_weights.losses, rtol=1e-4, atol=2e-4)
    np.testing.assert_allclose(by_codec.final, by_weights.final, atol=2e-3, rtol=1e-3)
    # And it changes the model: pooling a trained model's heads is no small edit.
    assert by_codec.losses.mean() > score_text(model, ids).losses.mean() + 1.0


def test_pooling_matches_transformers_with_pooled_projections(model, reference):
    ids = text_ids(model, 16)
    kv = model.config.num_key_value_heads
    originals = []
    with torch.no_grad():
        for layer in reference.model.layers:
            attention = layer.self_attn
            for proj in (attention.k_proj, attention.v_proj):
                originals.append((proj, proj.weight.clone()))
                proj.weight.copy_(torch.from_numpy(pooled_rows(proj.weight.numpy(), kv).copy()))
        try:
            logits = reference(torch.from_numpy(ids)[None], use_cache=False).logits[0]
        finally:
            for proj, weight in originals:
                proj.weight.copy_(weight)
    expected = torch.nn.functional.cross_entropy(
        logits[:-1].double(), torch.from_numpy(ids[1:]), reduction="none"
    ).numpy()
    ours = score_text(model, ids, kv_codec=mean_pooled_kv)
    np.testing.assert_allclose(ours.losses, expected, rtol=1e-4, atol=2e-4)


# ----------------------------------------------------------------------------- quantized cache


def torch_absmax(x, bits: int):
    """Symmetric absmax quantization of each vector along the last axis, written for torch."""
    q_max = 2 ** (bits - 1) - 1
    scale = x.abs().amax(dim=-1, keepdim=True) / q_max
    codes = torch.where(scale > 0, torch.round(x / scale), torch.zeros_like(x))
    return codes * scale


def quantized_reference(reference, ids: np.ndarray, bits: int, monkeypatch):
    """transformers' per-token losses with every layer's keys (after RoPE) and values quantized
    by `torch_absmax`, and what each layer's attention read: {layer: (key, value)}."""
    from transformers.models.llama import modeling_llama

    eager = modeling_llama.eager_attention_forward
    read = {}

    def quantized_attention(module, query, key, value, *args, **kwargs):
        # key and value are (batch, kv_head, n, d_head) here, before repeat_kv.
        key, value = torch_absmax(key, bits), torch_absmax(value, bits)
        read[module.layer_idx] = (key[0].numpy().copy(), value[0].numpy().copy())
        return eager(module, query, key, value, *args, **kwargs)

    monkeypatch.setattr(modeling_llama, "eager_attention_forward", quantized_attention)
    with torch.no_grad():
        logits = reference(torch.from_numpy(ids)[None], use_cache=False).logits[0]
    losses = torch.nn.functional.cross_entropy(
        logits[:-1].double(), torch.from_numpy(ids[1:]), reduction="none"
    ).numpy()
    return losses, read


@pytest.mark.parametrize("bits", [8, 4])
def test_the_quantized_cache_reads_what_transformers_reads_quantized(
    model, reference, bits, monkeypatch
):
    ids = text_ids(model, 16)
    _, expected = quantized_reference(reference, ids, bits, monkeypatch)
    codec, ours = quantized_kv(bits), {}

    def recorded(layer, k, v):
        ours[layer] = codec(layer, k, v)
        return ours[layer]

    score_text(model, ids, kv_codec=recorded)
    assert sorted(ours) == sorted(expected) == list(range(30))
    # Layer 0 reads the same embeddings in both: its keys and values, quantized, agree but for
    # a number on the edge of two steps that float32 noise rounds the other way (one step).
    for ours_kv, expected_kv in zip(ours[0], expected[0], strict=True):
        step = np.abs(expected_kv).max(axis=-1, keepdims=True) / (2 ** (bits - 1) - 1)
        off = np.abs(ours_kv - expected_kv)
        assert np.all(off <= step * 1.001 + 1e-6)
        assert np.mean(off > 1e-5) < 1e-3


def test_the_4_bit_cache_matches_transformers_along_the_text(model, reference, monkeypatch):
    ids = text_ids(model, 16)
    expected, _ = quantized_reference(reference, ids, 4, monkeypatch)
    ours = score_text(model, ids, kv_codec=quantized_kv(4)).losses
    # Each layer's keys and values are rounded to steps of 1/7 of their largest number; a
    # number that float32 noise puts on the other side of a step's edge changes the next
    # layers a little, so the two runs drift apart slowly. (At 8 bits the steps are 18 times
    # finer, the edges 18 times denser, and the drift reaches the 8-bit cache's own effect:
    # layer 0 above is its check.)
    np.testing.assert_allclose(ours, expected, atol=2e-3)
    plain = score_text(model, ids).losses
    assert np.abs(ours - plain).max() > 10 * np.abs(ours - expected).max()


# ----------------------------------------------------------------------------- KL and agreement


def test_the_kl_made_in_chunks_equals_torch_on_whole_logits(model):
    ids = text_ids(model, 12)
    plain = score_text(model, ids)
    coded = score_text(model, ids, kv_codec=quantized_kv(4))
    # Chunks of 5, 5 and 2 positions, each one product of both streams.
    compared = compare_next_tokens(model, ids, plain.final, (coded.final,), rows=5)
    embed = torch.from_numpy(widen(model.weights.embed)).double()  # (vocab, d_model)
    log_p = torch.log_softmax(torch.from_numpy(plain.final).double() @ embed.T, dim=-1)
    log_q = torch.log_softmax(torch.from_numpy(coded.final).double() @ embed.T, dim=-1)
    expected = torch.nn.functional.kl_div(log_q, log_p, log_target=True, reduction="none")
    # Our logits are float32 products, torch's float64 here: the smallest KL differ by ~1e-7.
    np.testing.assert_allclose(compared.kl[0], expected.sum(-1).numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(
        compared.top1_agrees[0], (log_p.argmax(-1) == log_q.argmax(-1)).numpy()
    )
    assert compared.kl.shape == compared.top1_agrees.shape == (1, 12)
    targets = torch.from_numpy(ids[1:])
    for stream, log_probs in enumerate((log_p, log_q)):
        expected_losses = torch.nn.functional.nll_loss(log_probs[:-1], targets, reduction="none")
        np.testing.assert_allclose(compared.losses[stream], expected_losses.numpy(), rtol=1e-5)
    # Made together or one stream at a time, the losses are the same (to the float32 products'
    # rounding, which a BLAS may order differently for products of different heights: up to
    # 2.5e-6 with AVX-512 kernels on an AMD EPYC).
    np.testing.assert_allclose(compared.losses, np.stack([plain.losses, coded.losses]), rtol=1e-5)


def test_an_unchanged_cache_gives_kl_zero_and_full_agreement(model):
    ids = text_ids(model, 10)
    plain = score_text(model, ids)
    same = score_text(model, ids, kv_codec=lambda layer, k, v: (k, v))
    compared = compare_next_tokens(model, ids, plain.final, (same.final, same.final))
    np.testing.assert_allclose(compared.kl, np.zeros((2, 10)), atol=1e-9)
    assert compared.top1_agrees.all()
    # Float32 products of other heights: rounding in another order (1.7e-6 seen).
    np.testing.assert_allclose(compared.losses, np.stack([plain.losses] * 3), rtol=1e-5)


def test_eight_bits_move_the_distribution_far_less_than_four(model):
    ids = text_ids(model, 48)
    found = kv_experiment(model, ids)
    effects = {effect.name: effect for effect in found.effects}
    assert list(effects) == list(KV_VARIANTS)
    assert effects["int8"].mean_kl < effects["int4"].mean_kl / 20
    assert effects["int8"].agreement >= 0.9 > effects["mqa"].agreement
    assert effects["int4"].mean_kl < effects["mqa"].mean_kl
    assert found.mean_loss == pytest.approx(score_text(model, ids).losses.mean())
    for effect in effects.values():
        assert effect.kl.shape == effect.top1_agrees.shape == (48,)
        assert effect.mean_kl == pytest.approx(effect.kl.mean())
        assert np.all(effect.kl > -1e-9)
    assert found.ids == tuple(int(i) for i in ids)


def test_a_longer_texts_full_read_gives_the_same_experiment(model):
    # Under the causal mask the first 32 positions of a 64-token read are the 32-token read's.
    ids, longer = text_ids(model, 32), text_ids(model, 64)
    _, longer_full, _ = read_text(model, longer)
    reused = kv_experiment(model, ids, full=longer_full[:32])
    plain = kv_experiment(model, ids)
    assert reused.mean_loss == pytest.approx(plain.mean_loss, abs=1e-5)
    for found, expected in zip(reused.effects, plain.effects, strict=True):
        np.testing.assert_allclose(found.kl, expected.kl, rtol=1e-3, atol=1e-6)
        np.testing.assert_array_equal(found.top1_agrees, expected.top1_agrees)
        assert found.mean_loss == pytest.approx(expected.mean_loss, rel=1e-6)
    # The given read is the one compared with: an int8 cache's read as the "full" one.
    _, int8, _ = read_text(model, ids, kv_codec=KV_VARIANTS["int8"].codec)
    against_int8 = kv_experiment(model, ids, ("int8",), full=int8)
    np.testing.assert_allclose(against_int8.effects[0].kl, 0.0, atol=1e-9)
    assert against_int8.mean_loss == pytest.approx(plain.effects[1].mean_loss, rel=1e-6)
    with pytest.raises(AttentionInputError, match=r"must be \(32, 576\).*got \(31, 576\)"):
        kv_experiment(model, ids, full=longer_full[:31])


def test_experiments_are_checked(model):
    with pytest.raises(AttentionInputError, match="'int2' is not a KV-cache variant"):
        kv_experiment(model, text_ids(model, 4), ("int8", "int2"))
    with pytest.raises(AttentionInputError, match="one shape"):
        compare_next_tokens(model, np.arange(3), np.zeros((3, 576)), (np.zeros((4, 576)),))
    with pytest.raises(AttentionInputError, match="3 positions and the text 4 tokens"):
        compare_next_tokens(model, np.arange(4), np.zeros((3, 576)), (np.zeros((3, 576)),))
    with pytest.raises(AttentionInputError, match="rows"):
        compare_next_tokens(model, np.arange(3), np.zeros((3, 576)), (np.zeros((3, 576)),), rows=0)


# ----------------------------------------------------------------------------- bytes


def test_the_cache_formula_counts_what_a_real_cache_holds(model):
    ids = text_ids(model, 20)
    cache = run_llama(model, ids).cache
    assert variant_cache_bytes(model, None, 20) == cache.bytes_used == 46_080 * 20
    assert variant_cache_bytes(model, KV_VARIANTS["mqa"], 20) == cache.bytes_used // 3
    # 64 numbers of 8 or 4 bits and a float32 scale, per vector (of 64 float32s before).
    assert variant_cache_bytes(model, KV_VARIANTS["int8"], 20) == cache.bytes_used * 68 // 256
    assert variant_cache_bytes(model, KV_VARIANTS["int4"], 20) == cache.bytes_used * 36 // 256
