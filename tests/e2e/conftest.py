"""Fixtures for the browser tests: servers, Chromium, and a tab that leaves a screenshot.

The machinery (starting servers, waiting for script runs, typing into the data editor) lives
in harness/browser.py, shared with the browser benchmarks in bench/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from harness.browser import (
    ARTIFACTS,
    TIMEOUT_MS,
    StreamlitServer,
    full_page_screenshot,
    launch_chromium,
    new_tab,
    open_app,
)

# A rerun on a busy machine can take far longer than Playwright's default 5 s.
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="session")
def server(browser) -> Iterator[StreamlitServer]:
    """One server shared by the tests that do not need a fresh one.

    It answers one visit to the home page before any test: a server's very first request is
    special (see test_navigation.py), and only the tests written for that case should meet it.
    """
    running = StreamlitServer()
    warm = new_tab(browser)
    try:
        open_app(warm, running.url)
    finally:
        warm.context.close()
    yield running
    running.close()


@pytest.fixture
def fresh_server() -> Iterator[StreamlitServer]:
    """A server that has answered nobody yet: its first request decides legacy-mode traps."""
    running = StreamlitServer()
    yield running
    running.close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        try:
            chromium = launch_chromium(playwright)
        except RuntimeError as error:
            pytest.fail(str(error))
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request):
    """A fresh tab (its own session) at 1280×900; a full-page screenshot is kept in artifacts/."""
    tab = new_tab(browser)
    yield tab
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    try:
        full_page_screenshot(tab, ARTIFACTS / f"{name}.png")
    finally:
        tab.context.close()
