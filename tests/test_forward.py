"""attention_core.models.forward: one entry, each family's own pass, checked against transformers
on tiny checkpoints it builds (tests/tiny_checkpoints.py), and GPT-2's keep, start and tokens
(models.passes) against its own plain pass.

The readouts that go through the family's final norm (the lens, the attribution) are checked
here on GPT-2 too: LayerNorm, not RMSNorm.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.masks import sliding_window_mask
from attention_core.models import generate, load_gpt2, load_llama, points, readouts
from attention_core.models.forward import read_decoder_text, run_decoder
from attention_core.models.generation import Sampling, choose_next_token, extend
from attention_core.models.gpt2 import run_gpt2
from attention_core.models.kv_experiments import kv_experiment
from attention_core.models.scoring import score_text
from tests.tiny_checkpoints import write_tiny

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEXT = "the cat sat on the mat and the dog"


@pytest.fixture(scope="module", params=["gpt2", "gpt2-other", "llama"])
def pair(request, tmp_path_factory):
    """(our model, transformers' model) of one tiny checkpoint."""
    folder = write_tiny(request.param, tmp_path_factory.mktemp(request.param) / "model")
    ours = (
        load_llama(folder, weights_dtype=np.float32)
        if request.param == "llama"
        else load_gpt2(folder)
    )
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    return ours, theirs


def hf_outputs(hf, ids: np.ndarray, **options):
    with torch.no_grad():
        return hf(torch.tensor(ids)[None], output_attentions=True, output_hidden_states=True,
                  use_cache=False, **options)  # fmt: skip


def test_run_decoder_matches_transformers_logits_and_attention(pair):
    model, hf = pair
    ids = np.asarray(model.encode_prompt(TEXT))
    trace = run_decoder(model, ids, all_logits=True)
    out = hf_outputs(hf, ids)
    np.testing.assert_allclose(trace.logits, out.logits[0].numpy(), atol=1e-4)
    expected = np.stack([a[0].numpy() for a in out.attentions])
    np.testing.assert_allclose(trace.attention_weights, expected, atol=1e-5)


def test_run_decoder_refuses_what_is_no_decoder():
    with pytest.raises(AttentionInputError, match="not a decoder this code runs"):
        run_decoder(object(), [1, 2])


@pytest.fixture(scope="module", params=["gpt2", "gpt2-other"])
def gpt2_model(request, tmp_path_factory):
    """Our GPT-2 of one tiny checkpoint (run_llama's keep, start and tokens have their own
    tests in test_llama.py)."""
    return load_gpt2(write_tiny(request.param, tmp_path_factory.mktemp(request.param) / "model"))


def test_gpt2_keep_start_and_tokens_give_the_plain_pass_numbers(gpt2_model):
    model = gpt2_model
    ids = np.asarray(model.encode_prompt(TEXT))
    plain = run_gpt2(model, ids, all_logits=True)
    kept = run_decoder(model, ids, all_logits=True, keep=("weights",))
    np.testing.assert_array_equal(kept.logits, plain.logits)
    np.testing.assert_array_equal(kept.attention_weights, plain.attention_weights)
    with pytest.raises(AttributeError, match="not among the steps"):
        _ = kept.layers[0].q
    # A batch of three passes begun after layer 1 from the plain pass's stream.
    stream = plain.point(points.resid(1))
    started = run_decoder(model, ids, all_logits=True, keep=(),
                          start=(1, np.broadcast_to(stream, (3, *stream.shape))))  # fmt: skip
    assert started.logits.shape == (3, *plain.logits.shape)
    np.testing.assert_allclose(started.logits, np.broadcast_to(plain.logits, started.logits.shape),
                               atol=1e-5)  # fmt: skip
    assert started.cache is None  # no cache of the skipped layer
    # After a prefix's cache: the same positions' logits.
    prefix = run_decoder(model, ids[:4], keep=()).cache
    rest = run_decoder(model, ids[4:], prefix, all_logits=True, keep=(),
                       start=(1, stream[None, 4:]))  # fmt: skip
    np.testing.assert_allclose(rest.logits[0], plain.logits[4:], atol=1e-5)
    picked = run_decoder(model, ids, tokens=(7, 3))
    np.testing.assert_allclose(picked.logits, plain.logits[-1:, [7, 3]], atol=1e-6)
    with pytest.raises(AttentionInputError, match="boundaries run from 0"):
        run_decoder(model, ids, start=(model.config.n_layer + 1, stream))


def test_a_head_removed_by_an_edit_is_transformers_with_that_heads_slice_zeroed(pair):
    """Head h's output zeroed before W_O: in transformers, a hook on the output projection that
    zeroes columns h·d_head .. (h+1)·d_head of its input."""
    model, hf = pair
    ids = np.asarray(model.encode_prompt(TEXT))
    layer, head = model.config.num_hidden_layers - 1, 1
    mask = np.ones((model.config.num_hidden_layers, model.config.num_attention_heads), np.float32)
    mask[layer, head] = 0.0
    ours = run_decoder(model, ids, all_logits=True, edits=points.head_scaling(mask)).logits
    blocks = hf.transformer.h if hasattr(hf, "transformer") else hf.model.layers
    block = blocks[layer]
    projection = block.attn.c_proj if hasattr(block, "attn") else block.self_attn.o_proj
    width = model.config.head_dim

    def zero_head(_module, inputs):
        z = inputs[0].clone()
        z[..., head * width : (head + 1) * width] = 0.0
        return (z,)

    hook = projection.register_forward_pre_hook(zero_head)
    try:
        theirs = hf_outputs(hf, ids).logits[0].numpy()
    finally:
        hook.remove()
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    assert np.abs(ours - run_decoder(model, ids, all_logits=True).logits).max() > 1e-3


def test_the_lens_reads_transformers_streams_through_the_models_own_final_norm(pair):
    """Every stage through ln_f (GPT-2) or the final RMSNorm (Llama), then the head: for stage
    l that is transformers' head on its norm of hidden_states[l]; the last stage is the logits."""
    model, hf = pair
    ids = np.asarray(model.encode_prompt(TEXT))
    position = len(ids) - 1
    trace = run_decoder(model, ids, all_logits=True)
    parts = readouts.decoder_parts(model, trace, position)
    lens = readouts.decoder_lens(model, parts)
    out = hf_outputs(hf, ids)
    norm = hf.transformer.ln_f if hasattr(hf, "transformer") else hf.model.norm
    with torch.no_grad():
        for stage, hidden in enumerate(out.hidden_states[:-1]):
            expected = hf.lm_head(norm(hidden[0, position])).numpy()
            np.testing.assert_allclose(lens.logits[stage], expected, atol=1e-4)
    np.testing.assert_allclose(lens.logits[-1], out.logits[0, position].numpy(), atol=1e-4)
    assert model.final_norm.kind == ("RMSNorm" if hasattr(hf, "model") else "LayerNorm")


@pytest.mark.parametrize("versus", [None, 2])
def test_the_attribution_freezes_the_final_norm_and_adds_up_to_transformers_logit(pair, versus):
    model, hf = pair
    ids = np.asarray(model.encode_prompt(TEXT))
    trace = run_decoder(model, ids, all_logits=True, keep=readouts_steps())
    parts = readouts.decoder_parts(model, trace, len(ids) - 1)
    logits = hf_outputs(hf, ids).logits[0, -1].double().numpy()
    token = int(np.argmax(logits))
    split = readouts.decoder_attribution(model, parts, token, versus)
    expected = logits[token] - (0.0 if versus is None else logits[versus])
    assert split.total == pytest.approx(expected, abs=1e-4)
    assert split.logit == pytest.approx(expected, abs=1e-4)
    # The frozen scale is transformers' own norm's at r_L: 1/σ for LayerNorm, 1/ρ for RMSNorm.
    r = parts.residuals[-1]
    spread = r - r.mean() if model.final_norm.kind == "LayerNorm" else r
    assert split.scale == pytest.approx(1 / np.sqrt(np.mean(spread**2) + model.final_norm.eps))
    if model.final_norm.kind == "RMSNorm":  # no bias: nothing is fixed
        assert split.fixed == 0.0


def readouts_steps() -> tuple[str, ...]:
    return ("weights", "head_outputs", "hidden", "ffn_output")


def test_generate_runs_any_family_and_writes_transformers_greedy_tokens(pair):
    model, hf = pair
    ids = list(model.encode_prompt(TEXT))
    ours = generate(model, ids, max_new_tokens=6, stop_at_eos=False).token_ids
    theirs = []
    with torch.no_grad():
        for _ in range(6):
            theirs.append(int(hf(torch.tensor([ids + theirs])).logits[0, -1].argmax()))
    assert ours == theirs


def test_one_generation_loop_samples_resumes_forks_and_stops_for_every_family(pair):
    """The core's loop on each family: step s draws with the seed and s, so a generation
    resumed in parts or cut short is the same text; each step's probabilities and the last
    logits are transformers'; a forced first token forks; the end token is read and ends it."""
    model, hf = pair
    ids = list(model.encode_prompt(TEXT))
    sampling = Sampling(temperature=1.5, top_k=30, top_p=0.9, seed=5)
    whole = generate(model, ids, sampling, max_new_tokens=6, stop_at_eos=False)
    part = generate(model, ids, sampling, max_new_tokens=2, stop_at_eos=False)
    assert extend(model, part, 4, stop_at_eos=False).token_ids == whole.token_ids
    # Its kept steps let go, a generation still goes on the same: the caches and logits stay.
    light = part.without_kept_steps()
    assert light.prompt_run.layers == () and all(s.run.layers == () for s in light.steps)
    assert extend(model, light, 4, stop_at_eos=False).token_ids == whole.token_ids
    assert whole.upto(2).token_ids == part.token_ids and whole.upto(2).cache.length == len(ids) + 2
    with torch.no_grad():
        logits = hf(torch.tensor([list(whole.ids)])).logits[0].double()
    np.testing.assert_allclose(whole.logits, logits[-1].numpy(), atol=1e-4)
    for i, step in enumerate(whole.steps):
        z = logits[len(ids) - 1 + i]
        p = torch.softmax(z, 0)[step.token_id]
        assert step.model_probability == pytest.approx(float(p), rel=1e-4)
        scores = z / 1.5
        for warper in (transformers.TopKLogitsWarper(30), transformers.TopPLogitsWarper(0.9)):
            scores = warper(None, scores[None])[0]
        drawn = torch.softmax(scores, 0)[step.token_id]
        assert 0 < step.probability == pytest.approx(float(drawn), rel=1e-4)
    # A fork at step 3: the token the text takes gives the text; another continues with the
    # same seeds from its own logits.
    assert (
        extend(model, part, 4, first_token=whole.token_ids[2], stop_at_eos=False).ids == whole.ids
    )
    other = int(np.argsort(-whole.steps[1].run.next_token_logits)[1])
    forked = extend(model, part, 2, first_token=other, stop_at_eos=False)
    assert forked.token_ids[2] == other
    assert forked.token_ids[3] == choose_next_token(
        forked.steps[2].run.next_token_logits, sampling, 4
    )
    # The end token is read (its row is shown) and nothing follows it.
    eos = whole.token_ids[2]
    ending = replace(model, config=replace(model.config, eos_token_id=eos))
    ended = generate(ending, ids, sampling, max_new_tokens=6)
    assert ended.token_ids == whole.token_ids[: whole.token_ids.index(eos) + 1]
    assert ended.ended and ended.stop_reason == "eos" and ended.cache.length == len(ended.ids)
    assert extend(ending, ended, 3) is ended


def test_a_text_read_keeping_no_steps_is_the_plain_pass_and_transformers_losses(pair):
    """read_decoder_text (any family's read_text): the final stream and the first keys' weights
    of the plain pass, with a window too; score_text's losses are transformers' on each
    family; a codec that keeps the keys and values changes nothing."""
    model, hf = pair
    ids = np.asarray(model.encode_prompt(TEXT + " and the cat"))
    n = ids.shape[0]
    window = sliding_window_mask(n, 4)
    for attend in (None, window):
        plain = run_decoder(model, ids, all_logits=True, attend=attend)
        read, final, shares = read_decoder_text(model, ids, attend=attend, first=3)
        np.testing.assert_array_equal(read, ids)
        np.testing.assert_allclose(final, plain.final_hidden, atol=1e-5)
        expected = plain.attention_weights[:, :, 1:, :3].mean(axis=-2)
        np.testing.assert_allclose(shares, expected, atol=1e-6)
    kept = read_decoder_text(model, ids, kv_codec=lambda layer, k, v: (k, v))[1]
    np.testing.assert_allclose(kept, read_decoder_text(model, ids)[1], atol=1e-6)
    with torch.no_grad():
        logits = hf(torch.tensor(ids)[None]).logits[0].double()
    losses = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
    np.testing.assert_allclose(score_text(model, ids).losses, losses.numpy(), atol=1e-4)
    found = kv_experiment(model, ids)
    assert [effect.name for effect in found.effects] == ["mqa", "int8", "int4"]
    assert found.mean_loss == pytest.approx(float(losses.mean()), abs=1e-4)
    with pytest.raises(AttentionInputError, match="nothing to predict"):
        read_decoder_text(model, ids[:1])
