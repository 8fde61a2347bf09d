"""A deep link opened as the very first request to a freshly started server.

While a `pages/` folder exists, Streamlit starts every server in its legacy multipage mode: the
first script run looks the requested page up among the files of `pages/` (by file stem) before
`app.py` has had a chance to call `st.navigation`. app.py gives no page a url_path equal to its
file's stem, so that lookup misses and app.py runs. Here each page's link, carrying some view
state, is the first thing its own fresh server ever answers (the situation of a QR code on a
slide after the server restarted), and the browser must show the router (the sidebar menu and
the presenter switch app.py draws), the right page, that page's state, and no dialog. Which
state, and how to see it, each page says in its own browser test (`FIRST_REQUEST` in
tests/e2e/test_<id>.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from harness.app_pages import registered_pages
from harness.browser import (
    StreamlitServer,
    active_page_title,
    exceptions,
    key_selector,
    open_app,
)
from tests.e2e.links import LinkState
from ui.pages import PageRecord

PAGES = registered_pages()


def first_request(record: PageRecord) -> LinkState:
    """The state a page's link carries and how its page shows it: `FIRST_REQUEST` in the page's
    own browser test, tests/e2e/test_<id>.py (a new page brings its own)."""
    module = importlib.import_module(f"tests.e2e.test_{record.id}")
    return module.FIRST_REQUEST


@pytest.fixture(scope="module")
def fresh_servers(request) -> Iterator[dict[str, StreamlitServer]]:
    """One never-visited server per selected page, all booting at once to keep it quick."""
    selected = {
        item.callspec.params["registered"].url_path
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    servers = {path: StreamlitServer(wait=False) for path in sorted(selected)}
    try:
        yield servers
    finally:
        for running in servers.values():
            running.close()


@pytest.mark.e2e
@pytest.mark.parametrize("registered", PAGES, ids=[p.url_path for p in PAGES])
def test_deep_link_as_first_request_shows_the_page_and_its_state(fresh_servers, page, registered):
    fresh = fresh_servers[registered.url_path]
    fresh.wait_healthy()
    state = first_request(registered)
    # The default page's link is the root: that is the URL its view gives to copy.
    path = "" if registered.default else registered.url_path
    open_app(page, fresh.url, path, state.query)

    assert exceptions(page) == []
    # app.py ran: its presenter switch and the sectioned menu of st.navigation are there.
    assert page.locator(key_selector("app.present")).count() == 1
    nav = page.locator("[data-testid='stSidebarNav']")
    assert "The mechanism" in nav.inner_text()
    current = page.locator("[data-testid='stSidebarNavLink'][aria-current='page']")
    expect(current).to_contain_text(registered.title)
    assert active_page_title(page) == registered.title
    assert page.url.split("?")[0].rstrip("/") == f"{fresh.url}/{path}".rstrip("/")
    state.check(page)
    for part in filter(None, state.query.split("&")):
        assert part in page.url, f"the link lost {part}: {page.url}"
    # Last, so a failure here means everything above was right: Streamlit's legacy first run
    # answers a url_path it cannot find among pages/ with a "Page not found" dialog, even
    # though app.py then shows the right page; the app must not leave that dialog up.
    expect(page.locator("[role='dialog']")).to_have_count(0, timeout=15_000)
