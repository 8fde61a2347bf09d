"""The long-context page in Chromium: a link with a text, a window and sinks shows the three
perplexities; moving the sinks slider changes the third and the link."""

from __future__ import annotations

import math

import numpy as np
import pytest
from playwright.sync_api import expect

from attention_core.models.llama import files as llama_files
from harness.browser import exceptions, key_selector, open_app, rerun_after, wait_for_link
from tests.e2e.links import LinkState, expect_slider
from tests.hf_models import smollm2_reference
from tests.test_long_context import AUSTEN

torch = pytest.importorskip("torch")
WINDOW = 24


@pytest.fixture(scope="module")
def expected():
    """transformers' perplexity past the window, by the number of first tokens kept."""
    path = llama_files.package_gguf_path()
    if path is None:
        pytest.skip(f"the model package is not installed ({llama_files.LLM_PACKAGE})")
    hf, tokenizer = smollm2_reference(path)
    ids = tokenizer(AUSTEN, add_special_tokens=False, return_tensors="pt")["input_ids"]
    n = ids.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    found = {}
    for sinks in (2, 3):
        allowed = (j <= i) & ((i - j < WINDOW) | (j < sinks))
        additive = torch.where(torch.from_numpy(allowed), 0.0, -torch.inf)[None, None]
        with torch.no_grad():
            logits = hf(ids, attention_mask=additive, use_cache=False).logits[0].double()
        losses = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:], reduction="none")
        found[sinks] = math.exp(losses[WINDOW:].mean().item())
    return found


def shown_perplexity(tab, title: str) -> float:
    metric = tab.locator("[data-testid='stMetric']").filter(has_text=f"Perplexity, {title}")
    return float(metric.locator("[data-testid='stMetricValue']").inner_text())


@pytest.mark.e2e
def test_the_link_shows_the_perplexities_and_the_sinks_slider_changes_them(server, page, expected):
    query = f"text={AUSTEN.replace(' ', '+')}&window={WINDOW}&sinks=2"
    open_app(page, server.url, "long-context", query)
    metric = page.locator("[data-testid='stMetric']").filter(has_text="window + first tokens")
    expect(metric).to_be_visible(timeout=120_000)
    assert shown_perplexity(page, "window + first tokens") == pytest.approx(expected[2], rel=0.005)
    thumb = page.locator(f"{key_selector('long_context.sinks')} input[type='range']")
    with rerun_after(page):
        thumb.focus()
        thumb.press("ArrowRight")
    wait_for_link(page, has=("sinks=3",))
    expect(metric.locator("[data-testid='stMetricValue']")).to_have_text(
        f"{expected[3]:.2f}", timeout=120_000
    )
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_slider(tab, "long_context.window", "32")
    expect_slider(tab, "long_context.sinks", "2")
    metric = tab.locator("[data-testid='stMetric']").filter(has_text="window + first tokens")
    expect(metric).to_be_visible(timeout=120_000)


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("window=32&sinks=2", first_request_shows_its_state)
