"""GPT-2 (attention_core/models/gpt2/) against Hugging Face ``transformers``.

A tiny GPT-2 is built by ``transformers`` inside the test (2 layers, 4 heads, d_model 48, 64
positions, a byte-level BPE tokenizer trained on a few sentences), its weights drawn wider than
GPT-2's initialisation so that attention is far from uniform and a wrong head split, scale or
transposition would show. It is saved with ``save_pretrained`` in float32, loaded by our code and
compared with ``GPT2LMHeadModel`` (eager attention, float32) loading the same folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_core.models import load_gpt2, points, run_gpt2
from attention_core.models.gpt2 import GPT2Config, parameter_count
from attention_core.models.loading import ModelFileError, ModelNotFoundError
from attention_core.validation import AttentionInputError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

REPO = Path(__file__).resolve().parents[1]
CORPUS = [
    "The cat sat on the mat, and the dog sat on the log.",
    "Attention lets every token look back at the tokens before it.",
    "Queries meet keys; the weights mix the values. 12 heads, 64 positions!",
    "A learned table adds where each token is to what it is.",
]
PROMPTS = [
    "The cat sat on the",
    "Attention lets every token look",
    "keys; the weights mix 64 values!",
    "A",
    " the dog sat on the mat and the cat sat on the log",
]
ACTIVATIONS = ("gelu_new", "gelu")


def _tiny_tokenizer():
    """A GPT-2-style byte-level BPE tokenizer trained on CORPUS: the 256 bytes (so any text has
    tokens), the end-of-text token and up to 43 merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def write_tiny_gpt2(directory: Path, activation: str = "gelu_new", seed: int = 0) -> Path:
    """A tiny GPT2LMHeadModel saved in float32 with its tokenizer beside it."""
    torch.manual_seed(seed)
    tok = _tiny_tokenizer()
    config = transformers.GPT2Config(
        vocab_size=300,
        n_embd=48,
        n_layer=2,
        n_head=4,
        n_positions=64,
        activation_function=activation,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".ln_" in name and name.endswith("weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif param.ndim == 1:
                param.copy_(0.1 * torch.randn_like(param))
            else:
                param.copy_(0.15 * torch.randn_like(param))
    model.save_pretrained(directory)
    wrapped = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    wrapped.save_pretrained(directory)
    return directory


def reference(directory: Path, dtype=None):
    return transformers.GPT2LMHeadModel.from_pretrained(
        str(directory), attn_implementation="eager", dtype=dtype or torch.float32
    ).eval()


def hf_run(hf, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(logits `(n, vocab)`, attentions `(layer, head, n, n)`) of transformers on ``ids``."""
    with torch.no_grad():
        out = hf(torch.from_numpy(np.asarray(ids))[None], output_attentions=True, use_cache=False)
    attentions = np.stack([a[0].numpy() for a in out.attentions])
    return out.logits[0].numpy(), attentions


@pytest.fixture(scope="module", params=ACTIVATIONS)
def tiny_dir(request, tmp_path_factory) -> Path:
    return write_tiny_gpt2(tmp_path_factory.mktemp(request.param), request.param)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_gpt2(tiny_dir)


@pytest.fixture(scope="module")
def tiny_hf(tiny_dir):
    return reference(tiny_dir)


# ----------------------------------------------------------------------------- parity


@pytest.mark.parametrize("text", PROMPTS)
def test_logits_and_attention_match_transformers(tiny, tiny_hf, text):
    ids = np.array(tiny.encode(text))
    trace = run_gpt2(tiny, ids, all_logits=True)
    logits, attentions = hf_run(tiny_hf, ids)
    np.testing.assert_allclose(trace.logits, logits, atol=1e-4, rtol=0)
    np.testing.assert_allclose(trace.next_token_logits, logits[-1], atol=1e-4, rtol=0)
    assert trace.attention_weights.shape == (2, 4, len(ids), len(ids))
    np.testing.assert_allclose(trace.attention_weights, attentions, atol=1e-5, rtol=0)


def test_attention_is_far_from_uniform_and_causal(tiny):
    trace = run_gpt2(tiny, tiny.encode(PROMPTS[4]))
    weights = trace.attention_weights  # (layer, head, q, k)
    assert np.all(np.triu(weights, k=1) == 0)  # no query sees a later key
    np.testing.assert_allclose(weights.sum(-1), 1, atol=1e-6)
    n = weights.shape[-1]
    assert n >= 10 and weights[..., -1, :].max() > 3 / n  # the last query picks, not averages


def test_tokens_match_transformers_tokenizer(tiny, tiny_dir):
    hf_tok = transformers.PreTrainedTokenizerFast.from_pretrained(str(tiny_dir))
    for text in PROMPTS:
        assert tiny.encode(text) == hf_tok.encode(text)
        assert tiny.decode(tiny.encode(text)) == text


def test_parameter_count_from_the_config_equals_transformers(tiny, tiny_hf, tiny_dir):
    counted = sum(p.numel() for p in tiny_hf.parameters())  # the tied head once
    config = GPT2Config.from_dict(json.loads((tiny_dir / "config.json").read_text()))
    assert parameter_count(config) == counted == tiny.parameter_count
    untied = GPT2Config.from_dict(
        {**json.loads((tiny_dir / "config.json").read_text()), "tie_word_embeddings": False}
    )
    assert parameter_count(untied) == counted + 300 * 48


def test_weights_are_in_nn_linear_layout_and_the_position_table_is_readable(tiny, tiny_hf):
    block = tiny_hf.transformer.h[1]
    ours, d = tiny.weights.layers[1], 48
    c_attn = block.attn.c_attn.weight.detach().numpy()  # Conv1D: (in, out)
    np.testing.assert_array_equal(ours.w_q, c_attn[:, :d].T)
    np.testing.assert_array_equal(ours.w_k, c_attn[:, d : 2 * d].T)
    np.testing.assert_array_equal(ours.w_v, c_attn[:, 2 * d :].T)
    np.testing.assert_array_equal(ours.b_v, block.attn.c_attn.bias.detach().numpy()[2 * d :])
    np.testing.assert_array_equal(ours.w_fc, block.mlp.c_fc.weight.detach().numpy().T)
    assert ours.w_fc.shape == (192, 48) and ours.w_proj.shape == (48, 192)
    table = tiny.position_table
    assert table.shape == (64, 48) and not table.flags.writeable
    np.testing.assert_array_equal(table, tiny_hf.transformer.wpe.weight.detach().numpy())
    assert tiny.weights.lm_head is tiny.weights.wte  # tied
    trace = run_gpt2(tiny, [5, 6, 7])
    np.testing.assert_array_equal(trace.position_embeddings, table[:3])
    np.testing.assert_array_equal(trace.embeddings, tiny.weights.wte[[5, 6, 7]] + table[:3])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_checkpoint_matches_transformers_on_the_same_rounded_weights(
    tmp_path, tiny_dir, dtype
):
    rounded = reference(tiny_dir).to(getattr(torch, dtype))
    rounded.save_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_bytes((tiny_dir / "tokenizer.json").read_bytes())
    ours = load_gpt2(tmp_path)
    assert ours.saved_as == dtype
    hf = reference(tmp_path, torch.float32)  # an exact widening of the saved numbers
    for text in PROMPTS[:3]:
        ids = np.array(ours.encode(text))
        trace = run_gpt2(ours, ids, all_logits=True)
        logits, attentions = hf_run(hf, ids)
        np.testing.assert_allclose(trace.logits, logits, atol=1e-4, rtol=0)
        np.testing.assert_allclose(trace.attention_weights, attentions, atol=1e-5, rtol=0)


def test_names_without_the_transformer_prefix_load_the_same(tmp_path, tiny, tiny_dir):
    from safetensors.numpy import load_file, save_file

    state = load_file(tiny_dir / "model.safetensors")
    assert any(name.startswith("transformer.") for name in state)
    save_file(
        {k.removeprefix("transformer."): v for k, v in state.items()},
        tmp_path / "model.safetensors",
    )
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((tiny_dir / name).read_bytes())
    ids = tiny.encode(PROMPTS[0])
    np.testing.assert_array_equal(
        run_gpt2(load_gpt2(tmp_path), ids).logits, run_gpt2(tiny, ids).logits
    )


# ----------------------------------------------------------------------------- points, edits


@pytest.mark.parametrize(("layer", "position"), [(0, 2), (1, 0), (1, 5)])
def test_a_residual_edit_matches_transformers_with_a_hook_on_the_block(
    tiny, tiny_hf, layer, position
):
    ids = np.array(tiny.encode(PROMPTS[4]))
    delta = np.zeros((len(ids), 48), np.float32)
    delta[position] = np.random.default_rng(layer).normal(size=48).astype(np.float32) * 2

    def hook(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden = hidden + torch.from_numpy(delta)[None]
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = tiny_hf.transformer.h[layer].register_forward_hook(hook)
    try:
        logits, _ = hf_run(tiny_hf, ids)
    finally:
        handle.remove()
    trace = run_gpt2(
        tiny, ids, all_logits=True, edits={points.resid(layer + 1): lambda x: x + delta}
    )
    np.testing.assert_allclose(trace.logits, logits, atol=1e-4, rtol=0)
    plain = run_gpt2(tiny, ids, all_logits=True)
    # Positions before the edited one never see it; the edited one and later ones do.
    np.testing.assert_array_equal(trace.logits[:position], plain.logits[:position])
    assert np.abs(trace.logits[position] - plain.logits[position]).max() > 1e-3
    np.testing.assert_allclose(
        trace.point(points.resid(layer + 1)),
        plain.point(points.resid(layer + 1)) + delta,
        atol=1e-6,
    )


def test_every_point_reads_the_step_the_forward_computed(tiny):
    trace = run_gpt2(tiny, tiny.encode(PROMPTS[1]))
    assert trace.point(points.resid(0)) is trace.embeddings
    for layer, steps in enumerate(trace.layers):
        before, after = trace.point(points.resid(layer)), trace.point(points.resid(layer + 1))
        attn, mlp = trace.point(points.attn_out(layer)), trace.point(points.mlp_out(layer))
        np.testing.assert_allclose(after, before + attn + mlp, atol=1e-5)
        heads = trace.point(points.heads(layer))
        assert heads.shape == (4, len(trace.input_ids), 12)
        np.testing.assert_array_equal(heads, steps.attention.output)
        w_o = tiny.weights.layers[layer].w_o
        concat = heads.transpose(1, 0, 2).reshape(len(trace.input_ids), 48)
        np.testing.assert_allclose(attn, concat @ w_o.T + tiny.weights.layers[layer].b_o, atol=1e-5)


def test_zeroing_a_head_by_edit_changes_only_what_follows(tiny):
    ids = tiny.encode(PROMPTS[0])

    def zero_head_2(z):
        z = z.copy()
        z[2] = 0
        return z

    plain = run_gpt2(tiny, ids)
    edited = run_gpt2(tiny, ids, edits={points.heads(1): zero_head_2})
    np.testing.assert_array_equal(edited.layers[0].hidden, plain.layers[0].hidden)
    np.testing.assert_array_equal(edited.layers[1].weights, plain.layers[1].weights)
    assert np.all(edited.point(points.heads(1))[2] == 0)
    assert not np.allclose(edited.logits, plain.logits)
    with pytest.raises(AttentionInputError, match="not a point"):
        run_gpt2(tiny, ids, edits={"layer.2.heads": zero_head_2})


# ----------------------------------------------------------------------------- the KV cache


def test_one_cached_decoding_step_equals_the_whole_pass(tiny, tiny_hf):
    ids = np.array(tiny.encode(PROMPTS[4]))
    prompt = run_gpt2(tiny, ids[:-1])
    step = run_gpt2(tiny, ids[-1:], prompt.cache)
    whole = run_gpt2(tiny, ids)
    assert step.cache.length == len(ids) and step.positions.tolist() == [len(ids) - 1]
    np.testing.assert_allclose(step.next_token_logits, whole.next_token_logits, atol=1e-5)
    np.testing.assert_allclose(
        step.attention_weights[:, :, 0], whole.attention_weights[:, :, -1], atol=1e-6
    )
    logits, _ = hf_run(tiny_hf, ids)
    np.testing.assert_allclose(step.next_token_logits, logits[-1], atol=1e-4, rtol=0)
    # The prompt's cache is unchanged: a second continuation of it gives the same numbers.
    again = run_gpt2(tiny, ids[-1:], prompt.cache)
    np.testing.assert_array_equal(again.logits, step.logits)


# ----------------------------------------------------------------------------- errors


def test_an_unsupported_activation_is_refused_before_the_weights_are_read(tmp_path, tiny_dir):
    config = json.loads((tiny_dir / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "activation_function": "relu"}))
    (tmp_path / "tokenizer.json").write_bytes((tiny_dir / "tokenizer.json").read_bytes())
    (tmp_path / "model.safetensors").write_bytes(b"not read")  # a weights error if it were
    with pytest.raises(ModelFileError, match=r"activation 'relu'.*'gelu_new' and 'gelu'"):
        load_gpt2(tmp_path)


def test_a_folder_missing_its_weights_says_so(tmp_path, tiny_dir):
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((tiny_dir / name).read_bytes())
    with pytest.raises(ModelNotFoundError, match=r"has no model\.safetensors \(its weights\)"):
        load_gpt2(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ModelNotFoundError, match=r"holds pytorch_model\.bin, a format"):
        load_gpt2(tmp_path)
    with pytest.raises(ModelNotFoundError, match="is not a folder"):
        load_gpt2(tmp_path / "nowhere")


def test_mismatched_weights_are_named(tmp_path, tiny_dir):
    config = json.loads((tiny_dir / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "n_layer": 3}))
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).write_bytes((tiny_dir / name).read_bytes())
    with pytest.raises(ModelFileError, match=r"h\.2\.ln_1\.weight is missing"):
        load_gpt2(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "llama"}, "not a GPT-2"),
        ({"n_head": 5}, "do not split n_embd 48"),
        ({"add_cross_attention": True}, "cross-attention"),
        ({"n_embd": None}, "not a complete GPT-2 configuration"),
    ],
)
def test_bad_configs_are_clear_errors(change, message):
    base = {"vocab_size": 300, "n_positions": 64, "n_embd": 48, "n_layer": 2, "n_head": 4}
    with pytest.raises(ModelFileError, match=message):
        GPT2Config.from_dict({**base, **change})


def test_bad_inputs_are_clear_errors(tiny):
    with pytest.raises(AttentionInputError, match="64 positions"):
        run_gpt2(tiny, np.zeros(65, np.int64))
    prompt = run_gpt2(tiny, np.zeros(60, np.int64))
    with pytest.raises(AttentionInputError, match="65 tokens"):
        run_gpt2(tiny, np.zeros(5, np.int64), prompt.cache)
    with pytest.raises(AttentionInputError, match=r"0\.\.299"):
        run_gpt2(tiny, [300])
    with pytest.raises(AttentionInputError, match="non-empty"):
        run_gpt2(tiny, [])
    with pytest.raises(AttentionInputError, match="GPT2Cache"):
        run_gpt2(tiny, [1], cache="no")
    with pytest.raises(AttentionInputError, match="attend must be 3 booleans"):
        run_gpt2(tiny, [1, 2, 3], attend=np.ones(2, bool))


def test_attend_hides_a_key_like_transformers_attention_mask(tiny, tiny_hf):
    ids = np.array(tiny.encode(PROMPTS[1]))
    keep = np.arange(len(ids)) != 2
    trace = run_gpt2(tiny, ids, all_logits=True, attend=keep)
    with torch.no_grad():
        out = tiny_hf(
            torch.from_numpy(ids)[None],
            attention_mask=torch.from_numpy(keep.astype(np.int64))[None],
            use_cache=False,
        )
    np.testing.assert_allclose(trace.logits, out.logits[0].numpy(), atol=1e-4, rtol=0)
    assert np.all(trace.attention_weights[..., 2] == 0)


def test_the_package_imports_neither_torch_nor_transformers(tiny_dir):
    code = (
        "import sys; from attention_core.models.gpt2 import load_gpt2, run_gpt2; "
        f"m = load_gpt2({str(tiny_dir)!r}); t = run_gpt2(m, m.encode('The cat')); "
        "print([n for n in ('torch', 'transformers', 'streamlit') if n in sys.modules], "
        "t.attention_weights.shape[:2])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[] (2, 4)"
