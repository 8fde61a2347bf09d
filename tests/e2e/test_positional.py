"""The positional-encoding page in a real browser: a deep link sets the table, and moving the
base, d_model, the offset k or the sentence's width redraws the numbers the page writes.

Expected numbers come from the sinusoid's definition, written out here, not from the page's
code: PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)).
"""

from __future__ import annotations

import re

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
from tests.e2e.links import LinkState, expect_text


def sinusoids(num_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """PE, `(position, dimension)`, straight from the definition."""
    angle = np.arange(num_positions)[:, None] / base ** (2 * (np.arange(d_model) // 2) / d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))


def cell_texts(matrix: np.ndarray) -> list[str]:
    """How a heatmap writes its cells: 2 decimals, row by row, no "-0.00"."""
    return [f"{x:.2f}".replace("-0.00", "0.00") for x in matrix.ravel()]


def expect_cells(tab, title: str, matrix: np.ndarray) -> None:
    """Wait until the chart titled exactly `title` writes `matrix` in its cells."""
    wait_for_charts(tab)
    chart = tab.locator(PLOTLY_CHART).filter(
        has=tab.locator("text.gtitle", has_text=re.compile(f"^{re.escape(title)}$"))
    )
    expect(chart.locator(CELL_NUMBERS)).to_have_text(cell_texts(matrix))


def press(tab, key: str, arrow: str) -> None:
    """Move the slider with widget key `key` one step with the keyboard; wait for its rerun."""
    thumb = tab.locator(key_selector(key)).get_by_role("slider")
    thumb.scroll_into_view_if_needed()
    with rerun_after(tab):
        thumb.press(arrow)


@pytest.mark.e2e
def test_the_table_and_the_sentence_rows_follow_the_base_d_model_and_width(server, page):
    open_app(page, server.url, "positional", "d_model=4&positions=6&sentence=the+cat+sat")
    expect_cells(page, "PE: 6 positions × 4 dimensions", sinusoids(6, 4))
    # By hand, p = 1, d = 4: (sin 1, cos 1, sin 0.01, cos 0.01) = (0.84, 0.54, 0.01, 1.00).
    assert cell_texts(sinusoids(6, 4)[1]) == ["0.84", "0.54", "0.01", "1.00"]
    # Three words, width 4: the rows added to their embeddings are PE(0..2) at d = 4.
    expect_cells(page, "PE", sinusoids(3, 4))

    press(page, "positional.base", "ArrowLeft")  # 10000 -> 1000
    wait_for_link(page, has=("base=1000",), lacks=("base=10000",))
    expect_cells(page, "PE: 6 positions × 4 dimensions", sinusoids(6, 4, base=1000.0))

    press(page, "positional.d_model", "ArrowRight")  # 4 -> 6
    wait_for_link(page, has=("d_model=6", "base=1000"))
    expect_cells(page, "PE: 6 positions × 6 dimensions", sinusoids(6, 6, base=1000.0))

    # The sentence's rows use base 10000 whatever the table's base, and their own width.
    press(page, "positional.width", "ArrowRight")  # 4 -> 6
    wait_for_link(page, has=("width=6",))
    expect_cells(page, "PE", sinusoids(3, 6))
    assert exceptions(page) == []


@pytest.mark.e2e
def test_the_rotation_names_the_table_value_at_p_plus_k(server, page):
    open_app(page, server.url, "positional", "d_model=8&positions=16&position=3&offset=2&pair=1")
    value = page.get_by_text("Table value PE(", exact=False)
    pe = sinusoids(16, 8)
    expect(value).to_contain_text(f"PE(5)2,3 = ({pe[5, 2]:.6f}, {pe[5, 3]:.6f})")

    press(page, "positional.offset", "ArrowRight")  # k = 2 -> 3, so p + k = 6
    wait_for_link(page, has=("offset=3",))
    expect(value).to_contain_text(f"PE(6)2,3 = ({pe[6, 2]:.6f}, {pe[6, 3]:.6f})")
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_text(tab, "positional.sentence", "dogs chase cats")


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("sentence=dogs+chase+cats", first_request_shows_its_state)
