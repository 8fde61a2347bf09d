"""The masking lab in a real browser: a deep link's mask, another kind added in the multiselect,
and the window widened with the keyboard, each checked on the heatmaps' numbers and the badges.

Q, K, V are `default_rng(seed).standard_normal((3, n, 4))` (the page's example, seed 0), so every
expected number is the one-line formula softmax(QKᵀ/√4, −∞ where blocked) over those, written
the way the heatmaps write it (2 decimals, −∞ for a blocked score).
"""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import expect

from harness.browser import (
    CELL_NUMBERS,
    PLOTLY_CHART,
    TIMEOUT_MS,
    exceptions,
    key_selector,
    open_app,
    rerun_after,
    wait_for_link,
    wait_for_visible_charts,
)
from tests.e2e.links import LinkState, expect_slider

N = 4
Q, K, _ = np.random.default_rng(0).standard_normal((3, N, 4))
SCALED = Q @ K.T / 2.0  # √d_k = √4
QUERY, KEY = np.indices((N, N))
# The link's mask: causal, with position 1 (0-based 0) padding, so query 1 sees nothing.
CAUSAL_AND_PAD_1 = (KEY <= QUERY) & (KEY != 0)


def weights(allowed: np.ndarray) -> np.ndarray:
    """softmax over the allowed keys of each row; a row with none is all zeros."""
    scores = np.where(allowed, SCALED, -np.inf)
    top = np.where(allowed.any(axis=1), scores.max(axis=1), 0.0)[:, None]
    exp = np.where(allowed, np.exp(scores - top), 0.0)
    total = exp.sum(axis=1, keepdims=True)
    return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def chart_numbers(tab, title: str):
    """The numbers written in the cells of the heatmap titled `title`."""
    chart = tab.locator(PLOTLY_CHART).filter(has=tab.locator(".gtitle", has_text=title))
    return chart.locator(CELL_NUMBERS)


def expect_weights(tab, allowed: np.ndarray) -> None:
    shown = chart_numbers(tab, "Weights with the mask")
    expect(shown).to_have_text([f"{w:.2f}" for w in weights(allowed).ravel()], timeout=TIMEOUT_MS)


def badges(tab) -> str:
    markdown = tab.locator("[data-testid='stMarkdownContainer']")
    return markdown.filter(has_text="Each row of the masked weights sums to").inner_text()


@pytest.mark.e2e
def test_a_deep_link_mask_then_a_window_added_and_widened(server, page):
    open_app(page, server.url, "masking", "n=4&kinds=causal,padding&pad=1")
    wait_for_visible_charts(page)
    # The masked scores: −∞ on the blocked cells, q·k/√4 on the others.
    scores = [
        f"{SCALED[i, j]:.2f}" if CAUSAL_AND_PAD_1[i, j] else "−∞"
        for i in range(N)
        for j in range(N)
    ]
    expect(chart_numbers(page, "Masked scores")).to_have_text(scores)
    expect_weights(page, CAUSAL_AND_PAD_1)
    # By hand: query 2 sees only key 2 (key 1 is the pad), so its whole weight is there.
    assert weights(CAUSAL_AND_PAD_1)[1].tolist() == [0.0, 1.0, 0.0, 0.0]
    shown = badges(page)
    assert "1 <pad>: Σ = 0, fully masked" in shown
    assert all(
        f"{i} {word}: Σ = 1.0000" in shown for i, word in ((2, "cat"), (3, "sat"), (4, "on"))
    )
    assert shown.count("Σ = 1.0000") == 3

    # Add the sliding window (width 2 by default): each query also loses every key before i − 1.
    kinds = page.locator(key_selector("masking.kinds"))
    kinds.locator("input").click()
    with rerun_after(page):
        page.get_by_role("option", name="Sliding window").click()
    page.keyboard.press("Escape")
    wait_for_link(page, has=("kinds=causal%2Cpadding%2Cwindow",))
    windowed = CAUSAL_AND_PAD_1 & (QUERY - KEY < 2)
    expect_weights(page, windowed)
    assert badges(page).count("Σ = 1.0000") == 3

    # Widen it to 3 with the keyboard: query 4 sees keys 2..4 again.
    slider = page.get_by_role("slider", name="Window width w")
    slider.scroll_into_view_if_needed()
    with rerun_after(page):
        slider.press("ArrowRight")
    wait_for_link(page, has=("window=3",))
    wider = CAUSAL_AND_PAD_1 & (QUERY - KEY < 3)
    assert not np.array_equal(weights(wider), weights(windowed))
    expect_weights(page, wider)
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_slider(tab, "masking.n", "4")


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("n=4", first_request_shows_its_state)
