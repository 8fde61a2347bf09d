"""Tests for attention_core/models/bert/ (config, weights, tokenizer, forward, load).

References, all independent of the code under test:
- Hugging Face ``transformers.BertModel`` (eager attention) on the same files: attention weights,
  hidden states, and (through forward hooks) the attention sub-layer and GELU outputs;
- one-line NumPy formulas for q/k/v and the residual sums;
- tokenizations worked out by hand for the tiny WordPiece vocabulary, and Hugging Face's pure
  Python ``BertTokenizerLegacy`` (vocab.txt) for the real model.

The fast tests build a tiny random BERT checkpoint (2 layers, 4 heads, d_model 16) in a
fixture; the ``slow`` ones load the real all-MiniLM-L6-v2 from the offline package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import BertModel as HFBertModel
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

from attention_core import AttentionInputError
from attention_core.models import (
    BertConfig,
    BertTrace,
    ModelFileError,
    TokenizedText,
    load_bert,
    run_bert,
    run_bert_ids,
)
from attention_core.models.bert import BertWeights
from attention_core.models.layers import gelu
from attention_core.models.loading import read_weights

REPO = Path(__file__).resolve().parents[1]

TINY_CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "vocab_size": 32,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 24,
    "max_position_embeddings": 12,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
}

TINY_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "cat", "sat", "on", "mat", "dog", "it", "was", "tired", "a",
    "play", "##ing", "##s", "un", "##able", ".", ",",
]  # fmt: skip


def _tiny_tokenizer() -> Tokenizer:
    """A BERT-style WordPiece tokenizer over TINY_VOCAB, padding and truncating like the real
    all-MiniLM-L6-v2 tokenizer.json does (fixed padding, short truncation), so the loader has
    to undo both."""
    vocab = {token: i for i, token in enumerate(TINY_VOCAB)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece()
    tok.enable_padding(length=8, pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(max_length=8)
    return tok


def _tiny_state(config: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 weights named like Hugging Face's BertModel state dict.

    Weights are N(0, 0.3²) (bigger than BERT's init) so attention patterns are far from uniform
    and a wrong head split or scale would show; LayerNorm γ is near 1 and β near 0.
    """
    rng = np.random.default_rng(seed)
    d, d_ff = config["hidden_size"], config["intermediate_size"]

    def w(*shape: int) -> np.ndarray:
        return (0.3 * rng.standard_normal(shape)).astype(np.float32)

    def ln(prefix: str, state: dict) -> None:
        state[f"{prefix}.weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        state[f"{prefix}.bias"] = (0.1 * rng.standard_normal(d)).astype(np.float32)

    state = {
        "embeddings.word_embeddings.weight": w(config["vocab_size"], d),
        "embeddings.position_embeddings.weight": w(config["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": w(config["type_vocab_size"], d),
        "embeddings.position_ids": np.arange(config["max_position_embeddings"])[None],
        "pooler.dense.weight": w(d, d),
        "pooler.dense.bias": w(d),
    }
    ln("embeddings.LayerNorm", state)
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name in ("query", "key", "value"):
            state[f"{p}.attention.self.{name}.weight"] = w(d, d)
            state[f"{p}.attention.self.{name}.bias"] = w(d)
        state[f"{p}.attention.output.dense.weight"] = w(d, d)
        state[f"{p}.attention.output.dense.bias"] = w(d)
        ln(f"{p}.attention.output.LayerNorm", state)
        state[f"{p}.intermediate.dense.weight"] = w(d_ff, d)
        state[f"{p}.intermediate.dense.bias"] = w(d_ff)
        state[f"{p}.output.dense.weight"] = w(d, d_ff)
        state[f"{p}.output.dense.bias"] = w(d)
        ln(f"{p}.output.LayerNorm", state)
    return state


def write_tiny_checkpoint(directory: Path, config: dict | None = None, seed: int = 0) -> Path:
    """Write config.json, model.safetensors and tokenizer.json of a tiny random BERT."""
    config = dict(TINY_CONFIG if config is None else config)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    save_file(_tiny_state(config, seed), str(directory / "model.safetensors"))
    _tiny_tokenizer().save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_bert(tiny_dir)


@pytest.fixture(scope="module")
def tiny_hf(tiny_dir):
    return HFBertModel.from_pretrained(str(tiny_dir), attn_implementation="eager").eval()


def hf_run(hf_model, input_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Run transformers' BertModel and collect its attentions, hidden states and, through
    forward hooks on its own modules, each layer's attention sub-layer output (after the
    residual LayerNorm) and GELU activations."""
    captured: dict[str, list[np.ndarray]] = {"attention_norm": [], "ffn_activation": []}
    hooks = []
    for layer in hf_model.encoder.layer:
        hooks.append(
            layer.attention.output.register_forward_hook(
                lambda _m, _i, out: captured["attention_norm"].append(out[0].numpy().copy())
            )
        )
        hooks.append(
            layer.intermediate.register_forward_hook(
                lambda _m, _i, out: captured["ffn_activation"].append(out[0].numpy().copy())
            )
        )
    try:
        with torch.inference_mode():
            out = hf_model(
                torch.tensor(np.asarray(input_ids))[None],
                output_attentions=True,
                output_hidden_states=True,
            )
    finally:
        for hook in hooks:
            hook.remove()
    return {
        "attentions": np.stack([a[0].numpy() for a in out.attentions]),
        "hidden_states": np.stack([h[0].numpy() for h in out.hidden_states]),
        "attention_norm": np.stack(captured["attention_norm"]),
        "ffn_activation": np.stack(captured["ffn_activation"]),
    }


# ------------------------------------------------------------------------ tiny checkpoint


def test_tiny_config_is_read_from_config_json(tiny):
    assert tiny.config == BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=24,
        max_position_embeddings=12,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        hidden_act="gelu",
        pad_token_id=0,
    )
    assert tiny.config.head_dim == 4


def test_tiny_tokens_are_exact_word_pieces_without_padding(tiny):
    # The fixture tokenizer pads to 8: loading turns padding off, so 6 real tokens stay 6.
    # "Unable" -> lowercased "unable" -> "un" + "##able"; "cats" -> "cat" + "##s".
    tokenized = tiny.tokenize("Unable cats.")
    assert tokenized.tokens == ("[CLS]", "un", "##able", "cat", "##s", ".", "[SEP]")
    assert tokenized.input_ids.tolist() == [2, 18, 19, 6, 17, 20, 3]
    assert not tokenized.truncated
    assert tokenized.num_input_tokens == 7


def test_tiny_truncates_at_max_positions_and_says_so(tiny):
    # The fixture tokenizer truncates at 8; loading moves that to max_position_embeddings = 12.
    # 15 words + [CLS] + [SEP] = 17 tokens -> first 10 words + [CLS] + [SEP] = 12.
    words = "the cat sat on the mat the dog sat on a mat it was tired".split()
    tokenized = tiny.tokenize(" ".join(words))
    assert len(tokenized.tokens) == 12
    assert tokenized.tokens == ("[CLS]", *words[:10], "[SEP]")
    assert tokenized.truncated
    assert tokenized.num_input_tokens == 17
    trace = run_bert(tiny, " ".join(words))
    assert trace.truncated and trace.num_input_tokens == 17
    assert trace.attention_weights.shape == (2, 4, 12, 12)


def test_tiny_exactly_max_positions_is_not_truncated(tiny):
    words = ["cat"] * 10  # 10 + 2 special tokens = 12 = max_position_embeddings
    tokenized = tiny.tokenize(" ".join(words))
    assert len(tokenized.tokens) == 12
    assert not tokenized.truncated
    assert tokenized.num_input_tokens == 12


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\x00\x01"])
def test_empty_text_is_a_clear_error(tiny, text):
    with pytest.raises(AttentionInputError, match="empty"):
        run_bert(tiny, text)


def test_unknown_words_become_unk_and_still_run(tiny):
    trace = run_bert(tiny, "zebra 😀 cat")
    assert trace.tokens == ("[CLS]", "[UNK]", "[UNK]", "cat", "[SEP]")


def test_non_string_text_is_a_clear_error(tiny):
    with pytest.raises(AttentionInputError, match="string"):
        tiny.tokenize(["the", "cat"])


@pytest.mark.parametrize(
    "text",
    [
        "The cat sat on the mat.",
        "it was tired",
        "cat",
        "the dog, the cat, playing on a mat, was unable.",
    ],
)
def test_tiny_matches_transformers(tiny, tiny_hf, text):
    trace = run_bert(tiny, text)
    ref = hf_run(tiny_hf, trace.input_ids)
    assert trace.attention_weights.shape == ref["attentions"].shape
    np.testing.assert_allclose(trace.attention_weights, ref["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(trace.hidden_states, ref["hidden_states"], atol=1e-5, rtol=0)
    for i, layer in enumerate(trace.layers):
        np.testing.assert_allclose(layer.attention_norm, ref["attention_norm"][i], atol=1e-5)
        np.testing.assert_allclose(layer.ffn_activation, ref["ffn_activation"][i], atol=1e-5)


def test_tiny_attention_is_far_from_uniform(tiny):
    # Guards the parity test: with near-uniform weights a wrong head split could still match.
    trace = run_bert(tiny, "The cat sat on the mat.")
    n = len(trace.tokens)
    assert trace.attention_weights.max() > 3 / n


def test_trace_steps_follow_the_formulas(tiny):
    trace = run_bert(tiny, "the dog was tired.")
    n, d, h = len(trace.tokens), 16, 4
    w = tiny.weights
    # Embeddings: the word, position and type-0 rows, summed and layer-normed by hand.
    e = w.embeddings
    summed = e.word[trace.input_ids] + e.position[:n] + e.token_type[0]
    mean = summed.mean(-1, keepdims=True)
    std = np.sqrt(((summed - mean) ** 2).mean(-1, keepdims=True) + 1e-12)
    expected = (summed - mean) / std * e.layer_norm.weight + e.layer_norm.bias
    np.testing.assert_allclose(trace.embeddings, expected, atol=1e-5)

    previous = trace.embeddings
    for i, layer in enumerate(trace.layers):
        params = w.layers[i].attention
        assert layer.input is previous
        np.testing.assert_allclose(
            layer.attention.q, previous @ params.w_q.T + params.b_q, atol=1e-5
        )
        np.testing.assert_allclose(
            layer.attention.k, previous @ params.w_k.T + params.b_k, atol=1e-5
        )
        np.testing.assert_allclose(
            layer.attention.v, previous @ params.w_v.T + params.b_v, atol=1e-5
        )
        # Head 1 uses features 4..7 of q and k.
        q1, k1 = layer.attention.q[:, 4:8], layer.attention.k[:, 4:8]
        scores = q1 @ k1.T / 2.0  # √d_head = √4 = 2
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        np.testing.assert_allclose(layer.attention.attention.weights[1], weights, atol=1e-6)
        np.testing.assert_allclose(
            layer.attention_residual, previous + layer.attention.output, atol=1e-6
        )
        np.testing.assert_allclose(
            layer.ffn_activation, gelu(layer.ffn_preactivation), atol=0, rtol=0
        )
        assert layer.attention.attention.weights.shape == (h, n, n)
        assert layer.attention.q_heads.shape == (h, n, d // h)
        np.testing.assert_array_equal(trace.attention_weights[i], layer.attention.attention.weights)
        assert layer.attention_weights is layer.attention.attention.weights
        previous = layer.hidden
    np.testing.assert_array_equal(trace.last_hidden_state, trace.layers[-1].hidden)
    assert trace.hidden_states.shape == (3, n, d)
    np.testing.assert_allclose(trace.attention_weights.sum(-1), 1.0, atol=1e-6)


def test_trace_is_frozen_float32_and_pickles(tiny):
    import dataclasses
    import pickle

    trace = run_bert(tiny, "the cat")
    assert isinstance(trace, BertTrace)
    assert trace.attention_weights.dtype == np.float32
    assert trace.embeddings.dtype == np.float32
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.tokens = ()
    fresh = pickle.loads(pickle.dumps(trace))  # pickled before the stacks are built
    np.testing.assert_array_equal(fresh.attention_weights, trace.attention_weights)
    np.testing.assert_array_equal(fresh.hidden_states, trace.hidden_states)
    again = pickle.loads(pickle.dumps(trace))  # and after
    np.testing.assert_array_equal(again.attention_weights, trace.attention_weights)
    assert again.tokens == trace.tokens
    # The stacks are built once and cannot be edited out of step with the layers.
    assert trace.attention_weights is trace.attention_weights
    with pytest.raises(ValueError, match="read-only"):
        trace.attention_weights[0, 0, 0, 0] = 0.5
    with pytest.raises(ValueError, match="read-only"):
        trace.hidden_states[0, 0, 0] = 0.5


def test_model_weights_are_read_only(tiny):
    with pytest.raises(ValueError, match="read-only"):
        tiny.weights.embeddings.word[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        tiny.weights.layers[0].attention.w_q[0, 0] = 1.0


def test_a_models_trace_of_a_text_is_what_transformers_computes_on_its_tokens(tiny, tiny_hf):
    trace = tiny.trace("the mat")
    assert trace.tokens == ("[CLS]", "the", "mat", "[SEP]")
    ref = hf_run(tiny_hf, trace.input_ids)
    np.testing.assert_allclose(trace.attention_weights, ref["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(trace.hidden_states, ref["hidden_states"], atol=1e-5, rtol=0)


def test_run_bert_ids_matches_run_bert_and_checks_ids(tiny):
    trace = run_bert(tiny, "a cat")
    again = run_bert_ids(tiny, trace.input_ids.tolist())
    assert again.tokens == trace.tokens
    np.testing.assert_array_equal(again.hidden_states, trace.hidden_states)
    with pytest.raises(AttentionInputError, match=r"0\.\.31"):
        run_bert_ids(tiny, [2, 40, 3])
    with pytest.raises(AttentionInputError, match="1-D"):
        run_bert_ids(tiny, [])
    with pytest.raises(AttentionInputError, match="positions"):
        run_bert_ids(tiny, [5] * 13)
    with pytest.raises(AttentionInputError, match="head_mask must be shaped"):
        run_bert_ids(tiny, trace.input_ids, head_mask=np.ones(tiny.config.num_attention_heads + 1))
    # One row of multipliers serves every layer, as transformers' 1-D head_mask did.
    heads = np.ones(tiny.config.num_attention_heads)
    heads[0] = 0.0
    one_row = run_bert_ids(tiny, trace.input_ids, head_mask=heads)
    every = np.tile(heads, (tiny.config.num_hidden_layers, 1))
    every_row = run_bert_ids(tiny, trace.input_ids, head_mask=every)
    np.testing.assert_array_equal(one_row.last_hidden_state, every_row.last_hidden_state)
    assert not np.allclose(one_row.last_hidden_state, trace.last_hidden_state)


def test_bert_prefixed_checkpoint_loads_the_same(tmp_path, tiny):
    # Checkpoints saved from a task model (BertForSequenceClassification...) prefix "bert.".
    state = read_weights(write_tiny_checkpoint(tmp_path / "plain") / "model.safetensors")
    prefixed = write_tiny_checkpoint(tmp_path / "prefixed")
    save_file({f"bert.{k}": v for k, v in state.items()}, str(prefixed / "model.safetensors"))
    a = run_bert(load_bert(tmp_path / "plain"), "the cat sat")
    b = run_bert(load_bert(prefixed), "the cat sat")
    np.testing.assert_array_equal(a.hidden_states, b.hidden_states)


def test_a_bfloat16_checkpoint_runs_on_its_own_values(tmp_path, tiny_dir):
    # transformers saves bfloat16 checkpoints that safetensors.numpy cannot read; loaded back in
    # float32 (an exact widening) it is the reference for the same rounded weights.
    saved = HFBertModel.from_pretrained(str(tiny_dir)).to(torch.bfloat16)
    saved.save_pretrained(tmp_path)
    shutil.copy(tiny_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    ours = load_bert(tmp_path)
    reference = HFBertModel.from_pretrained(
        str(tmp_path), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    trace = run_bert(ours, "the cat sat on the mat")
    ref = hf_run(reference, trace.input_ids)
    np.testing.assert_allclose(trace.attention_weights, ref["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(trace.hidden_states, ref["hidden_states"], atol=1e-5, rtol=0)
    rounded = saved.embeddings.word_embeddings.weight.float().detach().numpy()
    np.testing.assert_array_equal(ours.weights.embeddings.word, rounded)


def test_weights_that_do_not_match_the_config_are_named(tmp_path):
    directory = write_tiny_checkpoint(tmp_path / "m")
    state = read_weights(directory / "model.safetensors")
    state["encoder.layer.1.intermediate.dense.weight"] = np.zeros((5, 16), np.float32)
    del state["encoder.layer.0.attention.self.key.bias"]
    save_file(state, str(directory / "model.safetensors"))
    with pytest.raises(ModelFileError) as err:
        load_bert(directory)
    message = str(err.value)
    assert "encoder.layer.0.attention.self.key.bias is missing" in message
    assert "encoder.layer.1.intermediate.dense.weight has shape (5, 16), expected (24, 16)" in (
        message
    )


def test_nan_weights_are_rejected(tmp_path):
    config = BertConfig.from_dict(TINY_CONFIG)
    state = _tiny_state(TINY_CONFIG)
    state["encoder.layer.0.output.dense.bias"][3] = np.nan
    with pytest.raises(ModelFileError, match="NaN"):
        BertWeights.from_state_dict(state, config)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_act": "relu"}, "activation 'relu'"),
        ({"hidden_act": "gelu_new"}, "exact GELU"),
        ({"position_embedding_type": "relative_key"}, "absolute"),
        ({"num_attention_heads": 5}, "not divisible"),
        ({"hidden_size": "16"}, "hidden_size"),
        ({"layer_norm_eps": -1}, "layer_norm_eps"),
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"model_type": "gpt2"}, "BERT encoders only"),
    ],
)
def test_bad_config_values_are_clear_errors(change, message):
    with pytest.raises(ModelFileError, match=message):
        BertConfig.from_dict({**TINY_CONFIG, **change})


def test_config_missing_keys_are_listed():
    config = {k: v for k, v in TINY_CONFIG.items() if k not in ("vocab_size", "layer_norm_eps")}
    with pytest.raises(ModelFileError, match="no vocab_size, layer_norm_eps"):
        BertConfig.from_dict(config)


def test_tokenizer_larger_than_vocabulary_is_rejected(tmp_path):
    config = {**TINY_CONFIG, "vocab_size": 10}  # the tokenizer knows 22 tokens
    directory = write_tiny_checkpoint(tmp_path / "m", config=config)
    with pytest.raises(ModelFileError, match="different models"):
        load_bert(directory)


def test_core_modules_import_neither_torch_nor_transformers(tiny_dir):
    # Loading and running a model needs NumPy, safetensors and tokenizers only.
    code = (
        "import sys; from attention_core.models import load_bert, run_bert; "
        f"t = run_bert(load_bert({str(tiny_dir)!r}), 'the cat'); "
        "bad = [m for m in ('torch', 'transformers', 'streamlit') if m in sys.modules]; "
        "print(bad, t.attention_weights.shape)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[] (2, 4, 4, 4)"


# ----------------------------------------------------------------------- the real model


REAL_SENTENCES = [
    "The animal didn't cross the street because it was too tired.",
    "The cat sat on the mat, and the cat saw the other cat on the mat.",
    "Naïve café owners in Zürich serve crème brûlée 😀 — ½ price! 日本語のテキスト",
    # Over 128 tokens: the shipped tokenizer.json would have cut this at 128.
    " ".join(
        f"Sentence number {i} talks about attention heads, queries and keys." for i in range(14)
    ),
]


@pytest.fixture(scope="module")
def real():
    return load_bert()


@pytest.fixture(scope="module")
def real_hf(real):
    return HFBertModel.from_pretrained(str(real.location.path), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def reference_tokenizer(real):
    # Hugging Face's pure-Python WordPiece tokenizer (the original BERT code), built from
    # vocab.txt: an implementation independent of the `tokenizers` library and tokenizer.json.
    return BertTokenizerLegacy(str(real.location.path / "vocab.txt"), do_lower_case=True)


@pytest.mark.slow
def test_real_model_config(real):
    c = real.config
    assert (c.num_hidden_layers, c.num_attention_heads, c.hidden_size) == (6, 12, 384)
    assert (c.intermediate_size, c.max_position_embeddings, c.vocab_size) == (1536, 512, 30522)
    assert c.layer_norm_eps == 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("text", REAL_SENTENCES)
def test_real_model_matches_transformers(real, real_hf, reference_tokenizer, text):
    trace = run_bert(real, text)
    expected_ids = reference_tokenizer(text, truncation=True, max_length=512)["input_ids"]
    assert trace.input_ids.tolist() == expected_ids
    assert list(trace.tokens) == reference_tokenizer.convert_ids_to_tokens(expected_ids)
    ref = hf_run(real_hf, trace.input_ids)
    n = len(expected_ids)
    assert trace.attention_weights.shape == (6, 12, n, n)
    np.testing.assert_allclose(trace.attention_weights, ref["attentions"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(trace.hidden_states, ref["hidden_states"], atol=1e-4, rtol=0)


@pytest.mark.slow
def test_real_model_long_text_is_over_128_tokens(real):
    assert len(real.tokenize(REAL_SENTENCES[-1]).tokens) > 128


@pytest.mark.slow
def test_real_model_truncates_at_512_and_matches_transformers(real, real_hf, reference_tokenizer):
    text = "Attention lets every token look at every other token. " * 60
    full_ids = reference_tokenizer(text)["input_ids"]  # no truncation: the true length
    assert len(full_ids) > 512
    trace = run_bert(real, text)
    assert trace.truncated
    assert trace.num_input_tokens == len(full_ids)
    assert len(trace.tokens) == 512
    assert trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"
    assert trace.input_ids.tolist() == [*full_ids[:511], full_ids[-1]]
    ref = hf_run(real_hf, trace.input_ids)
    np.testing.assert_allclose(trace.attention_weights, ref["attentions"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(trace.hidden_states, ref["hidden_states"], atol=1e-4, rtol=0)


@pytest.mark.slow
def test_real_model_short_text_is_not_truncated_or_padded(real):
    tokenized = real.tokenize("The animal didn't cross the street because it was too tired.")
    # By hand: the animal didn ' t cross the street because it was too tired . = 14 word
    # pieces (BERT splits "didn't" at the apostrophe), plus [CLS] and [SEP] = 16.
    assert isinstance(tokenized, TokenizedText)
    assert not tokenized.truncated
    assert "[PAD]" not in tokenized.tokens
    assert tokenized.tokens[:4] == ("[CLS]", "the", "animal", "didn")
    assert tokenized.num_input_tokens == len(tokenized.tokens) == 16


DEBATE = "The antidisestablishmentarianism debate: unbelievably long words tokenize into pieces."


@pytest.mark.slow
@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        # Pieces by the reference tokenizer: the | anti ##dis ##est ##ab ##lish ##ment ##arian
        # ##ism | debate | : | un ##bel ##ie ##va ##bly | ...; a word is kept whole or not at all.
        (3, "The"),
        (8, "The"),
        (16, "The antidisestablishmentarianism debate:"),
        (100, DEBATE),
    ],
)
def test_leading_words_cut_between_words(real, reference_tokenizer, max_tokens, expected):
    full = reference_tokenizer.tokenize(DEBATE)  # word pieces, without [CLS] and [SEP]
    assert full[:11] == ["the", "anti", "##dis", "##est", "##ab", "##lish", "##ment", "##arian",
                         "##ism", "debate", ":"]  # fmt: skip
    cut = real.leading_words(DEBATE, max_tokens)
    assert cut == expected
    pieces = reference_tokenizer.tokenize(cut)
    assert len(pieces) + 2 <= max_tokens and pieces == full[: len(pieces)]


@pytest.mark.slow
def test_leading_words_cut_a_first_word_longer_than_the_budget_by_pieces(real):
    # "anti ##dis ##est ..." keeps 2 pieces of 4 tokens: the start "Antidis" reads as anti ##dis.
    cut = real.leading_words("Antidisestablishmentarianism rules", 4)
    assert cut == "Antidis"
    assert real.tokenize(cut).tokens == ("[CLS]", "anti", "##dis", "[SEP]")
    with pytest.raises(AttentionInputError, match="no room for a word"):
        real.leading_words("the cat", 2)
    with pytest.raises(AttentionInputError, match="empty"):
        real.leading_words("   ", 8)
