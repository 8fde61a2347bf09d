"""Every registered page, opened in Chromium at its default settings, runs and draws its charts.

AppTest runs the scripts but never draws anything; here the charts must exist in the browser
as drawn SVG, and no page may show an exception or an error box. A screenshot of each page is
kept under artifacts/screenshots/ (see the `page` fixture).
"""

import pytest
from playwright.sync_api import expect

from tests.app_pages import registered_pages
from tests.e2e.streamlit_browser import (
    PLOTLY_CHART,
    TRACE_DRAWN,
    active_page_title,
    exceptions,
    open_app,
    wait_for_visible_charts,
)

PAGES = registered_pages()
ERROR_BOX = "[data-testid='stAlertContentError']"


@pytest.mark.e2e
@pytest.mark.parametrize("registered", PAGES, ids=[p.url_path for p in PAGES])
def test_page_loads_without_errors_and_draws_its_charts(server, page, registered):
    open_app(page, server.url, "" if registered.default else registered.url_path)

    assert exceptions(page) == []
    assert page.locator(ERROR_BOX).all_inner_texts() == []
    current = page.locator("[data-testid='stSidebarNavLink'][aria-current='page']")
    expect(current).to_contain_text(registered.title)
    assert active_page_title(page) == registered.title

    # The main chart is the page's first one; then every chart the reader can see must draw.
    main_chart = page.locator(PLOTLY_CHART).first
    main_chart.wait_for(state="attached")
    main_chart.locator(TRACE_DRAWN).first.wait_for(state="attached")
    assert wait_for_visible_charts(page) >= 1
    assert exceptions(page) == []
