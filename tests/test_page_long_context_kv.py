"""The long-context page's KV-cache section (ui/long_context/kv_cache.py) in AppTest, on a small
script of its own that calls `section` as the page does.

The bytes it shows are checked against numbers worked out by hand from each model's config.json
(2 · layers · KV heads · d_head · bytes per token, a window's cap); the experiments' numbers
against `kv_experiment` run outside the page's caches, and their bytes by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.models.kv_experiments import kv_experiment
from attention_core.models.llama import files as llama_files
from attention_core.models.llama import load_llama
from server.blas import share_cores
from tests.hf_models import smollm2_gguf_or_skip
from tests.plotly_json import plotly_array
from ui.long_context import kv_cache

KIB, MIB, GIB = 2**10, 2**20, 2**30
SCRIPT = """
from ui.long_context import kv_cache
from ui.models import smollm
from ui.widgets.state import PageState

view = PageState("long_context")
text = {text!r}
ids = tuple(smollm.load_decoder().model.encode(text)) if text else ()
kv_cache.section(view, ids, "smollm2")
view.sync_url()
"""
TEXT = (
    "The lighthouse keeper woke before dawn, as he had every morning for thirty years. He "
    "climbed the narrow stairs, counting the steps out of habit, and checked the lens for salt."
)


def open_section(text: str = "", params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_string(SCRIPT.format(text=text), default_timeout=300)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart(at: AppTest, key: str) -> dict:
    for element in at.main.get("plotly_chart"):
        if element.proto.id.endswith(key):
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart {key}")


def bars(at: AppTest) -> dict[tuple[str, str], float]:
    """(model, variant) -> GiB, as the bar chart draws them."""
    drawn = {}
    for trace in chart(at, "long_context.kv_bytes")["data"]:
        for name, y in zip(trace["x"], plotly_array(trace["y"]), strict=True):
            drawn[name, trace["name"]] = float(y)
    return drawn


def table(at: AppTest, column: str):
    for element in at.dataframe:
        if column in element.value.columns:
            return element.value.set_index(element.value.columns[0])
    raise AssertionError(f"no table with a column {column!r}")


# ----------------------------------------------------------------------------- bytes (no model)


def test_bytes_per_token_and_at_the_default_context():
    at = open_section()
    assert at.select_slider[0].value == 32_768
    per_token = table(at, "GQA / token")
    # 2 × 32 layers × 8 KV heads × 128 × 2 bytes = 128 KiB; MHA has 32 KV heads, MQA 1.
    assert per_token.loc["Llama-3-8B"].tolist() == ["GQA", "512 KiB", "128 KiB", "16 KiB", "—",
                                                    "4 GiB"]  # fmt: skip
    # (512 + 64) × 60 layers × 2 bytes = 67.5 KiB; 2 × 60 × 128 heads × 128 × 2 = 3.75 MiB.
    assert per_token.loc["DeepSeek-V2", ["MHA / token", "GQA / token", "MLA / token"]
                         ].tolist() == ["3.75 MiB", "—", "67.5 KiB"]  # fmt: skip
    # SmolLM2: 2 × 30 × 3 × 64 × 2 bytes = 22.5 KiB in bfloat16, twice that in our float32.
    assert per_token.loc["SmolLM2-135M", "GQA / token"] == "22.5 KiB"
    assert per_token.loc["SmolLM2-135M here (float32)", "GQA / token"] == "45 KiB"
    at_context = per_token["whole cache"]
    assert at_context["Llama-3-8B"] == "4 GiB"  # 128 KiB × 32,768
    assert at_context["Mistral-7B-v0.1"] == "512 MiB"  # 128 KiB × its window of 4,096
    assert at_context["DeepSeek-V2"] == "2.11 GiB"  # 69,120 × 32,768 = 2.109 GiB
    assert at_context["SmolLM2-135M"] == "720 MiB"
    drawn = bars(at)
    assert drawn["Llama-3-8B", "GQA"] == pytest.approx(4.0)
    assert drawn["Llama-3-8B", "MHA"] == pytest.approx(16.0)
    assert drawn["Mistral-7B-v0.1", "MHA"] == pytest.approx(4096 * 512 * KIB / GIB)
    assert drawn["DeepSeek-V2", "MLA"] == pytest.approx(69_120 * 32_768 / GIB)
    assert np.isnan(drawn["Llama-3-8B", "MLA"])
    assert any("stops growing there" in caption.value for caption in at.caption)
    # The chart's text alternative names what each model uses.
    alt = next(e.proto.alt for e in at.main.get("plotly_chart") if e.proto.id.endswith("kv_bytes"))
    assert "Llama-3-8B (GQA) 4 GiB" in alt and "DeepSeek-V2 (MLA) 2.11 GiB" in alt


def test_the_context_control_moves_the_bars_and_the_link():
    at = open_section()
    at.select_slider[0].set_value(131_072).run()
    assert not at.exception
    drawn = bars(at)
    assert drawn["Llama-3-8B", "GQA"] == pytest.approx(16.0)  # 128 KiB × 131,072
    assert drawn["Mistral-7B-v0.1", "GQA"] == pytest.approx(0.5)  # still its window
    assert table(at, "GQA / token")["whole cache"]["Llama-3-8B"] == "16 GiB"
    assert at.query_params["context"] == "131072"
    at.select_slider[0].set_value(1_024).run()
    drawn = bars(at)
    assert drawn["Mistral-7B-v0.1", "GQA"] == pytest.approx(1024 * 128 * KIB / GIB)  # in window
    assert not any("stops growing there" in caption.value for caption in at.caption)


def test_a_link_sets_the_context_and_a_bad_one_is_refused():
    at = open_section(params={"context": "4096"})
    assert at.select_slider[0].value == 4_096
    assert bars(at)["Mistral-7B-v0.1", "GQA"] == pytest.approx(512 * MIB / GIB)
    at = open_section(params={"context": "5000"})
    assert at.select_slider[0].value == 32_768
    assert any("context" in warning.value for warning in at.warning)


# ----------------------------------------------------------------------------- experiments


@pytest.fixture(scope="module")
def model():
    return load_llama(smollm2_gguf_or_skip())


@pytest.mark.slow
def test_the_experiments_show_their_kl_agreement_and_bytes(model, monkeypatch):
    monkeypatch.delenv(llama_files.LLM_PATH_ENV_VAR, raising=False)
    monkeypatch.setattr(kv_cache, "MAX_EXPERIMENT_TOKENS", 24)  # the page's cap, made short
    ids = model.encode(TEXT)
    assert len(ids) > 24
    at = open_section(TEXT)
    # The page's runs are made in the model's kept process, whose products use one core
    # (server.process_load): float32 sums in that order, which the 8-bit KL (~1e-3) feels.
    share_cores(2)
    try:
        expected = kv_experiment(model, ids[:24])
    finally:
        share_cores(1)
    shown = table(at, "mean KL (nats)")
    # float32: 2 × 30 layers × 3 KV heads × 64 × 4 bytes = 46,080 bytes per token; MQA keeps one
    # head; 8 and 4 bits add a float32 scale per vector of 64 numbers.
    assert shown["bytes"].tolist() == [46_080 * 24, 15_360 * 24, 12_240 * 24, 6_480 * 24]
    effects = {effect.label: effect for effect in expected.effects}
    for label, effect in effects.items():
        # The page's full read is its pass over the whole text, cut: rounding apart (2.2e-6).
        assert shown.loc[label, "mean KL (nats)"] == pytest.approx(effect.mean_kl, rel=1e-5)
        assert shown.loc[label, "top-1 agreement"] == pytest.approx(effect.agreement)
    assert shown.loc["full (float32)", "mean loss (nats)"] == pytest.approx(expected.mean_loss)
    kl = shown["mean KL (nats)"]
    assert kl["8-bit cache"] < kl["4-bit cache"] / 10
    assert shown.loc["8-bit cache", "top-1 agreement"] >= 0.9
    figure = chart(at, "long_context.kv_kl")
    assert [trace["name"] for trace in figure["data"]] == list(effects)
    assert figure["layout"]["yaxis"]["type"] == "log"
    assert any("its first 24 tokens" in caption.value for caption in at.caption)
    assert at.metric[0].value == kv_cache.bytes_text(46_080 * 24) == "1.05 MiB"


def test_the_pooling_sentence_says_only_what_the_losses_say():
    from types import SimpleNamespace

    from ui.long_context.kv_cache import pooling_sentence

    assert pooling_sentence(None, 3.0) == ""
    broken = pooling_sentence(SimpleNamespace(mean_loss=7.5), 3.0)
    assert broken.startswith(" Pooling the heads of a trained model breaks it (mean loss 7.50")
    mild = pooling_sentence(SimpleNamespace(mean_loss=3.2), 3.0)
    assert mild == (
        " Pooling the heads costs this model little on this text (mean loss 3.20 nats against "
        "3.00)."
    )
