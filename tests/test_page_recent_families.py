"""Today's small-LLM families on every real-model page: tiny Qwen3, SmolLM3, OLMo 2, Gemma 2 and
Gemma 3 checkpoints (``tests.tiny_decoders``) listed in ATTENTION_EXPLORER_MODELS, opened by a
link's ``?model=``, against transformers on the same files.

    decoder page     the next-token probabilities are transformers'; each attention choice is
                     shown where it acts (QK-norm, windows, soft caps, NoPE), the config table
                     is the config's
    heads page       the lens's last stage is the model's own probability; the chosen head's
                     pattern is transformers'; the attribution sums to the logit
    patching page    each prompt's logit difference is transformers'
    long context     the full pass's perplexity is transformers'
    attends page     a sentence saying why the view does not apply to a family it cannot split
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from attention_core.lessons.passages import ALICE
from harness.app_pages import open_model_page
from tests.hf_models import run_hooked
from tests.listed_pages import (
    causal_lm,
    check_next_tokens,
    check_patching_lds,
    encode,
    open_heads_page,
    table,
)
from tests.plotly_json import chart, figures, plotly_array
from tests.tiny_checkpoints import write_tiny
from tests.tiny_decoders import RECENT
from ui.models import chosen

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow
PROMPT = "the cat sat on the mat and the dog"
FAMILIES = list(RECENT)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recent")
    return {family: write_tiny(family, root / f"tiny-{family}") for family in FAMILIES}


@pytest.fixture(autouse=True)
def listed(folders, monkeypatch):
    monkeypatch.setenv(chosen.MODELS_ENV_VAR, ",".join(str(p) for p in folders.values()))
    yield
    chosen.HOST.forget()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_decoder_page_holds_transformers_next_token_probabilities(folders, family):
    at = open_model_page("pages/decoder_llm.py", {"model": f"tiny-{family}", "prompt": PROMPT},
                         240)  # fmt: skip
    assert not at.error, [e.value for e in at.error]
    hf = causal_lm(folders[family])
    ids = encode(folders[family], PROMPT)
    with torch.no_grad():
        p = torch.softmax(hf(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
    check_next_tokens(at, p)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_heads_page_lens_ends_at_the_models_own_probability(folders, family):
    at, _, out, _, _ = open_heads_page(folders[family], f"tiny-{family}", PROMPT)
    layers = len(out.attentions)
    heads = out.attentions[0].shape[1]
    # The chosen head: the page's defaults, past a tiny model's end, become its last head.
    pattern = plotly_array(chart(at, "heads.pattern")["data"][0]["z"]).astype(np.float64)
    expected = out.attentions[layers - 1][0, heads - 1].numpy()
    np.testing.assert_allclose(np.nan_to_num(pattern), expected, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_patching_page_shows_transformers_logit_differences(folders, family):
    check_patching_lds(folders[family], f"tiny-{family}")


@pytest.mark.parametrize("family", ["gemma3_text", "smollm3"])
def test_the_long_context_page_shows_transformers_perplexity(folders, family):
    """The full pass's perplexity over the tokens predicted from a query at the window or
    later, as the caption counts them, is transformers'."""
    at = open_model_page("pages/long_context.py", {"model": f"tiny-{family}"}, 240)
    assert not at.error, [e.value for e in at.error]
    (said,) = [c.value for c in at.caption if "tokens predicted from a query" in c.value]
    count, start, total = (int(x) for x in re.findall(
        r"Over the (\d+) tokens predicted from a query at position (\d+) or later \(of (\d+)",
        said)[0])  # fmt: skip
    assert count == total - 1 - start
    ids = encode(folders[family], ALICE)[:total]
    assert len(ids) == total
    with torch.no_grad():
        logits = causal_lm(folders[family])(torch.tensor([ids])).logits[0].double()
    losses = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
    expected = float(torch.exp(losses[start:].mean()))
    (full,) = [m.value for m in at.metric if m.label == "Perplexity, full attention"]
    assert float(full) == pytest.approx(expected, abs=0.006)


def test_the_long_context_page_says_how_much_a_local_global_models_own_windows_hide(folders):
    at = open_model_page("pages/long_context.py", {"model": "tiny-gemma3_text", "window": "8"}, 240)
    (said,) = [i.value for i in at.info if "window of its own" in i.value]
    assert "2 of its 3 layers are local, each query there seeing only its last 3 tokens" in said
    assert "W = 8 changes only what its 1 global layer reads" in said
    plain = open_model_page("pages/long_context.py", {"model": "tiny-qwen3"}, 240)
    # Qwen3's tiny model slides a window in layer 2 (use_sliding_window): it is said too.
    assert any("1 of its 2 layers are local" in i.value for i in plain.info)
    nope = open_model_page("pages/long_context.py", {"model": "tiny-smollm3"}, 240)
    assert not any("window of its own" in i.value for i in nope.info)


def title_of(spec: dict) -> str:
    """A figure's title as one line (long titles wrap with <br>)."""
    return (spec["layout"].get("title") or {}).get("text", "").replace("<br>", " ")


def figure_titled(at, start: str) -> dict:
    for spec in figures(at):
        if title_of(spec).startswith(start):
            return spec
    raise AssertionError(f"no figure titled {start!r}")


def test_the_decoder_pages_table_reads_each_familys_attention_as_transformers_config_does(folders):
    at = open_model_page("pages/decoder_llm.py", {"model": "tiny-gemma3_text", "prompt": PROMPT},
                         240)  # fmt: skip
    rows = table(at, "NoPE layers").set_index("model")
    assert rows.index[0] == "tiny-gemma3_text"  # the loaded model first
    assert set(rows.index) == {f"tiny-{family}" for family in FAMILIES}
    for family in FAMILIES:
        hf = transformers.AutoConfig.from_pretrained(folders[family])
        shown = rows.loc[f"tiny-{family}"]
        assert shown["query : KV heads"] == f"{hf.num_attention_heads} : {hf.num_key_value_heads}"
        types = list(getattr(hf, "layer_types", None) or ["full_attention"] * hf.num_hidden_layers)
        if family == "smollm3" and not hf.use_sliding_window:
            types = ["full_attention"] * hf.num_hidden_layers
        local = types.count("sliding_attention")
        expected_layers = (
            f"{local} local (last {hf.sliding_window}) · {len(types) - local} global"
            if local
            else f"all {len(types)} global"
        )
        assert shown["layers"] == expected_layers, family
        caps = [f"scores {c:g}" for c in [getattr(hf, "attn_logit_softcapping", None)] if c]
        caps += [f"logits {c:g}" for c in [getattr(hf, "final_logit_softcapping", None)] if c]
        assert shown["soft caps"] == (", ".join(caps) or "—"), family
        nope = [str(i + 1) for i, use in enumerate(getattr(hf, "no_rope_layers", None) or [])
                if not use]  # fmt: skip
        assert shown["NoPE layers"] == (", ".join(nope) or "—"), family
        scalar = getattr(hf, "query_pre_attn_scalar", None)
        assert shown["query scale"] == (
            f"1/√{scalar} (config)" if scalar else f"1/√{hf.head_dim}"
        ), family
        has_qk_norm = family in ("qwen3", "gemma3_text", "olmo2")
        assert (shown["QK-norm"] != "—") == has_qk_norm, family


def test_gemma2s_cap_window_and_scale_are_shown_where_they_act(folders):
    """Layer 1 of tiny Gemma 2 is local (window 3) and caps its scores at 2: the pattern greys
    out the keys past the window, and the cap's points lie on 2·tanh(x/2) with a softmax over
    them equal to transformers' weights for that head's last query."""
    at = open_model_page("pages/decoder_llm.py", {"model": "tiny-gemma2", "prompt": PROMPT,
                         "layer": "1", "head": "2"}, 240)  # fmt: skip
    assert not at.error
    hf = causal_lm(folders["gemma2"])
    ids = encode(folders["gemma2"], PROMPT)
    with torch.no_grad():
        weights = hf(torch.tensor([ids]), output_attentions=True).attentions[0][0, 1].numpy()
    pattern = plotly_array(figure_titled(at, "Layer 1, head 2")["data"][0]["z"]).astype(float)
    n = len(ids)
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]
    np.testing.assert_array_equal(np.isnan(pattern), (offset < 0) | (offset >= 3))
    np.testing.assert_allclose(np.nan_to_num(pattern), weights, atol=1e-5)
    assert any("every key more than 2 tokens back" in c.value for c in at.caption)
    cap = figure_titled(at, "Layer 1, head 2: the last token's scores, capped")
    points = next(trace for trace in cap["data"] if trace["name"] == "this query's keys")
    raw, capped = plotly_array(points["x"]), plotly_array(points["y"])
    np.testing.assert_allclose(capped, 2.0 * np.tanh(raw / 2.0), atol=1e-6)
    assert np.abs(raw).max() > 2.0
    seen = capped[-3:]
    np.testing.assert_allclose(np.exp(seen) / np.exp(seen).sum(), weights[-1, -3:], atol=1e-5)
    assert any("multiplied by **0.2041** (1/√24" in m.value for m in at.markdown)
    assert any("capped the same way, at ±3" in c.value for c in at.caption)


def test_qk_norm_view_is_transformers_q_norm_output(folders):
    at = open_model_page("pages/decoder_llm.py", {"model": "tiny-qwen3", "prompt": PROMPT,
                         "layer": "2", "head": "3"}, 240)  # fmt: skip
    assert not at.error
    hf = causal_lm(folders["qwen3"])
    ids = encode(folders["qwen3"], PROMPT)
    taken = {}
    handle = hf.model.layers[1].self_attn.q_norm.register_forward_hook(
        lambda m, a, out: taken.update(q=out[0, -1, 2].numpy())
    )
    run_hooked(hf, ids, [handle])
    spec = figure_titled(at, "Layer 2, head 3: the last token's query, step by step")
    series = {trace["name"]: plotly_array(trace["y"]) for trace in spec["data"]}
    np.testing.assert_allclose(series["after QK-norm"], taken["q"], atol=1e-5)
    assert "after RoPE" in series


def test_a_nope_layer_says_it_has_no_rotation_and_the_rope_view_skips_it(folders):
    at = open_model_page("pages/decoder_llm.py", {"model": "tiny-smollm3", "prompt": PROMPT,
                         "layer": "2"}, 240)  # fmt: skip
    assert any("Layer 2 uses no rotation (NoPE)" in i.value for i in at.info)
    assert not any(title_of(s).endswith("the last token's scores") for s in figures(at))
    rope = open_model_page("pages/decoder_llm.py", {"model": "tiny-smollm3", "prompt": PROMPT,
                           "layer": "1"}, 240)  # fmt: skip
    assert not any("uses no rotation" in i.value for i in rope.info)
    assert any(
        (s["layout"].get("title") or {}).get("text", "")
        == "Layer 1, head 1: the last token's scores"
        for s in figures(rope)
    )


@pytest.mark.parametrize("layer", ["1", "2"])
def test_the_attends_page_splits_smollm3s_rope_and_nope_layers_exactly(folders, layer):
    at = open_model_page("pages/why_a_head_attends.py", {"model": "tiny-smollm3", "prompt": PROMPT,
                         "layer": layer, "head": "2"}, 240)  # fmt: skip
    assert not at.error and not at.exception
    hf = causal_lm(folders["smollm3"])
    ids = encode(folders["smollm3"], PROMPT)
    with torch.no_grad():
        row = hf(torch.tensor([ids]), output_attentions=True).attentions[int(layer) - 1][0, 1, -1]
    key = 1 + int(np.argmax(row.numpy()[1:]))
    (said,) = [m.value for m in at.markdown if m.value.startswith(f"Layer {layer}, head 2 gives")]
    assert f"(token {key + 1}) a weight of **{float(row[key]):.3f}**" in said
    (line,) = [m.value for m in at.markdown if "The model's own score" in m.value]
    score, summed = (float(x) for x in re.findall(r"\*\*(-?[\d.]+)\*\*", line))
    assert summed == pytest.approx(score, abs=1e-4)
    nope = [m.value for m in at.markdown if "uses **no positions at all** (NoPE)" in m.value]
    assert bool(nope) == (layer == "2")


@pytest.mark.parametrize(
    ("family", "piece"),
    [("qwen3", "QK-norm"), ("olmo2", "a norm after each block"), ("gemma2", "a soft cap")],
)
def test_the_attends_page_says_why_it_cannot_split_a_family(folders, family, piece):
    at = open_model_page("pages/why_a_head_attends.py", {"model": f"tiny-{family}",
                         "prompt": PROMPT}, 240)  # fmt: skip
    assert not at.error and not at.exception
    (why,) = [i.value for i in at.info if "no longer splits" in i.value]
    assert piece in why
    assert not any("The model's own score" in m.value for m in at.markdown)


@pytest.mark.parametrize("family", ["gemma2", "olmo2"])
def test_the_heads_pages_attribution_adds_up_through_the_post_norms_to_the_uncapped_logit(
    folders, family
):
    at = open_model_page("pages/what_heads_do.py", {"model": f"tiny-{family}", "prompt": PROMPT},
                         240)  # fmt: skip
    hf = causal_lm(folders[family])
    ids = encode(folders[family], PROMPT)
    taken = {}
    handle = hf.lm_head.register_forward_hook(lambda m, a, out: taken.update(z=out[0, -1]))
    run_hooked(hf, ids, [handle])
    (said,) = [c.value for c in at.caption if "the logit itself" in c.value]
    together, logit = (float(x) for x in re.findall(r"together ([+-][\d.]*\d), the logit itself "
                                                    r"([+-][\d.]*\d)", said)[0])  # fmt: skip
    assert together == pytest.approx(logit, abs=2e-4)
    assert logit == pytest.approx(float(taken["z"].max()), abs=2e-4)
    notes = [c.value for c in at.caption if "passes the norm after" in c.value]
    assert len(notes) == 1
    assert ("before the cap" in notes[0]) == (family == "gemma2")


def test_a_small_16_bit_checkpoint_is_held_in_float32_within_the_operators_budget(
    tmp_path, monkeypatch
):
    """Gemma 3 is published in bfloat16: a listed one small enough is held in float32 (its
    decode step skips the widening), and a budget too small for it keeps it 16-bit."""
    from tests.tiny_decoders import save_decoder

    folder = tmp_path / "tiny-gemma3-bf16"
    save_decoder("gemma3_text", folder, "bfloat16")
    monkeypatch.setenv(chosen.MODELS_ENV_VAR, str(folder))
    assert chosen.held_as(str(folder)) == "float32"
    at = open_model_page("pages/decoder_llm.py", {"model": "tiny-gemma3-bf16"}, 240)
    (line,) = [c.value for c in at.caption if "tiny\\-gemma3\\-bf16 from a folder" in c.value]
    assert "held as float32" in line and "saved as bfloat16" in line
    chosen.HOST.forget()
    monkeypatch.setenv(chosen.FLOAT32_MB_ENV_VAR, "0.01")
    assert chosen.held_as(str(folder)) is None
    at = open_model_page("pages/decoder_llm.py", {"model": "tiny-gemma3-bf16"}, 240)
    (line,) = [c.value for c in at.caption if "tiny\\-gemma3\\-bf16 from a folder" in c.value]
    assert "held as bfloat16" in line


@pytest.mark.parametrize(
    ("family", "said"),
    [("qwen3", "each head's q and k are RMS-normalised"),
     ("olmo2", "the whole projection (all heads' q together, and all k together) is")],
)  # fmt: skip
def test_the_qk_norm_sentence_says_where_the_norm_acts(folders, family, said):
    at = open_model_page("pages/decoder_llm.py", {"model": f"tiny-{family}", "prompt": PROMPT},
                         240)  # fmt: skip
    assert any(said in m.value for m in at.markdown)
