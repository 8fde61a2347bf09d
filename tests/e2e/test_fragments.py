"""Controls inside a fragment, in a real browser: only the fragment reruns, and the link follows.

AppTest reruns the whole script for every change, so the fragment-only rerun (where the page's
closing `sync_url` does not run) can only be seen here.
"""

import pytest
from playwright.sync_api import expect

from harness.browser import exceptions, open_app, rerun_after, wait_for_link


@pytest.mark.e2e
def test_masking_lab_leak_scale_reruns_its_fragment_and_updates_the_link(server, page):
    open_app(page, server.url, "masking", "n=4")
    slider = page.get_by_role("slider", name="Score scale")
    slider.scroll_into_view_if_needed()
    with rerun_after(page):
        slider.press("ArrowRight")  # 1e4 → 3e4
    # The page-level parameter from the link stays, the fragment's own joins it.
    wait_for_link(page, has=("n=4", "scale=3e4"))
    expect(page.get_by_text("Scale 3e4, float16:", exact=False)).to_be_visible()
    assert exceptions(page) == []


@pytest.mark.e2e
def test_multi_head_split_choice_reruns_its_fragment_and_updates_the_link(server, page):
    open_app(page, server.url, "multi-head", "heads=2")
    choice = page.get_by_role("radiogroup", name="Show the split of").get_by_text("V", exact=True)
    choice.scroll_into_view_if_needed()
    with rerun_after(page):
        choice.click()
    wait_for_link(page, has=("heads=2", "split=V"))
    expect(page.get_by_text("split_heads(V):", exact=False).first).to_be_attached()
    assert exceptions(page) == []
