"""The "What carries the answer" page in Chromium: its link opens the pair, the residual map
and the head maps; the head slider changes the chosen head and the link; a corrupted prompt of
another length gets a sentence with both token lists.

Expected numbers come from transformers on the same weights (tests/hf_models.py).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from harness.browser import (
    exceptions,
    key_selector,
    open_app,
    rerun_after,
    wait_for_charts,
    wait_for_link,
)
from tests.e2e.links import LinkState, expect_slider
from tests.hf_models import smollm2_or_skip

torch = pytest.importorskip("torch")

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPT = "When Mary and John went to the store, Mary gave a drink to"


@pytest.fixture(scope="module")
def expected_lds():
    """transformers' LD = logit(" Mary") − logit(" John") after both default prompts."""
    hf, tokenizer = smollm2_or_skip()
    (mary,), (john,) = (tokenizer(t, add_special_tokens=False)["input_ids"]
                        for t in (" Mary", " John"))  # fmt: skip
    lds = []
    for text in (CLEAN, CORRUPT):
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = hf(ids, use_cache=False).logits[0, -1].double()
        lds.append(float(logits[mary] - logits[john]))
    return lds


@pytest.mark.e2e
def test_the_default_link_shows_the_pair_the_maps_and_the_top_head(server, page, expected_lds):
    open_app(page, server.url, "patching")
    wait_for_charts(page, key_selector("patching.resid"))
    sentence = page.get_by_text(re.compile("LD_clean = ")).inner_text()
    shown = [float(x) for x in re.findall(r"LD_(?:clean|corrupt) = ([+-][\d.]+)", sentence)]
    assert shown == pytest.approx(expected_lds, abs=2e-3)
    expect(
        page.get_by_text(re.compile("The last token carries it from after layer"))
    ).to_be_visible()
    wait_for_charts(page, key_selector("patching.heads_every"))
    expect(page.get_by_text(re.compile(r"The top head is layer 24, head 4"))).to_be_visible()
    assert exceptions(page) == []


@pytest.mark.e2e
def test_the_head_slider_changes_the_head_and_the_link(server, page):
    open_app(page, server.url, "patching")
    wait_for_charts(page, key_selector("patching.head_clean"))
    thumb = page.locator(f"{key_selector('patching.head')} input[type='range']")
    with rerun_after(page):
        thumb.focus()
        thumb.press("ArrowLeft")
    wait_for_link(page, has=("head=3",))
    expect(page.get_by_text(re.compile(r"Layer 24, head 3 restores -?[\d.]+%"))).to_be_visible()
    assert exceptions(page) == []


@pytest.mark.e2e
def test_prompts_of_different_lengths_get_a_sentence_with_both_token_lists(server, page):
    open_app(
        page, server.url, "patching", "corrupt=When+Mary+went+to+the+store,+Mary+gave+a+drink+to"
    )
    message = page.get_by_text(re.compile("The clean prompt has 14 tokens and the corrupted one"))
    expect(message).to_be_visible()
    assert "Clean: “When” · “ Mary”" in message.inner_text()
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_slider(tab, "patching.layer", "30")
    expect_slider(tab, "patching.head", "2")
    expect(tab.get_by_text(re.compile(r"Layer 30, head 2 restores 26\.\d%"))).to_be_visible(
        timeout=120_000
    )


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("layer=30&head=2", first_request_shows_its_state)
