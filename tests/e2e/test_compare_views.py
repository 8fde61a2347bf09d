""" "Compare two views" in Chromium, on the masking lab: open it, read the three maps, follow the
link, and pass axe-core with the comparison open.

Expected numbers come from the one-line NumPy formula softmax(QKᵀ/√4 [masked with −∞]) on the
page's seeded Q, K (`default_rng(0).standard_normal((3, 6, 4))`), written out here.
"""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import expect

from harness.browser import (
    CELL_NUMBERS,
    PLOTLY_CHART,
    exceptions,
    key_selector,
    open_app,
    rerun_after,
    wait_for_charts,
    wait_for_link,
)
from tests.e2e.test_accessibility import axe_violations, violation_report

COMPARE = key_selector("masking.cmp")
N = 6


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def causal_off_and_on() -> tuple[np.ndarray, np.ndarray]:
    q, k, _ = np.random.default_rng(0).standard_normal((3, N, 4))
    scores = q @ k.T / 2.0
    return softmax_rows(scores), softmax_rows(
        np.where(np.tril(np.ones((N, N), bool)), scores, -np.inf)
    )


def drawn_cells(tab, index: int) -> np.ndarray:
    """The numbers written in the cells of the comparison's `index`-th map (A, B, B − A)."""
    chart = tab.locator(f"{COMPARE} {PLOTLY_CHART}").nth(index)
    texts = chart.locator(CELL_NUMBERS).all_text_contents()
    return np.array([float(t.replace("−", "-")) for t in texts]).reshape(N, N)


@pytest.mark.e2e
def test_masking_compare_opens_shows_the_difference_and_passes_axe(server, page):
    open_app(page, server.url, "masking")
    # Closed at first: the page draws no more charts than before.
    assert page.locator(f"{COMPARE} {PLOTLY_CHART}").count() == 0
    with rerun_after(page):
        page.locator(f"{COMPARE} summary").click()
    wait_for_charts(page, COMPARE, minimum=3)
    off, on = causal_off_and_on()
    # Cells are written with 2 decimals.
    np.testing.assert_allclose(drawn_cells(page, 0), off, atol=5e-3)
    np.testing.assert_allclose(drawn_cells(page, 1), on, atol=5e-3)
    np.testing.assert_allclose(drawn_cells(page, 2), on - off, atol=5e-3)
    i, j = np.unravel_index(np.abs(on - off).argmax(), off.shape)
    words = ("the", "cat", "sat", "on", "the", "mat")
    expect(page.locator(COMPARE)).to_contain_text(
        f"query {i + 1} “{words[i]}” → key {j + 1} “{words[j]}”"
    )
    # The difference map's accessible name (its alt text) carries the same sentence.
    described = "[aria-label^='B − A'][aria-label*='The largest change']"
    expect(page.locator(f"{COMPARE} {described}")).to_have_count(1)
    assert "cmp=1" in wait_for_link(page, has=("cmp=1",))
    assert exceptions(page) == []

    violations = axe_violations(page)
    assert not violations, "axe-core on /masking?cmp=1:\n" + violation_report(violations)


# Every page with a comparison, opened from its link (its widget keys carry its id).
COMPARING_PAGES = ("scaled-dot-product", "masking", "multi-head", "positional", "pretrained")


@pytest.mark.e2e
@pytest.mark.parametrize("url_path", COMPARING_PAGES)
def test_an_open_comparison_passes_axe_on_every_page(server, page, url_path):
    open_app(page, server.url, url_path, "cmp=1")
    scope = key_selector(f"{url_path.replace('-', '_')}.cmp")
    wait_for_charts(page, scope, minimum=3)
    expect(page.locator(scope)).to_contain_text("What differs most.")
    assert exceptions(page) == []
    violations = axe_violations(page)
    assert not violations, f"axe-core on /{url_path}?cmp=1:\n" + violation_report(violations)
