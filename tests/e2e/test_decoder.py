"""The decoder page in Chromium: a click on "Next token" generates one, and its link reopens it.

The greedy token itself is checked against transformers in tests/test_llama.py; here the page
must append it, grow the cache by one position, and write a link that shows the same text.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from harness.browser import (
    exceptions,
    new_tab,
    open_app,
    rerun_after,
    wait_for_link,
)

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
