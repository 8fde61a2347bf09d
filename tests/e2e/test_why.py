"""The "Why attention?" page in a real browser: its slider reruns only its fragment, the link
follows it, and the counts and the diagram follow the number of tokens.
"""

import pytest
from playwright.sync_api import expect

from harness.browser import (
    CELL_NUMBERS,
    PLOTLY_CHART,
    exceptions,
    open_app,
    rerun_after,
    wait_for_charts,
    wait_for_link,
)
from tests.e2e.links import LinkState, expect_metric, expect_slider

SENTENCE = "The cat sat on the mat because it was warm".split()


@pytest.mark.e2e
def test_the_token_slider_reruns_its_fragment_and_the_link_follows(server, page):
    open_app(page, server.url, "", "n=4")
    thumb = page.get_by_role("slider", name="Tokens in the sentence")
    with rerun_after(page):
        thumb.press("ArrowRight")  # 4 → 5 tokens
    wait_for_link(page, has=("n=5",))
    # 5 tokens: 4 hops along an RNN's chain, one step between any pair, 5 × 5 query·key scores.
    expect_metric(page, "sequential steps", "4")
    expect_metric(page, "steps between any pair", "1")
    expect_metric(page, "scores computed", "25")
    # The diagram's two rows (the RNN's chain, attention's pairs) each name the first 5 tokens.
    wait_for_charts(page)
    expect(page.locator(f"{PLOTLY_CHART} {CELL_NUMBERS}")).to_have_text(SENTENCE[:5] * 2)
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_slider(tab, "why.n", "4")
    # 4 tokens: 4 × 4 query·key scores, and 3 sequential steps for an RNN.
    expect_metric(tab, "scores computed", "16")
    expect_metric(tab, "sequential steps", "3")


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("n=4", first_request_shows_its_state)
