"""The "What heads do" page in Chromium: its link opens the lens, the attribution and the probes
for the prompt it carries; the token box and the head slider change them and the link.

Expected numbers come from transformers on the same weights (tests/hf_models.py).
"""

from __future__ import annotations

import re

import numpy as np
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
from tests.e2e.links import LinkState, expect_slider, expect_text
from tests.hf_models import smollm2_or_skip

torch = pytest.importorskip("torch")

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def expected():
    """transformers' next-token probabilities after the prompt."""
    hf, tokenizer = smollm2_or_skip()
    ids = tokenizer(PROMPT, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = hf(ids, use_cache=False).logits[0, -1].double()
    return torch.softmax(logits, 0).numpy(), tokenizer


def caption(tab, has: str) -> str:
    return tab.locator("[data-testid='stCaptionContainer']").filter(has_text=has).inner_text()


@pytest.mark.e2e
def test_the_link_opens_the_lens_and_the_attribution_of_its_prompt(server, page, expected):
    probs, tokenizer = expected
    top = int(np.argmax(probs))
    name = tokenizer.decode([top])
    assert name == " Paris"
    open_app(page, server.url, "heads", "prompt=The+capital+of+France+is")
    wait_for_charts(page, key_selector("heads.lens"))
    expect(page.get_by_text("the model's likeliest next token is “ Paris”")).to_be_visible()
    lens = caption(page, "after the embedding and")
    shown = float(re.search(r"and ([\d.]+) after layer 30", lens)[1])
    assert shown == pytest.approx(probs[top], abs=1e-3)
    assert "it is the likeliest from layer 30 on" in lens
    # The parts of the logit, as written, add up to it.
    split = caption(page, "the logit itself")
    parts = [float(x) for x in re.findall(r"(?:Embedding|heads|MLPs) ([+-][\d.]+)", split)]
    total = float(re.search(r"together ([+-][\d.]+)", split)[1])
    assert sum(parts) == pytest.approx(total, abs=2e-3)
    # The role maps: a chart per role (small multiples), the first keyed heads.roles.0.
    wait_for_charts(page, key_selector("heads.roles.0"))
    assert exceptions(page) == []


@pytest.mark.e2e
def test_the_token_box_and_the_head_slider_change_the_view_and_the_link(server, page, expected):
    probs, tokenizer = expected
    (rome,) = tokenizer(" Rome", add_special_tokens=False)["input_ids"]
    open_app(page, server.url, "heads", "prompt=The+capital+of+France+is")
    wait_for_charts(page, key_selector("heads.lens"))
    box = page.locator(f"{key_selector('heads.token')} input")
    with rerun_after(page):
        box.fill(" Rome")
        box.press("Enter")
    wait_for_link(page, has=("token=", "Rome"))
    lens = caption(page, "“ Rome”: ")
    shown = float(re.search(r"and ([\d.]+) after layer 30", lens)[1])
    assert shown == pytest.approx(probs[rome], abs=1e-3)

    thumb = page.locator(f"{key_selector('heads.head')} input[type='range']")
    with rerun_after(page):
        thumb.focus()
        thumb.press("ArrowLeft")
    wait_for_link(page, has=("head=4",))
    expect(page.get_by_text(re.compile(r"Layer 24, head 4 adds [+-]"))).to_be_visible()
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_text(tab, "heads.prompt", "Dogs bark loudly")
    expect_slider(tab, "heads.head", "3")
    expect(tab.get_by_text(re.compile(r"Layer 24, head 3 adds [+-]"))).to_be_visible()


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("prompt=Dogs+bark+loudly&head=3", first_request_shows_its_state)
