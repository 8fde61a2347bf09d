"""The "Why attention?" page in a real browser: its slider reruns only its fragment, and the
link follows it.
"""

import pytest
from playwright.sync_api import expect

from harness.browser import exceptions, open_app, rerun_after, wait_for_link


def expect_metric(tab, label: str, value: str) -> None:
    metric = tab.locator("[data-testid='stMetric']").filter(has_text=label)
    expect(metric.locator("[data-testid='stMetricValue']")).to_have_text(value)


@pytest.mark.e2e
def test_the_token_slider_reruns_its_fragment_and_the_link_follows(server, page):
    open_app(page, server.url, "", "n=4")
    thumb = page.get_by_role("slider", name="Tokens in the sentence")
    with rerun_after(page):
        thumb.press("ArrowRight")  # 4 → 5 tokens
    wait_for_link(page, has=("n=5",))
    # 5 tokens: 4 hops along an RNN's chain, 5 × 5 query·key scores.
    expect_metric(page, "sequential steps", "4")
    expect_metric(page, "scores computed", "25")
    assert exceptions(page) == []
