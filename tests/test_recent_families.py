"""Today's small-LLM families run by our llama code (Qwen3, SmolLM3, OLMo 2, Gemma 2, Gemma 3),
each against a tiny model of the family built by ``transformers`` inside the test
(``tests.tiny_decoders``): a window shorter than the prompt, scores and logits past their soft
caps, NoPE layers mixed with RoPE ones, QK-norm, sandwich and post norms.

Compared in float32 with transformers' eager float32: every position's logits within 1e-4,
attention weights within 1e-5, the stream after every layer within 1e-4; a cached step equals
the full pass; the parameter count from the config alone equals transformers'; what the
code does not run is refused by name before any weight is read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attention_core.models import points
from attention_core.models.families import family_of, open_checkpoint
from attention_core.models.llama import LlamaConfig, load_llama, parameter_count, run_llama
from attention_core.models.loading import ModelFileError
from tests.hf_models import run_hooked
from tests.tiny_decoders import PROMPTS, RECENT, save_decoder

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SAVED = [(case, "float32") for case in RECENT] + [("gemma3_text", "bfloat16")]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{(case, dtype): (folder, transformers' float32 model on the saved numbers)}."""
    made = {}
    for case, dtype in SAVED:
        folder = tmp_path_factory.mktemp(f"{case}_{dtype}")
        made[case, dtype] = (folder, save_decoder(case, folder, dtype))
    return made


def _ours(folder: Path, dtype: str = "float32"):
    return load_llama(folder, weights_dtype=np.float32 if dtype == "float32" else dtype)


def _hf_run(hf, ids):
    with torch.no_grad():
        out = hf(
            torch.tensor(ids)[None], output_attentions=True, output_hidden_states=True,
            use_cache=False,
        )  # fmt: skip
    return (
        out.logits[0].numpy(),
        np.stack([a[0].numpy() for a in out.attentions]),
        [h[0].numpy() for h in out.hidden_states],
    )


@pytest.mark.parametrize(("case", "dtype"), SAVED, ids=[f"{c}-{d}" for c, d in SAVED])
def test_logits_weights_and_stream_match_transformers(saved, case, dtype):
    folder, hf = saved[case, dtype]
    ours = _ours(folder, dtype)
    assert ours.config.model_type == case
    for text in PROMPTS:
        ids = ours.encode(text)
        trace = run_llama(ours, ids, all_logits=True)
        logits, attentions, hidden = _hf_run(hf, ids)
        np.testing.assert_allclose(trace.logits, logits, atol=1e-4, rtol=0)
        np.testing.assert_allclose(trace.attention_weights, attentions, atol=1e-5, rtol=0)
        # transformers' hidden states: the embeddings (scaled, for Gemma), then each layer's
        # output but the last, whose place holds the stream after the final norm.
        for boundary, expected in enumerate(hidden[:-1]):
            np.testing.assert_allclose(
                trace.point(points.resid(boundary)), expected, atol=1e-4, rtol=1e-5,
                err_msg=f"resid.{boundary}",
            )  # fmt: skip
        np.testing.assert_allclose(trace.final_hidden, hidden[-1], atol=1e-4, rtol=1e-5)
    # Far from uniform: a wrong norm, window or rotation would have shown.
    assert trace.attention_weights.max() > 0.9


def _long_ids(ours):
    return ours.encode(PROMPTS[2])


def test_local_layers_hide_every_key_past_their_window(saved):
    """Gemma 3's local layers (0 and 1, window 3) give zero weight to keys 3 or more back; its
    global layer 2 reads them, as transformers' weights do."""
    folder, _ = saved["gemma3_text", "float32"]
    ours = _ours(folder)
    weights = run_llama(ours, _long_ids(ours)).attention_weights  # (layer, head, n, n)
    n = weights.shape[-1]
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]
    far = offset >= 3
    assert ours.config.windows == (3, 3, None)
    assert np.all(weights[:2][..., far] == 0.0)
    assert weights[2][..., far].sum() > 1.0


def test_soft_caps_bend_the_scores_and_the_logits(saved):
    """Gemma 2 caps scores at 2 and logits at 3: the uncapped scores reach far past 2, the
    capped ones stay inside, and every logit lies within (-3, 3), as transformers' do."""
    folder, _ = saved["gemma2", "float32"]
    ours = _ours(folder)
    ids = _long_ids(ours)
    trace = run_llama(ours, ids, all_logits=True)
    attention = trace.layers[0].attention
    raw = attention.scores * attention.scale
    assert attention.softcap == 2.0 and np.abs(raw).max() > 4.0
    np.testing.assert_allclose(attention.scaled, 2.0 * np.tanh(raw / 2.0), atol=1e-6)
    assert np.abs(trace.logits).max() < 3.0
    assert ours.config.scale == pytest.approx(24**-0.5)


def test_nope_layers_rotate_nothing_and_rope_layers_do(saved):
    folder, _ = saved["smollm3", "float32"]
    ours = _ours(folder)
    trace = run_llama(ours, _long_ids(ours))
    assert ours.config.rope_bases == (5e4, None, 5e4, None)
    for layer, steps in enumerate(trace.layers):
        same = np.array_equal(steps.q_rot, steps.q) and np.array_equal(steps.k_rot, steps.k)
        assert same == (layer % 2 == 1), layer


@pytest.mark.parametrize("case", ["qwen3", "gemma3_text", "olmo2"])
def test_qk_norm_steps_are_what_transformers_q_and_k_norms_output(saved, case):
    folder, hf = saved[case, "float32"]
    ours = _ours(folder)
    ids = _long_ids(ours)
    taken = {}
    handles = [
        hf.model.layers[0].self_attn.q_norm.register_forward_hook(
            lambda m, a, out: taken.update(q=out[0].numpy())
        ),
        hf.model.layers[0].self_attn.k_norm.register_forward_hook(
            lambda m, a, out: taken.update(k=out[0].numpy())
        ),
    ]
    run_hooked(hf, ids, handles)
    steps = run_llama(ours, ids).layers[0]
    n = len(ids)
    # Qwen3's norms see (n, head, d_head), Gemma 3's (head, n, d_head) and OLMo 2's the
    # projection (n, head·d_head).
    for ours_x, theirs in ((steps.q_normed, taken["q"]), (steps.k_normed, taken["k"])):
        if case == "gemma3_text":
            theirs = theirs.transpose(1, 0, 2)
        expected = theirs.reshape(n, -1)
        got = ours_x.transpose(1, 0, 2).reshape(n, -1)
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert not np.allclose(steps.q_normed, steps.q, atol=1e-2)


@pytest.mark.parametrize("case", ["gemma2", "olmo2"])
def test_attn_and_mlp_outputs_are_what_the_post_norms_add_and_an_edit_matches_a_hook(saved, case):
    folder, hf = saved[case, "float32"]
    ours = _ours(folder)
    ids = _long_ids(ours)
    taken = {}
    handles = []
    for i, block in enumerate(hf.model.layers):
        handles += [
            block.post_attention_layernorm.register_forward_hook(
                lambda m, a, out, i=i: taken.update({points.attn_out(i): out[0].numpy()})
            ),
            block.post_feedforward_layernorm.register_forward_hook(
                lambda m, a, out, i=i: taken.update({points.mlp_out(i): out[0].numpy()})
            ),
        ]
    run_hooked(hf, ids, handles)
    trace = run_llama(ours, ids)
    for name, expected in taken.items():
        np.testing.assert_allclose(trace.point(name), expected, atol=1e-4, rtol=1e-5, err_msg=name)

    d = ours.config.head_dim

    def silence(z):
        z = z.copy()
        z[1] = 0.0
        return z

    def silence_hf(module, args):
        x = args[0].clone()
        x[..., d : 2 * d] = 0.0
        return (x,)

    edited = run_llama(ours, ids, edits={points.heads(0): silence}).next_token_logits
    handle = hf.model.layers[0].self_attn.o_proj.register_forward_pre_hook(silence_hf)
    expected = run_hooked(hf, ids, [handle]).logits[0, -1].numpy()
    np.testing.assert_allclose(edited, expected, atol=1e-4, rtol=0)
    assert np.abs(edited - trace.next_token_logits).max() > 1e-2


@pytest.mark.parametrize("case", list(RECENT))
def test_cached_steps_equal_the_full_pass_past_the_window(saved, case):
    """Token by token against the cache, every step's logits equal the full pass's at that
    position: a local layer's window reaches back from each step's own position."""
    folder, _ = saved[case, "float32"]
    ours = _ours(folder)
    ids = _long_ids(ours)
    full = run_llama(ours, ids, all_logits=True).logits
    trace = run_llama(ours, ids[:4])
    np.testing.assert_allclose(trace.logits[-1], full[3], atol=1e-5, rtol=0)
    for position in range(4, 12):
        trace = run_llama(ours, ids[position : position + 1], trace.cache)
        np.testing.assert_allclose(trace.logits[-1], full[position], atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", list(RECENT))
def test_parameter_count_from_the_config_alone_matches_transformers(saved, case):
    folder, hf = saved[case, "float32"]
    config = LlamaConfig.from_dict(json.loads((folder / "config.json").read_text()))
    assert parameter_count(config) == sum(p.numel() for p in hf.parameters())


# What each family's config says about its attention, read by LlamaConfig as the pages show it.
EXPECTED = {
    "qwen3": dict(qk_norm="head", norms="pre", windows=(None, 3), rope_bases=(),
                  query_scale=None, attn_softcap=None, final_softcap=None, embed_scale=None),
    "smollm3": dict(qk_norm=None, norms="pre", windows=(), rope_bases=(5e4, None, 5e4, None),
                    query_scale=None, attn_softcap=None, final_softcap=None, embed_scale=None),
    "olmo2": dict(qk_norm="projection", norms="post", windows=(), rope_bases=(),
                  query_scale=None, attn_softcap=None, final_softcap=None, embed_scale=None),
    "gemma2": dict(qk_norm=None, norms="sandwich", windows=(3, None, 3), rope_bases=(),
                   query_scale=24**-0.5, attn_softcap=2.0, final_softcap=3.0,
                   embed_scale=32**0.5),
    "gemma3_text": dict(qk_norm="head", norms="sandwich", windows=(3, 3, None),
                        rope_bases=(1e4, 1e4, 1e6), query_scale=20**-0.5, attn_softcap=None,
                        final_softcap=None, embed_scale=32**0.5),
}  # fmt: skip


@pytest.mark.parametrize("case", list(RECENT))
def test_each_familys_attention_choices_are_read_from_its_config(saved, case):
    folder, _ = saved[case, "float32"]
    config = LlamaConfig.from_dict(json.loads((folder / "config.json").read_text()))
    for field, expected in EXPECTED[case].items():
        assert getattr(config, field) == pytest.approx(expected), field
    assert config.gain_offset == (1.0 if case.startswith("gemma") else 0.0)
    assert config.activation == ("gelu_tanh" if case.startswith("gemma") else "silu")


def test_transformers_4_style_configs_give_the_same_choices():
    """Gemma 3 as its Hub config.json was written for transformers 4 (rope_theta beside
    rope_local_base_freq, the window pattern instead of layer_types), Gemma 2 without
    layer_types."""
    gemma3 = {
        "model_type": "gemma3_text", "vocab_size": 100, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 7, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 16, "rope_theta": 1e6,
        "rope_local_base_freq": 1e4, "sliding_window": 512, "_sliding_window_pattern": 6,
        "query_pre_attn_scalar": 16, "rope_scaling": None,
    }  # fmt: skip
    config = LlamaConfig.from_dict(gemma3)
    assert config.windows == (512,) * 5 + (None, 512)
    assert config.rope_bases == (1e4,) * 5 + (1e6, 1e4)
    gemma2 = {**gemma3, "model_type": "gemma2", "num_hidden_layers": 4}
    del gemma2["_sliding_window_pattern"]
    assert LlamaConfig.from_dict(gemma2).windows == (512, None, 512, None)


def _copy_with_config(folder: Path, tmp_path: Path, change: dict) -> Path:
    """A copy of ``folder`` whose config.json has ``change`` applied, and a weights file that
    cannot be read: a refusal naming the config proves no weight was read."""
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    config.update(change)
    (copy / "config.json").write_text(json.dumps(config))
    (copy / "model.safetensors").write_bytes(b"not safetensors")
    return copy


@pytest.mark.parametrize(
    ("case", "change", "message"),
    [
        ("gemma3_text", {"use_bidirectional_attention": True}, "use_bidirectional_attention"),
        (
            "gemma3_text",
            {"layer_types": ["sliding_attention", "chunked_attention", "full_attention"]},
            "'chunked_attention'",
        ),
        (
            "gemma3_text",
            {
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                    "full_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 8.0},
                }
            },
            "'yarn'",
        ),
        ("gemma2", {"hidden_activation": "gelu"}, "'gelu'"),
        ("qwen3", {"attention_bias": True}, "sets attention_bias"),
        ("smollm3", {"mlp_bias": True}, "sets mlp_bias"),
        ("olmo2", {"hidden_act": "relu"}, "'relu'"),
    ],
)
def test_a_setting_the_code_does_not_run_is_refused_by_name(saved, tmp_path, case, change, message):
    folder, _ = saved[case, "float32"]
    with pytest.raises(ModelFileError, match=message) as caught:
        open_checkpoint(str(_copy_with_config(folder, tmp_path, change)))
    assert str(caught.value).endswith(".") and "\n" not in str(caught.value)


def test_every_recent_family_is_in_the_registry(saved):
    for case in RECENT:
        folder, _ = saved[case, "float32"]
        family = family_of(json.loads((folder / "config.json").read_text()))
        assert family.kind == "decoder" and case in family.model_types
        model = open_checkpoint(str(folder))
        assert model.config.model_type == case


def test_a_gemma_3_checkpoint_with_a_vision_tower_runs_its_text_part(tmp_path):
    """Gemma3ForConditionalGeneration saved whole (a tiny SigLIP tower beside the text model):
    our code reads the text part's config and weights and equals transformers on a text."""
    _, _, text_spec = RECENT["gemma3_text"]
    text = transformers.Gemma3TextConfig(vocab_size=160, max_position_embeddings=256,
                                         bos_token_id=None, eos_token_id=1, pad_token_id=0,
                                         **text_spec)  # fmt: skip
    vision = transformers.SiglipVisionConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        image_size=28, patch_size=14,
    )  # fmt: skip
    config = transformers.Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=4, image_token_index=159,
        boi_token_index=157, eoi_token_index=158, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(3)
    whole = transformers.Gemma3ForConditionalGeneration(config)
    with torch.no_grad():
        for name, param in whole.named_parameters():
            if "language_model" in name or "lm_head" in name:
                if "norm" in name:
                    param.copy_(0.2 * torch.randn_like(param))
                else:
                    param.normal_(0.0, 0.3)
    whole.eval().save_pretrained(tmp_path)
    from tests.tiny_decoders import word_tokenizer

    word_tokenizer().save_pretrained(tmp_path)
    ours = open_checkpoint(str(tmp_path), weights_dtype=np.float32)
    assert ours.config.model_type == "gemma3_text" and ours.config.windows == (3, 3, None)
    ids = ours.encode(PROMPTS[2])
    with torch.no_grad():
        expected = whole(input_ids=torch.tensor(ids)[None], use_cache=False).logits[0].numpy()
    np.testing.assert_allclose(run_llama(ours, ids, all_logits=True).logits, expected, atol=1e-4)


@pytest.mark.parametrize("case", list(RECENT))
def test_the_stream_splits_by_writer_through_the_post_norms_and_the_parts_sum_to_the_logit(
    saved, case
):
    """Each head's write through the norm after attention (its scale held), each MLP's: they
    add up to the stream, and their logit parts to the head's logit before any cap, as
    transformers' lm_head gives it."""
    from attention_core.models.readouts import decoder_attribution, decoder_parts

    folder, hf = saved[case, "float32"]
    ours = _ours(folder)
    ids = _long_ids(ours)
    trace = run_llama(ours, ids)
    parts = decoder_parts(ours, trace, len(ids) - 1)
    total = parts.embedding + parts.heads.sum(axis=(0, 1)) + parts.mlps.sum(axis=0)
    np.testing.assert_allclose(total, parts.residuals[-1], atol=1e-4)
    taken = {}
    handle = hf.lm_head.register_forward_hook(lambda m, a, out: taken.update(logits=out[0, -1]))
    run_hooked(hf, ids, [handle])
    token = int(trace.next_token_logits.argmax())
    attribution = decoder_attribution(ours, parts, token)
    assert attribution.total == pytest.approx(attribution.logit, abs=1e-4)
    assert attribution.logit == pytest.approx(float(taken["logits"][token]), abs=1e-4)


@pytest.mark.parametrize("case", list(RECENT))
def test_head_choices_retrace_the_pass_for_every_layer_and_head(saved, case):
    """The decoder page's step-by-step view of one head's last query, from the pass's q and k,
    ends at the pass's own weights; its QK-norm and rotation steps are the pass's."""
    from attention_core.models.llama.choices import head_choices

    folder, _ = saved[case, "float32"]
    ours = _ours(folder)
    trace = run_llama(ours, _long_ids(ours))
    config = ours.config
    for layer, steps in enumerate(trace.layers):
        for head in range(config.num_attention_heads):
            shown = head_choices(ours, layer, head, steps.q, steps.k)
            kv = head // config.group_size
            np.testing.assert_allclose(shown.weights, steps.weights[head, -1], atol=1e-6)
            np.testing.assert_array_equal(shown.q, steps.q[head, -1])
            np.testing.assert_array_equal(shown.k, steps.k[kv])
            raw = steps.attention.scores[kv, head % config.group_size, -1] * config.scale
            np.testing.assert_allclose(shown.raw, raw, atol=1e-5)
            np.testing.assert_allclose(shown.q_rot, steps.q_rot[head, -1], atol=1e-6)
            np.testing.assert_allclose(shown.k_rot, steps.k_rot[kv], atol=1e-6)
            if config.qk_norm:
                np.testing.assert_allclose(shown.k_normed, steps.k_normed[kv], atol=1e-6)
                np.testing.assert_allclose(shown.q_normed, steps.q_normed[head, -1], atol=1e-6)
            np.testing.assert_allclose(shown.scaled, steps.scores[head, -1], atol=1e-5)
            assert shown.window == config.window(layer)
            assert shown.rope_base == config.rope_base(layer)


def test_smollm3s_windows_slide_only_when_asked_and_then_in_its_nope_layers():
    """As transformers' SmolLM3Config builds layer_types: sliding where a layer has no RoPE,
    and only with use_sliding_window."""
    base = {"model_type": "smollm3", "vocab_size": 100, "hidden_size": 32,
            "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
            "no_rope_layers": [1, 1, 1, 0], "sliding_window": 8}  # fmt: skip
    assert LlamaConfig.from_dict(base).windows == ()
    windowed = LlamaConfig.from_dict({**base, "use_sliding_window": True})
    expected = transformers.SmolLM3Config(**{**base, "use_sliding_window": True}).layer_types
    assert windowed.windows == tuple(8 if t == "sliding_attention" else None for t in expected)
    assert windowed.windows == (None, None, None, 8)


def test_gemma_3_caps_what_transformers_gemma_3_caps(tmp_path):
    """Gemma 3's config has both soft caps, but its attention reads neither: only the final
    logits are capped. With both set, ours still equals transformers' logits."""
    spec = RECENT["gemma3_text"][2]
    config = transformers.Gemma3TextConfig(
        vocab_size=160, max_position_embeddings=256, bos_token_id=None, eos_token_id=1,
        pad_token_id=0, attn_logit_softcapping=0.5, final_logit_softcapping=2.5,
        attn_implementation="eager", **spec,
    )  # fmt: skip
    torch.manual_seed(11)
    hf = transformers.Gemma3ForCausalLM(config)
    with torch.no_grad():
        for param in hf.parameters():
            param.normal_(0.0, 0.3)
    hf.eval().save_pretrained(tmp_path)
    from tests.tiny_decoders import word_tokenizer

    word_tokenizer().save_pretrained(tmp_path)
    ours = _ours(tmp_path)
    assert ours.config.attn_softcap is None and ours.config.final_softcap == 2.5
    ids = _long_ids(ours)
    with torch.no_grad():
        expected = hf(torch.tensor(ids)[None], use_cache=False).logits[0].numpy()
    np.testing.assert_allclose(run_llama(ours, ids, all_logits=True).logits, expected, atol=1e-4)
    assert np.abs(expected).max() < 2.5


def test_head_choices_refuse_a_layer_or_head_past_the_model(saved):
    from attention_core.models.llama.choices import head_choices
    from attention_core.validation import AttentionInputError

    folder, _ = saved["qwen3", "float32"]
    ours = _ours(folder)
    steps = run_llama(ours, _long_ids(ours)).layers[0]
    layers, heads = ours.config.num_hidden_layers, ours.config.num_attention_heads
    for layer, head in ((layers, 0), (0, heads), (-1, 0), (0, -1)):
        with pytest.raises(AttentionInputError, match="past this model"):
            head_choices(ours, layer, head, steps.q, steps.k)


@pytest.mark.parametrize("case", ["olmo2", "qwen3", "gemma3_text"])
def test_a_batch_of_streams_runs_each_as_its_own_pass(saved, case):
    """Activation patching runs a batch of streams through one pass (``start``): QK-norm over
    the projection or per head, and every other piece, keep the batch axis apart."""
    folder, _ = saved[case, "float32"]
    ours = _ours(folder)
    ids = _long_ids(ours)[:9]
    rng = np.random.default_rng(5)
    streams = rng.normal(0.0, 1.0, (3, len(ids), ours.config.hidden_size)).astype(np.float32)
    batched = run_llama(ours, ids, start=(1, streams), all_logits=True).logits
    for i, stream in enumerate(streams):
        alone = run_llama(ours, ids, start=(1, stream), all_logits=True).logits
        np.testing.assert_allclose(batched[i], alone, atol=1e-5)
    assert np.abs(batched[0] - batched[1]).max() > 1e-2


def test_smollm3s_nope_layers_default_to_every_fourth_as_transformers_builds_them():
    base = {"model_type": "smollm3", "vocab_size": 100, "hidden_size": 32,
            "intermediate_size": 64, "num_hidden_layers": 9, "num_attention_heads": 4}  # fmt: skip
    for interval in (None, 3):
        config = dict(base) if interval is None else {**base, "no_rope_layer_interval": interval}
        expected = transformers.SmolLM3Config(**config).no_rope_layers
        ours = LlamaConfig.from_dict(config)
        assert [base is not None for base in ours.rope_bases] == [bool(x) for x in expected]
    assert LlamaConfig.from_dict(base).rope_bases[3] is None


def test_configs_without_layer_types_get_the_layers_transformers_builds():
    """A config.json that leaves layer_types, the window pattern, the query scale or the local
    RoPE base to the defaults: each read as transformers' config class fills it in."""
    shape = {"vocab_size": 100, "hidden_size": 32, "intermediate_size": 64,
             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
             "num_hidden_layers": 8}  # fmt: skip
    cases = [
        ("qwen3", "Qwen3Config", {"use_sliding_window": True, "sliding_window": 5,
                                  "max_window_layers": 3}),
        ("qwen3", "Qwen3Config", {"use_sliding_window": False, "sliding_window": 5,
                                  "num_hidden_layers": 30}),
        ("qwen3", "Qwen3Config", {"use_sliding_window": True, "sliding_window": 5,
                                  "num_hidden_layers": 30}),
        ("smollm3", "SmolLM3Config", {"use_sliding_window": True, "sliding_window": 5}),
        ("gemma3_text", "Gemma3TextConfig", {"sliding_window": 5}),
        ("gemma2", "Gemma2Config", {"sliding_window": 5}),
    ]  # fmt: skip
    for family, config_class, extra in cases:
        made = getattr(transformers, config_class)(**{**shape, **extra})
        window = made.sliding_window
        expected = tuple(window if t == "sliding_attention" else None for t in made.layer_types)
        ours = LlamaConfig.from_dict({"model_type": family, **shape, **extra})
        assert (ours.windows or (None,) * made.num_hidden_layers) == expected, (family, extra)
        if family.startswith("gemma"):
            assert ours.scale == pytest.approx(made.query_pre_attn_scalar**-0.5)
        if family == "gemma3_text":
            local = made.rope_parameters["sliding_attention"]["rope_theta"]
            assert ours.rope_bases[0] == local == 10_000.0
