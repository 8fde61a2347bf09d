"""The sidebar's "Copy link to this view" puts the current view's URL on the clipboard."""

import pytest

from harness.browser import open_app, rerun_after


@pytest.mark.e2e
def test_copy_link_copies_the_view_as_it_is_now(server, page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    open_app(page, server.url, "", "n=4")
    page.get_by_role("button", name="Copy link to this view").click()
    page.get_by_role("button", name="Link copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == f"{server.url}/?n=4"

    # After a change the link follows the view: the slider moves one step left from 4.
    with rerun_after(page):
        page.get_by_role("slider", name="Tokens in the sentence").press("ArrowLeft")
    page.get_by_role("button", name="Copy link to this view").click()
    page.get_by_role("button", name="Link copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == f"{server.url}/?n=3"
