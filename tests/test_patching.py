"""Activation patching (attention_core/models/patching.py) against an independent computation.

The reference is Hugging Face ``transformers`` on the same GGUF with forward hooks on the same
pieces: the decoder layer's output (or the embedding's) for the residual stream, ``self_attn``'s
and ``mlp``'s outputs, and ``self_attn.o_proj``'s input for a head's output. Each patched pass
there is a plain full pass of the corrupted prompt (a batch of them, one per patch, each hook
writing its own batch row), with none of our shortcuts: no start at a layer, no prefix cache,
no skipping of the positions before the prompts differ, no batching across layers. The prompt
pairs are not the page's default.

The same comparison runs on a tiny Llama (tests/tiny_checkpoints.py) in about a second, on id
pairs chosen to reach what SmolLM2's prompts do not: prompts that differ at token 0 or 1, token
ids 0 and vocab − 1, prompts long enough for one layer per batched pass, logits too large for
an unshifted exp. Those tests are what ``tools/mutate.py`` runs for this module.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from attention_core.models import patching, points
from attention_core.models.llama import load_llama, run_llama
from attention_core.validation import AttentionInputError
from tests.hf_models import smollm2_gguf_or_skip, smollm2_or_skip
from tests.tiny_checkpoints import write_tiny

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
    return load_llama(smollm2_gguf_or_skip())


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


# -- a tiny Llama: the same checks in a second (what tools/mutate.py runs for this module) --------

# (n, the positions where the corrupted ids differ, answer, wrong): prompts that differ at
# token 0 (no prefix to cache), at token 1 (a prefix of one) and at two later tokens; the first
# two use ids 0 and vocab − 1. The first is long enough that one boundary's patches fill a
# batched pass alone (12 items of 12 tokens > PASS_ROWS), the second makes passes of two
# boundaries (8 · 8 · 2 ≥ PASS_ROWS), the third one pass for all.
TINY_CASES = {
    "token-0": (12, [0], 0, 159),
    "token-1": (9, [1], 159, 0),
    "tokens-4-7": (10, [4, 7], 5, 40),
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(the folder, our model, transformers' model) of one tiny Llama checkpoint: 2 layers,
    4 query heads over 2 KV heads, a vocabulary of 160; float32 on both sides."""
    transformers = pytest.importorskip("transformers")
    folder = write_tiny("llama", tmp_path_factory.mktemp("tiny_llama"))
    hf = transformers.LlamaForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    )
    return folder, load_llama(folder, weights_dtype=np.float32), hf.eval()


def _tiny_ids(case):
    n, changed, answer, wrong = TINY_CASES[case]
    clean = np.random.default_rng(n).integers(0, 160, n)
    corrupt = clean.copy()
    corrupt[changed] = (clean[changed] + 7) % 160
    return clean, corrupt, answer, wrong


def _hf_last_logits_and_weights(hf, ids):
    with torch.no_grad():
        out = hf(torch.from_numpy(ids)[None], output_attentions=True, use_cache=False)
    return out.logits[0, -1].double(), np.stack([a[0].numpy() for a in out.attentions])


@pytest.mark.parametrize("case", TINY_CASES)
def test_tiny_runs_match_transformers(tiny, case):
    _, model, hf = tiny
    clean, corrupt, answer, wrong = _tiny_ids(case)
    runs = patching.patch_runs(model, clean.tolist(), corrupt.tolist(), answer, wrong)
    assert runs.n == clean.size
    assert runs.first_change == TINY_CASES[case][1][0]
    assert (runs.answer, runs.wrong) == (answer, wrong)
    np.testing.assert_array_equal(runs.clean_ids, clean)
    np.testing.assert_array_equal(runs.corrupt_ids, corrupt)
    for row, (ids, ld, weights) in enumerate(
        (
            (clean, runs.clean_ld, runs.clean_weights),
            (corrupt, runs.corrupt_ld, runs.corrupt_weights),
        )
    ):
        logits, expected_weights = _hf_last_logits_and_weights(hf, ids)
        assert ld == pytest.approx(float(logits[answer] - logits[wrong]), abs=1e-4)
        p = torch.softmax(logits, dim=-1).numpy()
        np.testing.assert_allclose(runs.probabilities[row], p[[answer, wrong]], atol=1e-6)
        np.testing.assert_allclose(weights, expected_weights, atol=1e-5, rtol=0)
    # The two patterns differ from the first changed token on, so each is its own prompt's.
    assert np.abs(runs.clean_weights - runs.corrupt_weights).max() > 1e-2


@pytest.mark.parametrize("case", TINY_CASES)
def test_tiny_maps_match_transformers_hooks(tiny, case):
    _, model, hf = tiny
    runs = patching.patch_runs(model, *_tiny_ids(case))
    for kind in patching.STREAM_KINDS:
        ours = patching.patch_stream(model, runs, kind)
        np.testing.assert_allclose(ours, _hf_stream_map(hf, runs, kind), atol=1e-4, rtol=0)
    # A head at every position is the default; then at the last position only.
    every = _hf_head_map(hf, runs, last_only=False)
    np.testing.assert_allclose(patching.patch_heads(model, runs), every, atol=1e-4, rtol=0)
    last = _hf_head_map(hf, runs, last_only=True)
    ours = patching.patch_heads(model, runs, last_only=True)
    np.testing.assert_allclose(ours, last, atol=1e-4, rtol=0)
    # The maps are not all LD_corrupt, or a patch that put nothing in would pass.
    assert np.abs(every - runs.corrupt_ld).max() > 1e-2


def test_bad_pairs_and_ids_are_learner_facing_errors(tiny):
    _, model, _ = tiny
    clean, corrupt, a, w = _tiny_ids("tokens-4-7")
    with pytest.raises(AttentionInputError, match="same number"):
        patching.patch_runs(model, clean, corrupt[:-1], a, w)
    with pytest.raises(AttentionInputError, match="nothing to restore"):
        patching.patch_runs(model, clean, clean, a, w)
    with pytest.raises(AttentionInputError, match="same token"):
        patching.patch_runs(model, clean, corrupt, a, a)
    # Ids lie in 0 .. 159: 0 and 159 are read (test_tiny_runs_match_transformers), -1 and 160 not.
    for answer, wrong in ((-1, w), (a, -1), (160, w), (a, 160), (160, 161)):
        with pytest.raises(AttentionInputError, match=r"at least 0|0\.\.159"):
            patching.patch_runs(model, clean, corrupt, answer, wrong)
    with pytest.raises(AttentionInputError, match="kind must be"):
        patching.patch_stream(model, patching.patch_runs(model, clean, corrupt, a, w), "x")


def test_probabilities_of_logits_too_large_for_a_plain_exp(tiny, tmp_path):
    """A checkpoint whose output head is scaled up: logits past 709, where exp overflows float64,
    still give the softmax's probabilities (the largest logit is taken off before exp)."""
    folder, _, _ = tiny
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    clean, corrupt, _, _ = _tiny_ids("tokens-4-7")
    with torch.no_grad():
        hf.lm_head.weight.mul_(1000 / hf(torch.from_numpy(clean)[None]).logits[0, -1].max())
    shutil.copytree(folder, tmp_path / "big")  # the tokenizer; config and weights replaced
    hf.save_pretrained(tmp_path / "big")
    model = load_llama(tmp_path / "big", weights_dtype=np.float32)
    logits = _hf_last_logits_and_weights(hf, clean)[0]
    answer, wrong = torch.topk(logits, 2).indices.tolist()
    runs = patching.patch_runs(model, clean, corrupt, answer, wrong)
    for row, ids in enumerate((clean, corrupt)):
        logits = _hf_last_logits_and_weights(hf, ids)[0]
        assert logits.max() > 710  # exp of it is inf in float64
        p = torch.softmax(logits, dim=-1).numpy()
        np.testing.assert_allclose(runs.probabilities[row], p[[answer, wrong]], atol=1e-3)
    assert runs.probabilities[0, 0] > 0.5  # the top logit's token, not a 0 from inf / inf
