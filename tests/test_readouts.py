"""attention_core.models.readouts on the real models, against transformers on the same files.

The lens against transformers' hidden states layer by layer, the attribution against the logit
it splits, every head's write against transformers' attention output, the probe scores against
transformers' attentions, the token contributions against values and W_O taken from
transformers, the causal check against transformers with the same heads removed. Prompts and
probes here are not the page's defaults (held out).
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_core.head_roles import head_roles, repeated_tokens, strongest_heads
from attention_core.losses import token_losses
from attention_core.models import points, readouts
from attention_core.models.llama import files as llama_files
from attention_core.models.llama import load_llama, run_llama
from tests.hf_models import minilm_reference, smollm2_reference

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

PROMPT = "The Eiffel Tower stands in the city of"
LAYERS, HEADS = 30, 9


@pytest.fixture(scope="module")
def gguf_path():
    path = llama_files.package_gguf_path()
    if path is None:
        pytest.skip(f"the model package is not installed ({llama_files.LLM_PACKAGE})")
    return path


@pytest.fixture(scope="module")
def model(gguf_path):
    return load_llama(gguf_path)


@pytest.fixture(scope="module")
def reference(gguf_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return smollm2_reference(gguf_path)[0]


@pytest.fixture(scope="module")
def prompt(model, reference):
    ids = np.asarray(model.encode(PROMPT))
    trace = run_llama(model, ids, all_logits=True)
    with torch.no_grad():
        out = reference(
            torch.from_numpy(ids)[None], output_hidden_states=True, output_attentions=True,
            use_cache=False,
        )  # fmt: skip
    return ids, trace, out


def test_the_lens_reads_transformers_hidden_states_layer_by_layer(model, reference, prompt):
    ids, trace, out = prompt
    at = len(ids) - 1
    parts = readouts.decoder_parts(model, trace, at)
    hidden = [h[0, at].numpy() for h in out.hidden_states]  # embedding, layers 1..29, norm(30)
    for layer in range(LAYERS):
        np.testing.assert_allclose(parts.residuals[layer], hidden[layer], rtol=1e-4, atol=2e-3)
    lens = readouts.decoder_lens(model, parts)
    with torch.no_grad():
        # transformers' last hidden state is already through the final norm.
        streams = torch.stack([h[0, at] for h in out.hidden_states[:-1]])
        expected = reference.lm_head(reference.model.norm(streams)).numpy()
    np.testing.assert_allclose(lens.logits[:-1], expected, atol=2e-3, rtol=1e-4)
    # After the last layer the lens is the model's own next-token distribution.
    np.testing.assert_allclose(lens.logits[-1], out.logits[0, at].numpy(), atol=1e-3)
    np.testing.assert_allclose(lens.logits[-1], trace.logits[at], atol=1e-4)
    p = torch.softmax(out.logits[0, at].double(), 0).numpy()
    top = int(np.argmax(p))
    assert lens.rank(top)[-1] == 1
    assert lens.probability(top)[-1] == pytest.approx(p[top], abs=1e-4)


def test_paris_appears_only_in_the_last_layers(model):
    ids = np.asarray(model.encode("The capital of France is"))
    parts = readouts.decoder_parts(model, run_llama(model, ids), len(ids) - 1)
    lens = readouts.decoder_lens(model, parts)
    (paris,) = model.encode(" Paris")
    ranks, p = lens.rank(paris), lens.probability(paris)
    assert ranks[-1] == 1 and p[-1] > 0.7
    # Nowhere near the top for the first 25 layers, and under 1% until the last three.
    assert (ranks[:26] > 50).all()
    assert (p[:28] < 0.01).all()


@pytest.mark.parametrize("versus", [None, " London"])
def test_the_attribution_adds_up_to_the_logit_transformers_computes(model, prompt, versus):
    ids, trace, out = prompt
    at = len(ids) - 1
    parts = readouts.decoder_parts(model, trace, at)
    token = int(np.argmax(trace.logits[at]))
    other = None if versus is None else model.encode(versus)[0]
    split = readouts.decoder_attribution(model, parts, token, other)
    expected = out.logits[0, at, token].item()
    if other is not None:
        expected -= out.logits[0, at, other].item()
    assert split.heads.shape == (LAYERS, HEADS) and split.mlps.shape == (LAYERS,)
    assert abs(split.total - split.logit) < 1e-4
    assert split.logit == pytest.approx(expected, abs=1e-3)


def test_each_heads_write_adds_up_to_transformers_attention_output(model, reference, prompt):
    ids, trace, _ = prompt
    at = len(ids) - 1
    captured = {}
    layer = 17
    hook = reference.model.layers[layer].self_attn.register_forward_hook(
        lambda _m, _i, output: captured.update(out=output[0][0, at].numpy().copy())
    )
    try:
        with torch.no_grad():
            reference(torch.from_numpy(ids)[None], use_cache=False)
    finally:
        hook.remove()
    parts = readouts.decoder_parts(model, trace, at)
    np.testing.assert_allclose(parts.heads[layer].sum(0), captured["out"], atol=1e-4)
    # And every writer together is the stream after the last layer.
    total = parts.embedding + parts.heads.sum((0, 1)) + parts.mlps.sum(0)
    np.testing.assert_allclose(total, parts.residuals[-1], atol=1e-3)


def test_the_split_reads_the_named_points_as_an_edited_pass_went_on_with_them(model, prompt):
    ids, trace, _ = prompt
    at = len(ids) - 1
    mask = np.ones((LAYERS, HEADS))
    mask[12, 3] = 0.0
    edited = run_llama(model, ids, edits=points.head_scaling(mask))
    parts, plain = (readouts.decoder_parts(model, t, at) for t in (edited, trace))
    assert np.all(parts.heads[12, 3] == 0.0)  # the removed head writes nothing
    np.testing.assert_array_equal(parts.heads[:12], plain.heads[:12])  # nothing before it moved
    np.testing.assert_array_equal(parts.residuals[:13], plain.residuals[:13])
    assert not np.array_equal(parts.residuals[13], plain.residuals[13])
    total = parts.embedding + parts.heads.sum((0, 1)) + parts.mlps.sum(0)
    np.testing.assert_allclose(total, parts.residuals[-1], atol=1e-3)


def test_probe_scores_match_transformers_attentions(model, reference):
    probe = repeated_tokens(readouts.DECODER_PROBE_POOL, 12, seed=5)
    _, roles = readouts.decoder_roles(model, probe)
    with torch.no_grad():
        attentions = reference(torch.from_numpy(probe)[None], output_attentions=True).attentions
    theirs = head_roles(np.stack([a[0].numpy() for a in attentions]), 12)
    for role in ("previous", "induction", "duplicate", "first"):
        np.testing.assert_allclose(roles.score(role), theirs.score(role), atol=1e-4)


def test_smollm2_has_induction_heads_and_needs_them_for_the_repeat(model, reference):
    from tests.hf_head_mask import use_head_mask

    probe = repeated_tokens(readouts.DECODER_PROBE_POOL, 16, seed=11)
    _, roles = readouts.decoder_roles(model, probe)
    top = strongest_heads(roles.induction, 4)
    assert top[0][2] > 0.8  # a clear induction head
    mask = np.ones((LAYERS, HEADS), dtype=np.float32)
    for layer, head, _ in top:
        mask[layer, head] = 0.0
    base = readouts.repeated_half_loss(model, probe, 16)
    without = readouts.repeated_half_loss(model, probe, 16, mask)
    assert without > base + 1.0
    # The same heads removed in transformers (its head_mask, rebuilt): the same loss.
    use_head_mask(reference)
    try:
        with torch.no_grad():
            logits = (
                reference(
                    torch.from_numpy(probe)[None], head_mask=torch.from_numpy(mask), use_cache=False
                )
                .logits[0]
                .numpy()
            )
    finally:
        reference.set_attn_implementation("eager")
    expected = token_losses(logits.astype(np.float64), probe)[16:31].mean()
    assert without == pytest.approx(expected, abs=1e-3)


def test_token_contributions_from_transformers_values_and_w_o(model, reference, prompt):
    ids, trace, out = prompt
    layer, query = 20, len(ids) - 2
    values = {}
    hook = reference.model.layers[layer].self_attn.v_proj.register_forward_hook(
        lambda _m, _i, output: values.update(v=output[0].numpy().copy())
    )
    try:
        with torch.no_grad():
            reference(torch.from_numpy(ids)[None], use_cache=False)
    finally:
        hook.remove()
    v = values["v"].reshape(len(ids), 3, 64)  # (key, kv_head, d_head)
    w_o = reference.model.layers[layer].self_attn.o_proj.weight.detach().numpy()
    alpha = out.attentions[layer][0].numpy()  # (head, q, k)
    expected = []
    for j in range(query + 1):
        added = sum(
            alpha[h, query, j] * v[j, h // 3] @ w_o[:, 64 * h : 64 * (h + 1)].T
            for h in range(HEADS)
        )
        expected.append(np.linalg.norm(added))
    ours = readouts.decoder_contributions(model, trace, layer, query)
    np.testing.assert_allclose(ours, expected, rtol=2e-3, atol=2e-4)


@pytest.fixture(scope="module")
def encoder():
    from attention_core.models import load_bert

    bert = load_bert()
    return bert, minilm_reference(bert.location.path)


def test_encoder_probe_scores_match_transformers_attentions(encoder):
    bert, hf = encoder
    probe = repeated_tokens(readouts.ENCODER_PROBE_POOL, 10, seed=2)
    _, roles = readouts.encoder_roles(bert, probe)
    cls, sep = bert.tokenizer.token_to_id("[CLS]"), bert.tokenizer.token_to_id("[SEP]")
    ids = torch.tensor([[cls, *probe.tolist(), sep]])
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    theirs = head_roles(np.stack([a[0].numpy() for a in attentions]), 10, start=1)
    for role in ("previous", "induction", "duplicate", "first"):
        np.testing.assert_allclose(roles.score(role), theirs.score(role), atol=1e-5)
    # A sentence encoder has previous-token heads, and no induction heads.
    assert roles.previous.max() > 0.9 and roles.induction.max() < 0.2


def test_encoder_contributions_from_transformers_values_and_w_o(encoder):
    from attention_core.models import run_bert_ids

    bert, hf = encoder
    ids = bert.tokenize("Dogs chase cats, and cats chase mice.").input_ids
    layer, query = 3, 4
    trace = run_bert_ids(bert, ids)
    captured = {}
    attention = hf.encoder.layer[layer].attention
    hook = attention.self.value.register_forward_hook(
        lambda _m, _i, output: captured.update(v=output[0].numpy().copy())
    )
    try:
        with torch.no_grad():
            # A copy: the tokenizer's ids are read-only, which torch will not wrap.
            out = hf(torch.tensor(ids)[None], output_attentions=True)
    finally:
        hook.remove()
    v = captured["v"].reshape(len(ids), 12, 32)
    w_o = attention.output.dense.weight.detach().numpy()
    alpha = out.attentions[layer][0].numpy()
    expected = [
        np.linalg.norm(
            sum(alpha[h, query, j] * v[j, h] @ w_o[:, 32 * h : 32 * (h + 1)].T for h in range(12))
        )
        for j in range(len(ids))
    ]
    np.testing.assert_allclose(
        readouts.encoder_contributions(bert, trace, layer, query), expected, rtol=1e-4, atol=1e-5
    )
