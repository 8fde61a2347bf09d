"""A page's link as the very first request to a freshly started server: the state the link
carries (`LinkState.query`) and how to see it on the page (`LinkState.check`). Every page's own
browser test, tests/e2e/test_<id>.py, defines its `FIRST_REQUEST`; test_navigation.py opens each.

The widgets draw their values after the run has finished, so each check waits for the value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from playwright.sync_api import expect

from harness.browser import key_selector


@dataclass(frozen=True)
class LinkState:
    query: str
    check: Callable[[object], None]


def expect_slider(tab, key: str, value: str) -> None:
    thumb = tab.locator(f"{key_selector(key)} input[type='range']").first
    expect(thumb).to_have_attribute("aria-valuetext", value)


def expect_text(tab, key: str, value: str) -> None:
    expect(tab.locator(f"{key_selector(key)} input, {key_selector(key)} textarea")).to_have_value(
        value
    )


def expect_metric(tab, label: str, value: str) -> None:
    metric = tab.locator("[data-testid='stMetric']").filter(has_text=label)
    expect(metric.locator("[data-testid='stMetricValue']")).to_have_text(value)
