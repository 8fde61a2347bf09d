"""Every registered page, opened in Chromium at its default settings, runs and draws its charts.

AppTest runs the scripts but never draws anything; here the charts must exist in the browser
as drawn SVG, and no page may show an exception or an error box. A screenshot of each page is
kept under artifacts/screenshots/ (see the `page` fixture).
"""

import pytest
from playwright.sync_api import expect

from harness.app_pages import registered_pages
from harness.browser import (
    PLOTLY_CHART,
    TRACE_DRAWN,
    active_page_title,
    exceptions,
    open_app,
    wait_for_visible_charts,
)

PAGES = registered_pages()
ERROR_BOX = "[data-testid='stAlertContentError']"
# Each drawn chart: the margins the server sent (ui.margins reserves them from the labels) and
# the ones Plotly's automargin settled on after measuring, and whether tick labels were turned
# sideways (Plotly does that when a column is too narrow for them: not foreseeable server-side).
MARGINS_JS = r"""() => [...document.querySelectorAll('.js-plotly-plot')]
  .filter((chart) => chart._fullLayout && chart._fullLayout._size && chart.offsetParent)
  .map((chart) => {
    const sent = chart.layout.margin || {};
    const used = chart._fullLayout._size;
    return {
      name: chart.closest('[aria-label]')?.getAttribute('aria-label')?.slice(0, 60) ?? '',
      sent: ['l', 'r', 't', 'b'].map((side) => sent[side] ?? 0),
      used: ['l', 'r', 't', 'b'].map((side) => Math.round(used[side])),
      turned: [...chart.querySelectorAll('.xtick text')].some(
        (label) => /rotate\((?!0[,)])/.test(label.getAttribute('transform') || '')),
    };
  })"""


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
    # The chart that loads Plotly early (ui.layout) is there, and nobody sees or reaches it.
    preload = page.locator(".st-key-plotly_preload")
    expect(preload).to_have_count(1)
    expect(preload).to_be_hidden()

    assert redrawn_charts(page) == []


@pytest.mark.e2e
@pytest.mark.parametrize("registered", PAGES, ids=[p.url_path for p in PAGES])
def test_presenter_mode_charts_are_drawn_once_too(server, page, registered):
    # Presenter mode's 20 px type makes every label larger: the margins must follow.
    open_app(page, server.url, "" if registered.default else registered.url_path, "present=1")
    assert wait_for_visible_charts(page) >= 1
    assert exceptions(page) == []
    assert redrawn_charts(page) == []


def redrawn_charts(page) -> list[dict]:
    """Charts that needed wider margins than were reserved for them (ui/margins.py), so Plotly
    drew, measured and drew them again; labels turned sideways excepted."""
    charts = page.evaluate(MARGINS_JS)
    assert charts
    return [
        chart
        for chart in charts
        if not chart["turned"]
        and any(used > sent + 1 for used, sent in zip(chart["used"], chart["sent"], strict=True))
    ]
