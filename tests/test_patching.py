"""Activation patching (attention_core/models/patching.py) against an independent computation.

The reference is Hugging Face ``transformers`` on the same GGUF with forward hooks on the same
pieces: the decoder layer's output (or the embedding's) for the residual stream, ``self_attn``'s
and ``mlp``'s outputs, and ``self_attn.o_proj``'s input for a head's output. Each patched pass
there is a plain full pass of the corrupted prompt (a batch of them, one per patch, each hook
writing its own batch row), with none of our shortcuts: no start at a layer, no prefix cache,
no skipping of the positions before the prompts differ, no batching across layers. The prompt
pairs are not the page's default.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_core.models import patching, points
from attention_core.models.llama import files as llama_files
from attention_core.models.llama import load_llama, run_llama
from attention_core.validation import AttentionInputError
from tests.hf_models import smollm2_or_skip

torch = pytest.importorskip("torch")

# Held-out pairs: (clean, corrupted, answer, wrong), each answer one token, each pair one length.
PAIRS = [
    (
        "When Tom and Anna went to the park, Anna gave a ball to",
        "When Tom and Anna went to the park, Tom gave a ball to",
        " Tom",
        " Anna",
    ),
    (
        "The capital of France is the city of",
        "The capital of Italy is the city of",
        " Paris",
        " Rome",
    ),
]
# Our pass and transformers' differ by float32 rounding (their products sum in other orders).
LD_TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def model():
    path = llama_files.package_gguf_path()
    if path is None:
        pytest.skip(f"the model package is not installed ({llama_files.LLM_PACKAGE})")
    return load_llama(path)


@pytest.fixture(scope="module")
def reference():
    return smollm2_or_skip()[0]


def _runs(model, pair):
    clean, corrupt, answer, wrong = pair
    (a,), (w,) = model.encode(answer), model.encode(wrong)
    return patching.patch_runs(model, model.encode(clean), model.encode(corrupt), a, w)


def test_restored_share_is_worked_by_hand():
    runs = patching.PatchRuns(*[None] * 5, clean_ld=6.0, corrupt_ld=-2.0,
                              **dict.fromkeys(("probabilities", "clean", "corrupt",
                                               "clean_weights", "corrupt_weights",
                                               "num_layers", "num_heads")))  # fmt: skip
    # (LD − (−2)) / (6 − (−2)): −2 restores nothing, 6 all of it, 2 half, −4 a quarter against.
    np.testing.assert_allclose(patching.restored([-2.0, 6.0, 2.0, -4.0, 10.0], runs),
                               [0.0, 1.0, 0.5, -0.25, 1.5])  # fmt: skip


@pytest.mark.slow
def test_bad_pairs_are_learner_facing_errors(model):
    ids = model.encode("When Tom and Anna went to the park, Anna gave a ball to")
    (a,), (w,) = model.encode(" Tom"), model.encode(" Anna")
    with pytest.raises(AttentionInputError, match="same number"):
        patching.patch_runs(model, ids, ids[:-1], a, w)
    with pytest.raises(AttentionInputError, match="nothing to restore"):
        patching.patch_runs(model, ids, ids, a, w)
    with pytest.raises(AttentionInputError, match="same token"):
        patching.patch_runs(model, ids, [*ids[:-1], 5], a, a)
    with pytest.raises(AttentionInputError, match="kind must be"):
        patching.patch_stream(model, patching.patch_runs(model, ids, [*ids[:-1], 5], a, w), "x")


@pytest.mark.slow
def test_the_runs_read_both_prompts(model):
    runs = _runs(model, PAIRS[0])
    assert runs.first_change == 9  # " Anna" against " Tom": positions before it are shared
    both = zip(
        (runs.clean_ids, runs.corrupt_ids),
        (runs.clean_ld, runs.corrupt_ld),
        runs.probabilities,
        strict=True,
    )
    for ids, ld, probabilities in both:
        logits = run_llama(model, ids).next_token_logits.astype(np.float64)
        p = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        assert ld == pytest.approx(logits[runs.answer] - logits[runs.wrong], abs=1e-4)
        np.testing.assert_allclose(probabilities, p[[runs.answer, runs.wrong]], atol=1e-6)
    assert runs.clean_ld > 0 > runs.corrupt_ld  # SmolLM2 gets the clean one right
    assert runs.clean_weights.shape == (30, 9, runs.n, runs.n)


def _hf_patched(reference, runs, module, hook_kind, put, batch):
    """LD `(batch,)` of transformers' full passes of the corrupted prompt, a batch of them,
    patched by ``put(activation)`` (each row its own patch) in a hook of ``hook_kind``
    ("forward" or "pre") on ``module``."""

    def forward_hook(mod, args, out):
        hidden = out[0] if isinstance(out, tuple) else out
        hidden = hidden.clone()
        put(hidden)
        return (hidden, *out[1:]) if isinstance(out, tuple) else hidden

    def pre_hook(mod, args):
        x = args[0].clone()
        put(x)
        return (x,)

    handle = (module.register_forward_hook(forward_hook) if hook_kind == "forward"
              else module.register_forward_pre_hook(pre_hook))  # fmt: skip
    try:
        with torch.no_grad():
            ids = torch.from_numpy(runs.corrupt_ids)[None].repeat(batch, 1)
            logits = reference(ids, use_cache=False).logits[:, -1].double().numpy()
    finally:
        handle.remove()
    return logits[:, runs.answer] - logits[:, runs.wrong]


def _hf_clean(reference, runs, module, hook_kind):
    taken = {}

    def keep(mod, args, out=None):
        value = args[0] if out is None else (out[0] if isinstance(out, tuple) else out)
        taken["value"] = value.detach().clone()

    handle = (module.register_forward_hook(keep) if hook_kind == "forward"
              else module.register_forward_pre_hook(keep))  # fmt: skip
    try:
        with torch.no_grad():
            reference(torch.from_numpy(runs.clean_ids)[None], use_cache=False)
    finally:
        handle.remove()
    return taken["value"][0]


def _hf_stream_map(reference, runs, kind):
    """`(rows, n)` LD, every position of every boundary or layer patched, by transformers."""
    blocks = reference.model.layers
    rows = runs.num_layers + 1 if kind == "resid" else runs.num_layers
    result = np.empty((rows, runs.n))
    positions = torch.arange(runs.n)
    for row in range(rows):
        if kind == "resid":
            module = reference.model.embed_tokens if row == 0 else blocks[row - 1]
        else:
            module = blocks[row].self_attn if kind == "attn_out" else blocks[row].mlp
        clean = _hf_clean(reference, runs, module, "forward")  # (n, d_model)

        def put(hidden, clean=clean):
            hidden[positions, positions] = clean  # batch row p patches position p

        result[row] = _hf_patched(reference, runs, module, "forward", put, runs.n)
    return result


def _hf_head_map(reference, runs, last_only):
    d = reference.config.head_dim
    heads = runs.num_heads
    result = np.empty((runs.num_layers, heads))
    for layer in range(runs.num_layers):
        module = reference.model.layers[layer].self_attn.o_proj
        clean = _hf_clean(reference, runs, module, "pre")  # (n, head · d_head)

        def put(x, clean=clean):
            for h in range(heads):  # batch row h patches head h
                columns = slice(h * d, (h + 1) * d)
                if last_only:
                    x[h, -1, columns] = clean[-1, columns]
                else:
                    x[h, :, columns] = clean[:, columns]

        result[layer] = _hf_patched(reference, runs, module, "pre", put, heads)
    return result


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS, ids=["names", "capitals"])
def test_residual_map_matches_transformers_hooks(model, reference, pair):
    runs = _runs(model, pair)
    ours = patching.patch_stream(model, runs, "resid")
    expected = _hf_stream_map(reference, runs, "resid")
    print("resid: largest |ours - transformers| LD", np.abs(ours - expected).max())
    np.testing.assert_allclose(ours, expected, atol=LD_TOLERANCE, rtol=0)
    # The clean stream at the last boundary and last position is the clean pass's last stream.
    assert ours[-1, -1] == pytest.approx(runs.clean_ld, abs=1e-3)
    assert ours[0, : runs.first_change] == pytest.approx(runs.corrupt_ld)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["attn_out", "mlp_out"])
def test_attention_and_mlp_maps_match_transformers_hooks(model, reference, kind):
    runs = _runs(model, PAIRS[0])
    ours = patching.patch_stream(model, runs, kind)
    expected = _hf_stream_map(reference, runs, kind)
    print(kind, "largest |ours - transformers| LD", np.abs(ours - expected).max())
    np.testing.assert_allclose(ours, expected, atol=LD_TOLERANCE, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS, ids=["names", "capitals"])
@pytest.mark.parametrize("last_only", [False, True], ids=["every-position", "last-position"])
def test_head_map_and_top_head_match_transformers_hooks(model, reference, pair, last_only):
    runs = _runs(model, pair)
    ours = patching.patch_heads(model, runs, last_only=last_only)
    expected = _hf_head_map(reference, runs, last_only)
    print("heads: largest |ours - transformers| LD", np.abs(ours - expected).max())
    np.testing.assert_allclose(ours, expected, atol=LD_TOLERANCE, rtol=0)
    share, reference_share = patching.restored(ours, runs), patching.restored(expected, runs)
    assert np.argmax(share) == np.argmax(reference_share)
    assert share.max() == pytest.approx(reference_share.max(), abs=1e-3)


@pytest.mark.slow
def test_a_patch_equals_the_same_edit_of_a_plain_pass(model):
    """The batched, started, cached passes give what one plain pass with one edit gives."""
    runs = _runs(model, PAIRS[0])
    resid = patching.patch_stream(model, runs, "resid")
    heads = patching.patch_heads(model, runs, last_only=True)
    for boundary, position in ((0, 9), (12, 10), (30, 13)):

        def put(x, boundary=boundary, position=position):
            x = x.copy()
            x[position] = runs.clean[points.resid(boundary)][position]
            return x

        logits = run_llama(model, runs.corrupt_ids, edits={points.resid(boundary): put})
        ld = logits.next_token_logits[runs.answer] - logits.next_token_logits[runs.wrong]
        assert resid[boundary, position] == pytest.approx(ld, abs=1e-4)
    layer, head = 20, 3

    def put_head(z):
        z = z.copy()
        z[head, -1] = runs.clean[points.heads(layer)][head, -1]
        return z

    logits = run_llama(model, runs.corrupt_ids, edits={points.heads(layer): put_head})
    ld = logits.next_token_logits[runs.answer] - logits.next_token_logits[runs.wrong]
    assert heads[layer, head] == pytest.approx(ld, abs=1e-4)
    # The attention and MLP outputs at one layer and position, and a head at every position.
    every = patching.patch_heads(model, runs, last_only=False)
    for kind, layer, position in (("attn_out", 7, 10), ("mlp_out", 22, 13)):
        name = getattr(points, kind)(layer)

        def put_block(x, name=name, position=position):
            x = x.copy()
            x[position] = runs.clean[name][position]
            return x

        logits = run_llama(model, runs.corrupt_ids, edits={name: put_block})
        ld = logits.next_token_logits[runs.answer] - logits.next_token_logits[runs.wrong]
        shares = patching.patch_stream(model, runs, kind)
        assert shares[layer, position] == pytest.approx(ld, abs=1e-4)

    def put_whole_head(z):
        z = z.copy()
        z[head] = runs.clean[points.heads(layer)][head]
        return z

    layer = 20
    logits = run_llama(model, runs.corrupt_ids, edits={points.heads(layer): put_whole_head})
    ld = logits.next_token_logits[runs.answer] - logits.next_token_logits[runs.wrong]
    assert every[layer, head] == pytest.approx(ld, abs=1e-4)
