"""Presenter mode (`?present=1`) as a projector shows it: 1280×720, larger text, no sidebar.

The screenshots it leaves (artifacts/screenshots/presenter-*.png) are what an audience sees
of the first screen; look at them when the styling changes.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from harness.browser import (
    ARTIFACTS,
    CELL_NUMBERS,
    exceptions,
    key_selector,
    new_tab,
    open_app,
    rerun_after,
    wait_for_charts,
    wait_for_link,
)

SIZE = {"width": 1280, "height": 720}

STYLE_JS = """(selector) => {
    const element = document.querySelector(selector);
    return element ? parseFloat(getComputedStyle(element).fontSize) : null;
}"""
PARAGRAPH = "[data-testid='stMain'] [data-testid='stMarkdownContainer'] p"
CELL_TEXT = (
    f"{key_selector('scaled_dot_product.pipeline.weights.chart')} [data-testid='stPlotlyChart'] "
    + CELL_NUMBERS
)


def font_sizes(tab) -> dict[str, float]:
    return {
        "root": tab.evaluate(STYLE_JS, "html"),
        "paragraph": tab.evaluate(STYLE_JS, PARAGRAPH),
        "title": tab.evaluate(STYLE_JS, "[data-testid='stMain'] h1"),
        "cell": tab.evaluate(STYLE_JS, CELL_TEXT),
    }


def open_sdpa(browser, server, query: str):
    tab = new_tab(browser, **SIZE)
    open_app(tab, server.url, "scaled-dot-product", query)
    wait_for_charts(tab, key_selector("scaled_dot_product.pipeline.weights.chart"))
    return tab


@pytest.mark.e2e
def test_presenter_mode_enlarges_text_and_hides_the_sidebar(server, browser):
    normal = open_sdpa(browser, server, "")
    try:
        plain = font_sizes(normal)
        normal.screenshot(path=str(ARTIFACTS / "presenter-off-sdpa-1280x720.png"))
    finally:
        normal.context.close()

    presenting = open_sdpa(browser, server, "present=1")
    try:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        presenting.screenshot(path=str(ARTIFACTS / "presenter-sdpa-1280x720.png"))
        presenting.locator(
            key_selector("scaled_dot_product.pipeline.weights.chart")
        ).scroll_into_view_if_needed()
        presenting.screenshot(path=str(ARTIFACTS / "presenter-sdpa-weights-1280x720.png"))
        large = font_sizes(presenting)
        assert exceptions(presenting) == []
        for part in ("root", "paragraph", "title", "cell"):
            assert large[part] is not None and plain[part] is not None, (part, plain, large)
            # At least a fifth larger everywhere: readable from the back of a room.
            assert large[part] >= 1.2 * plain[part], (part, plain, large)
        sidebar = presenting.locator("[data-testid='stSidebar']")
        assert sidebar.get_attribute("data-collapsed") == "true"
        assert not presenting.locator("[data-testid='stToolbar']").is_visible()
        # The switch that turned it on is in the (collapsed) sidebar and reads "on".
        switch = presenting.locator(f"{key_selector('app.present')} input[type='checkbox']")
        assert switch.is_checked()
        assert "present=1" in presenting.url
    finally:
        presenting.context.close()


@pytest.mark.e2e
def test_presenter_steps_through_the_pipeline_with_the_arrow_keys(server, browser):
    tab = open_sdpa(browser, server, "present=1")
    try:
        output = key_selector("scaled_dot_product.pipeline.output.chart")
        weights = key_selector("scaled_dot_product.pipeline.weights.chart")
        assert tab.locator(output).count() == 1  # all five steps by default

        tab.locator("[data-testid='stMain'] h1").first.click()  # focus the page, not a widget
        with rerun_after(tab):
            tab.keyboard.press("ArrowLeft")
        expect(tab.locator(output)).to_have_count(0)
        expect(tab.locator(weights)).to_have_count(1)
        with rerun_after(tab):
            tab.keyboard.press("ArrowLeft")
        expect(tab.locator(weights)).to_have_count(0)
        wait_for_link(tab, has=("upto=3",))

        with rerun_after(tab):
            tab.keyboard.press("ArrowRight")
        wait_for_charts(tab, weights)
        expect(tab.locator(output)).to_have_count(0)
        wait_for_link(tab, has=("upto=4",))
        tab.locator(weights).scroll_into_view_if_needed()
        tab.screenshot(path=str(ARTIFACTS / "presenter-sdpa-step-4-1280x720.png"))
    finally:
        tab.context.close()
