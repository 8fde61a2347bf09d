"""The decoder page in Chromium: a click on "Next token" generates one, and its link reopens it;
the top-p slider moves the kept set; a branch link opens the fork for every viewer alike.

The greedy token itself is checked against transformers in tests/test_llama.py; here the page
must append it, grow the cache by one position, and write a link that shows the same text. The
kept sets and the branches' probabilities expected here come from transformers' model and its
logits processors (tests/hf_models.py).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from playwright.sync_api import expect

from attention_core.models.llama import files as llama_files
from harness.browser import (
    exceptions,
    key_selector,
    new_tab,
    open_app,
    rerun_after,
    wait_for_link,
)
from tests.e2e.links import LinkState, expect_text
from tests.hf_models import smollm2_reference
from tests.test_page_decoder import HELD_OUT, softmax, transformers_stages

PROMPT = "prompt=The+capital+of+France+is"
SHAPE = re.compile(r"\(30, 2, 3, (\d+), 64\)")


def _generated(tab) -> tuple[str, int, str]:
    """What the page shows: its "k generated" caption, cache positions and generated text."""
    caption = tab.locator("[data-testid='stCaptionContainer']").filter(has_text="generated of")
    shape = tab.locator("[data-testid='stMetric']").filter(has_text="Cache shape")
    value = shape.locator("[data-testid='stMetricValue']")
    expect(value).to_have_text(SHAPE)
    positions = int(SHAPE.search(value.inner_text())[1])
    text = tab.locator("[data-testid='stText']").first.inner_text()
    return caption.inner_text(), positions, text


@pytest.mark.e2e
def test_next_token_appends_one_and_its_link_reopens_it(server, page, browser):
    open_app(page, server.url, "decoder", PROMPT)
    caption, positions, text = _generated(page)
    assert caption.startswith("0 generated of at most")
    assert text == "(nothing generated yet)"

    with rerun_after(page):
        page.get_by_role("button", name="Next token").click()
    url = wait_for_link(page, has=("step=1",))
    caption_after, positions_after, text_after = _generated(page)
    assert caption_after.startswith("1 generated of at most")
    # The cache holds every prompt token and the new one: one position more, on all 30 layers.
    assert positions_after == positions + 1
    assert text_after not in ("", "(nothing generated yet)")
    assert exceptions(page) == []

    # A viewer who opens the link sees the same token, generated again from the same prompt.
    other = new_tab(browser)
    try:
        other.goto(url)
        expect(other.locator("[data-testid='stText']").first).to_have_text(text_after)
        assert _generated(other) == (caption_after, positions_after, text_after)
    finally:
        other.context.close()


# -- how the next token is chosen, and branches ---------------------------------------------------

FILTERS = "temperature=0.8&top_k=50&top_p=0.9&min_p=0.05"
VOCAB = 49152


@pytest.fixture(scope="module")
def reference():
    """transformers' model on the same weights: `logits(ids)` `(n, vocab)` and `encode(text)`."""
    torch = pytest.importorskip("torch")
    path = llama_files.package_gguf_path()
    if path is None:
        pytest.skip(f"the model package is not installed ({llama_files.LLM_PACKAGE})")
    hf, tokenizer = smollm2_reference(path)

    def logits(ids: list[int]) -> np.ndarray:
        with torch.no_grad():
            return hf(torch.tensor([ids]), use_cache=False).logits[0].double().numpy()

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    return SimpleNamespace(logits=logits, encode=encode, decode=tokenizer.decode)


def kept_counts(logits: np.ndarray, top_p: float) -> list[int]:
    """How many tokens each of transformers' warpers leaves, in generate's order."""
    return [int(np.isfinite(s).sum()) for s in transformers_stages(logits, 0.8, 50, top_p, 0.05)]


def metric(tab, label: str):
    return tab.locator("[data-testid='stMetric']").filter(has_text=label)


def metric_value(tab, label: str):
    return metric(tab, label).locator("[data-testid='stMetricValue']")


@pytest.mark.e2e
def test_the_top_p_slider_moves_the_kept_set_and_the_link(server, page, reference):
    logits = reference.logits(reference.encode(HELD_OUT))[-1]
    at_090, at_089 = kept_counts(logits, 0.9), kept_counts(logits, 0.89)
    assert at_090[2] != at_089[2]  # one step of the slider changes the nucleus here
    open_app(page, server.url, "decoder", f"prompt={HELD_OUT.replace(' ', '+')}&{FILTERS}")
    kept = metric_value(page, "Tokens that may be drawn")
    expect(kept).to_have_text(f"{at_090[3]:,} of {VOCAB:,}")
    # The stages chart says the same in its text alternative, stage by stage.
    expect(page.locator(f"[aria-label*='top-p p = 0.9 keeps {at_090[2]:,} (']")).to_have_count(1)

    slider = page.locator(key_selector("decoder.top_p")).get_by_role("slider")
    slider.scroll_into_view_if_needed()
    with rerun_after(page):
        slider.press("ArrowLeft")  # 0.90 → 0.89
    wait_for_link(page, has=("top_p=0.89",))
    expect(kept).to_have_text(f"{at_089[3]:,} of {VOCAB:,}")
    described = f"[aria-label*='top-p p = 0.89 keeps {at_089[2]:,} (']"
    expect(page.locator(described)).to_have_count(1)
    nucleus = f"[aria-label^='Top-p, p = 0.89: the nucleus is {at_089[2]} tokens']"
    expect(page.locator(nucleus)).to_have_count(1)
    assert exceptions(page) == []


@pytest.mark.e2e
def test_a_branch_link_opens_the_fork_and_another_viewer_sees_the_same(
    server, page, browser, reference
):
    prompt = "The best thing about cats is"
    ids = reference.encode(prompt)
    # Two greedy branches of two tokens, by transformers: the likelier by the chain rule.
    first = reference.logits(ids)[-1]
    branches = []
    for token in np.argsort(-first)[:2]:
        p1 = softmax(first)[token]
        p2 = softmax(reference.logits([*ids, int(token)])[-1]).max()
        branches.append((p1 * p2, int(token)))
    p, token = max(branches)

    open_app(page, server.url, "decoder", f"prompt={prompt.replace(' ', '+')}&branch=1"
             "&branches=2&branch_tokens=2")  # fmt: skip
    expect(metric_value(page, "Shared prefix, computed once")).to_have_text(f"{len(ids)} positions")
    expect(metric_value(page, "Computed for the branches")).to_have_text("4 positions")
    best = metric_value(page, "The likeliest branch")
    expect(best).to_have_text(f"“{reference.decode([token])}”")
    delta = metric(page, "The likeliest branch").locator("[data-testid='stMetricDelta']")
    shown = float(re.search(r"p = ([0-9.e-]+)", delta.inner_text())[1])
    assert shown == pytest.approx(p, rel=0.01)

    other = new_tab(browser)  # another viewer of the same link: the same branches
    try:
        other.goto(page.url)
        expect(metric_value(other, "The likeliest branch")).to_have_text(best.inner_text())
        assert exceptions(other) == []
    finally:
        other.context.close()
    # Closing the fork takes it out of the link.
    with rerun_after(page):
        page.get_by_text("Fork the text here", exact=True).click()
    wait_for_link(page, lacks=("branch=1",))
    expect(metric(page, "Shared prefix, computed once")).to_have_count(0)
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    # The link asks for one generated token: the page generates it on the first run, and the
    # cache then holds every prompt token plus that one (30 layers, K and V, 3 KV heads, 64).
    expect_text(tab, "decoder.prompt", "Dogs bark loudly")
    caption = tab.locator("[data-testid='stCaptionContainer']").filter(has_text="generated of")
    expect(caption).to_contain_text("1 generated of at most")
    metric = tab.locator("[data-testid='stMetric']").filter(has_text="Cache shape")
    expect(metric.locator("[data-testid='stMetricValue']")).to_have_text(
        re.compile(r"\(30, 2, 3, \d+, 64\)")
    )


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("prompt=Dogs+bark+loudly&step=1", first_request_shows_its_state)
