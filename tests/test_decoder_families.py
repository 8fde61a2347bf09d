"""The decoder families our llama code runs (attention_core/models/llama/: config, weights,
forward), each against a tiny model of the family built by ``transformers`` inside the test.

Tiny models, random weights from a fixed torch seed, saved with ``save_pretrained``
beside a small WordLevel tokenizer and loaded by our ``load_llama``:

    llama_untied   Llama, untied output head, 4 query heads over 2 KV heads, head_dim 16 given
                   in the config (not d_model / heads = 12)
    qwen2_tied     Qwen2 (biases on q, k, v), tied head, 4 query heads sharing 1 KV head
    qwen2_untied   Qwen2, untied head, 6 query heads over 2 KV heads
    mistral_window Mistral, its sliding window longer than any text read here
    llama_rope_llama3   Llama with Llama 3.1's "llama3" RoPE scaling

Each is compared in float32 with transformers in float32 (eager attention): every position's
logits within 1e-4, attention weights within 1e-5. Two are also saved 16-bit (float16,
bfloat16), read by us as stored, and compared with transformers in float32 on the same
rounded weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attention_core.models import points
from attention_core.models.llama import (
    LlamaConfig,
    load_llama,
    parameter_count,
    run_llama,
)
from attention_core.models.loading import ModelFileError
from attention_core.validation import AttentionInputError
from tests.hf_models import run_hooked
from tests.tiny_decoders import PROMPTS, VOCAB_SIZE, word_tokenizer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CASES = {
    "llama_untied": dict(
        family="llama", tie=False, hidden_size=48, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=80, rope_theta=500000.0, rms_norm_eps=1e-5,
    ),
    "qwen2_tied": dict(
        family="qwen2", tie=True, hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
        intermediate_size=64, rope_theta=1000000.0, rms_norm_eps=1e-6,
    ),
    # Mistral's default window (4,096) is longer than any text read here: full attention.
    "mistral_window": dict(
        family="mistral", tie=False, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, rope_theta=10000.0, rms_norm_eps=1e-5, sliding_window=4096,
    ),
    "qwen2_untied": dict(
        family="qwen2", tie=False, hidden_size=48, num_attention_heads=6, num_key_value_heads=2,
        intermediate_size=96, rope_theta=10000.0, rms_norm_eps=1e-6,
    ),
    # Llama 3.1's RoPE scaling, its context shrunk to 64 so that the prompts' positions see all
    # three regimes (d_head 16, base 10⁴: wavelengths 6, 20, 63, 199 ...; kept below 16,
    # slowed 8x above 64, blended between).
    "llama_rope_llama3": dict(
        family="llama", tie=False, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64, rope_theta=10000.0, rms_norm_eps=1e-5,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                          high_freq_factor=4.0, original_max_position_embeddings=64),
    ),
}  # fmt: skip
# (case, how its file is saved): float32 for every case, and two 16-bit files.
SAVED = [(case, "float32") for case in CASES] + [
    ("llama_untied", "float16"),
    ("qwen2_untied", "bfloat16"),
]


def _hf_model(case: str):
    """The case's transformers model, float32, random weights from a fixed seed: large enough
    (N(0, 0.3²), norm gains near 1, biases N(0, 0.3²)) that attention is far from uniform and a
    wrong bias, head split or RoPE would show."""
    spec = dict(CASES[case])
    family, tie = spec.pop("family"), spec.pop("tie")
    rope = {"rope_type": "default", "rope_theta": spec.pop("rope_theta")}
    rope.update(spec.pop("rope_scaling", {}))
    config_class = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
                    "mistral": transformers.MistralConfig}[family]  # fmt: skip
    config = config_class(
        vocab_size=VOCAB_SIZE,
        num_hidden_layers=2,
        max_position_embeddings=256,
        tie_word_embeddings=tie,
        rope_parameters=rope,
        bos_token_id=None,
        eos_token_id=1,
        attn_implementation="eager",  # returns the weights, as output_attentions needs
        **spec,
    )
    torch.manual_seed(sum(map(ord, case)))
    model_class = {"llama": transformers.LlamaForCausalLM, "qwen2": transformers.Qwen2ForCausalLM,
                   "mistral": transformers.MistralForCausalLM}  # fmt: skip
    model = model_class[family](config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1 + 0.1 * torch.randn_like(param))
            else:
                param.normal_(0.0, 0.3)
    return model.eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{(case, dtype): (folder, transformers' float32 model on the saved numbers)}."""
    made = {}
    tokenizer = word_tokenizer()
    for case, dtype in SAVED:
        folder = tmp_path_factory.mktemp(f"{case}_{dtype}")
        model = _hf_model(case)
        model.to(getattr(torch, dtype)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        # The reference reads the saved numbers back in float32. (Not `model.float()`: `.to`
        # rounded its RoPE frequency buffer to 16 bits as well, which no checkpoint stores.)
        reference = type(model).from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager"
        )
        made[case, dtype] = (folder, reference.eval())
    return made


def _ours(folder: Path, dtype: str):
    # Matrices kept as the file stores them (bfloat16 is the app's own storage), so both
    # sides compute in float32 on exactly the same numbers.
    return load_llama(folder, weights_dtype=np.float32 if dtype == "float32" else dtype)


def _hf_run(hf, ids):
    with torch.no_grad():
        out = hf(torch.tensor(ids)[None], output_attentions=True, use_cache=False)
    return out.logits[0].numpy(), np.stack([a[0].numpy() for a in out.attentions])


@pytest.mark.parametrize(("case", "dtype"), SAVED, ids=[f"{c}-{d}" for c, d in SAVED])
def test_logits_and_attention_match_transformers(saved, case, dtype):
    folder, hf = saved[case, dtype]
    ours = _ours(folder, dtype)
    assert ours.config.model_type == CASES[case]["family"]
    assert (ours.weights.lm_head is None) == CASES[case]["tie"]
    assert ours.weights.storage == dtype
    assert ours.saved_as.startswith(dtype)
    # The saved tokenizer.json as transformers reads it (AutoTokenizer would pick Qwen2's own
    # BPE class for a qwen2 config, which this tiny WordLevel tokenizer is not).
    hf_tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(folder)
    worst_logit = worst_weight = 0.0
    for text in PROMPTS:
        ids = ours.encode(text)
        assert ids == hf_tokenizer(text, add_special_tokens=False)["input_ids"]
        trace = run_llama(ours, ids, all_logits=True)
        logits, attentions = _hf_run(hf, ids)
        worst_logit = max(worst_logit, float(np.abs(trace.logits - logits).max()))
        worst_weight = max(worst_weight, float(np.abs(trace.attention_weights - attentions).max()))
        np.testing.assert_allclose(trace.logits, logits, atol=1e-4, rtol=0)
        np.testing.assert_allclose(trace.attention_weights, attentions, atol=1e-5, rtol=0)
    print(f"{case} {dtype}: largest |logit diff| {worst_logit:.1e}, weight {worst_weight:.1e}")
    # The weights are far from uniform, so a wrong bias or head split would have shown.
    assert trace.attention_weights.max() > 0.9


@pytest.mark.parametrize("case", CASES)
def test_parameter_count_from_the_config_alone_matches_transformers(saved, case):
    folder, hf = saved[case, "float32"]
    config = LlamaConfig.from_dict(json.loads((folder / "config.json").read_text()))
    assert config.tie_word_embeddings == CASES[case]["tie"]
    assert config.qkv_bias == (CASES[case]["family"] == "qwen2")
    assert parameter_count(config) == sum(p.numel() for p in hf.parameters())


def test_head_dim_comes_from_the_config_when_given(saved):
    folder, _ = saved["llama_untied", "float32"]
    config = LlamaConfig.from_dict(json.loads((folder / "config.json").read_text()))
    assert (config.hidden_size, config.num_attention_heads, config.head_dim) == (48, 4, 16)


def test_llama3_rope_scaling_is_read_from_the_config(saved):
    folder, _ = saved["llama_rope_llama3", "float32"]
    config = LlamaConfig.from_dict(json.loads((folder / "config.json").read_text()))
    assert config.rope_llama3 == (8.0, 1.0, 4.0, 64.0)
    unscaled, _ = saved["llama_untied", "float32"]
    assert (
        LlamaConfig.from_dict(json.loads((unscaled / "config.json").read_text())).rope_llama3
        is None
    )


def _copy_with_config(folder: Path, tmp_path: Path, change: dict, garbage: bool = True) -> Path:
    """A copy of ``folder`` whose config.json has ``change`` applied (None removes a key), and,
    with ``garbage``, a weights file that cannot be read: a refusal that names the config
    proves that no weight was read."""
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    config.update(change)
    config = {k: v for k, v in config.items() if v is not None}
    (copy / "config.json").write_text(json.dumps(config))
    if garbage:
        (copy / "model.safetensors").write_bytes(b"not safetensors")
    return copy


def test_a_model_type_we_do_not_run_is_refused_by_name(saved, tmp_path):
    folder, _ = saved["qwen2_tied", "float32"]
    copy = _copy_with_config(folder, tmp_path, {"model_type": "phi3"})
    families = r"'llama', 'qwen2', 'mistral', 'qwen3', 'smollm3', 'olmo2', 'gemma2', 'gemma3_text'"
    with pytest.raises(ModelFileError, match=rf"'phi3' model; .* {families} models only"):
        load_llama(copy)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}}, "'yarn'"),
        ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "'linear'"),
        ({"attention_bias": True}, "sets attention_bias"),
        ({"mlp_bias": True}, "sets mlp_bias"),
        ({"hidden_act": "gelu"}, "'gelu'"),
    ],
)
def test_what_our_forward_does_not_run_is_refused_in_a_sentence(saved, tmp_path, change, message):
    folder, _ = saved["llama_untied", "float32"]
    with pytest.raises(ModelFileError, match=message) as caught:
        load_llama(_copy_with_config(folder, tmp_path, change))
    assert isinstance(caught.value, AttentionInputError)
    assert str(caught.value).endswith(".") and "\n" not in str(caught.value)


def test_qwen2s_sliding_window_is_refused(saved, tmp_path):
    folder, _ = saved["qwen2_untied", "float32"]
    change = {"use_sliding_window": True, "sliding_window": 4}
    with pytest.raises(ModelFileError, match="sliding attention window"):
        load_llama(_copy_with_config(folder, tmp_path, change))


def test_a_model_over_the_cap_is_refused_before_any_weight_is_read(saved, tmp_path):
    folder, hf = saved["llama_untied", "float32"]
    count = sum(p.numel() for p in hf.parameters())
    garbage = _copy_with_config(folder, tmp_path, {})
    with pytest.raises(ModelFileError, match=f"holds {count:,} parameters"):
        load_llama(garbage, max_parameters=count - 1)
    assert load_llama(folder, max_parameters=count).config.num_hidden_layers == 2


def test_an_untied_config_without_its_head_is_a_clear_error(saved, tmp_path):
    folder, _ = saved["qwen2_tied", "float32"]  # its file has no lm_head.weight
    copy = _copy_with_config(folder, tmp_path, {"tie_word_embeddings": False}, garbage=False)
    with pytest.raises(ModelFileError, match=r"lm_head\.weight is missing"):
        load_llama(copy)


@pytest.mark.parametrize("case", ["qwen2_tied", "llama_untied"])
def test_named_points_read_and_edit_what_transformers_modules_compute(saved, case):
    """Each point of our pass is what transformers' module computes there (the decoder layer's
    output, ``self_attn.o_proj``'s input and output, ``mlp``'s output), and an edit of a head
    changes the logits as the same change made by a hook does."""
    folder, hf = saved[case, "float32"]
    ours = _ours(folder, "float32")
    ids = ours.encode(PROMPTS[2])
    n, d = len(ids), ours.config.head_dim
    taken: dict[str, np.ndarray] = {}
    layers = hf.model.layers
    handles = []
    for i, block in enumerate(layers):
        handles += [
            block.register_forward_hook(
                lambda m, a, out, i=i: taken.update({points.resid(i + 1): out[0].numpy()})
            ),
            block.self_attn.o_proj.register_forward_pre_hook(
                lambda m, a, i=i: taken.update({points.heads(i): a[0][0].numpy()})
            ),
            block.self_attn.o_proj.register_forward_hook(
                lambda m, a, out, i=i: taken.update({points.attn_out(i): out[0].numpy()})
            ),
            block.mlp.register_forward_hook(
                lambda m, a, out, i=i: taken.update({points.mlp_out(i): out[0].numpy()})
            ),
        ]
    run_hooked(hf, ids, handles)
    trace = run_llama(ours, ids)
    for name, expected in taken.items():
        got = trace.point(name)
        if name.endswith(".heads"):
            got = got.transpose(1, 0, 2).reshape(n, -1)  # (n, head·d_head), as o_proj reads
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-5, err_msg=name)

    head = 1

    def silence(z):
        z = z.copy()
        z[head] = 0.0
        return z

    def silence_hf(module, args):
        x = args[0].clone()
        x[..., head * d : (head + 1) * d] = 0.0
        return (x,)

    edited = run_llama(ours, ids, edits={points.heads(1): silence}).next_token_logits
    handle = layers[1].self_attn.o_proj.register_forward_pre_hook(silence_hf)
    expected = run_hooked(hf, ids, [handle]).logits[0, -1].numpy()
    np.testing.assert_allclose(edited, expected, atol=1e-4, rtol=0)
    assert np.abs(edited - trace.next_token_logits).max() > 1e-2  # the edit mattered


@pytest.mark.parametrize("case", ["qwen2_untied"])
def test_a_cached_step_equals_the_full_pass(saved, case):
    folder, _ = saved[case, "float32"]
    ours = _ours(folder, "float32")
    ids = ours.encode(PROMPTS[1])
    full = run_llama(ours, ids).next_token_logits
    prefix = run_llama(ours, ids[:-1])
    step = run_llama(ours, ids[-1:], prefix.cache).next_token_logits
    np.testing.assert_allclose(step, full, atol=1e-5, rtol=0)


def test_a_mistral_window_shorter_than_a_text_read_here_is_refused(saved, tmp_path):
    folder, _ = saved["mistral_window", "float32"]
    short = _copy_with_config(folder, tmp_path, {"sliding_window": 16})
    with pytest.raises(ModelFileError, match="slides a window of 16 tokens"):
        load_llama(short)


def test_a_prompt_gets_the_bos_its_tokenizer_adds_as_transformers_tokenizer_does():
    from tokenizers import processors

    from attention_core.models.llama.prompt import tokenize_prompt

    wrapped = word_tokenizer()
    tok = wrapped.backend_tokenizer
    tok.post_processor = processors.TemplateProcessing(
        single="<eos> $A", special_tokens=[("<eos>", 1)]
    )
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok)
    text = "the cat sat on the mat"
    prompt = tokenize_prompt(tok, text)
    assert prompt.input_ids.tolist() == hf(text)["input_ids"]
    assert prompt.input_ids[0] == 1 and prompt.num_input_tokens == 6
    # Cut to 4 tokens: the BOS counts against the limit and stays first.
    cut = tokenize_prompt(tok, text, max_tokens=4)
    assert cut.input_ids.tolist() == hf("the cat sat")["input_ids"]
    assert "first 3 of 6 tokens" in cut.notice
