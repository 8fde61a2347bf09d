"""The "Why a head attends there" page in Chromium: its default link names the previous-token
head behind SmolLM2's induction head and draws both sides' charts; the head slider changes the
split and the link.

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

PROMPT = "Dogs bark loudly and dogs bark"


@pytest.fixture(scope="module")
def weights():
    """transformers' attention weights of every head on PROMPT, `(layer, head, n, n)`."""
    hf, tokenizer = smollm2_or_skip()
    ids = tokenizer(PROMPT, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = hf(ids, output_attentions=True, use_cache=False)
    return np.stack([a[0].double().numpy() for a in out.attentions])


@pytest.mark.e2e
def test_the_default_link_names_the_cause_and_draws_both_sides(server, page):
    open_app(page, server.url, "attends")
    wait_for_charts(page, key_selector("attends.key_side"))
    wait_for_charts(page, key_selector("attends.query_side"))
    expect(page.get_by_text(re.compile(
        r"Layer 19, head 7 attends from ‘ the’ to ‘ lazy’ mostly because of what layer 17 "
        r"head 1 wrote at ‘ lazy’"
    ))).to_be_visible()  # fmt: skip
    wait_for_charts(page, key_selector("attends.pattern"))
    assert exceptions(page) == []


@pytest.mark.e2e
def test_the_head_slider_changes_the_split_and_the_link(server, page, weights):
    open_app(page, server.url, "attends", "prompt=Dogs+bark+loudly+and+dogs+bark")
    wait_for_charts(page, key_selector("attends.key_side"))
    thumb = page.locator(f"{key_selector('attends.head')} input[type='range']")
    with rerun_after(page):
        thumb.focus()
        thumb.press("ArrowLeft")
    wait_for_link(page, has=("head=6",))
    row = weights[18, 5, -1]  # layer 19, head 6 (from 1), the last query
    key = 1 + int(np.argmax(row[1:]))
    said = page.get_by_text(re.compile(r"Layer 19, head 6 gives .* a weight of"))
    expect(said).to_be_visible()
    shown = float(re.search(r"a weight of ([\d.]+)", said.inner_text())[1])
    assert shown == pytest.approx(row[key], abs=2e-3)
    assert f"(token {key + 1})" in said.inner_text()
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_text(tab, "attends.prompt", PROMPT)
    expect_slider(tab, "attends.head", "3")
    expect(tab.get_by_text(re.compile(r"Layer 19, head 3 gives"))).to_be_visible()


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState(
    "prompt=Dogs+bark+loudly+and+dogs+bark&head=3", first_request_shows_its_state
)
