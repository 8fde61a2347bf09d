"""The cost page in Chromium: a deep link's online softmax, its block size, the KV-cache counts and
a measurement's FLOPs, each against numbers worked out here from the definitions.

The page's seeded examples are standard normal draws from `np.random.default_rng(seed)`: the
online softmax reads Q's first row against (keys, 2) keys and values, the KV-cache section
decodes (tokens, 4) queries, keys and values (as in tests/test_page_cost.py). Timings are never
asserted, only what follows from n and d.
"""

from __future__ import annotations

import time

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
from tests.e2e.links import LinkState, expect_slider

DATAFRAME = "[data-testid='stDataFrame']"
# A go.Heatmap's own cell text (texttemplate), as the online-softmax figure writes it.
HEATMAP_TEXT = "g.heatmap-label text"


def chart(tab, title: str):
    """The drawn chart whose title starts with `title`."""
    wait_for_charts(tab)
    return tab.locator(PLOTLY_CHART).filter(has=tab.locator(".gtitle", has_text=title))


def table(tab, column: str, timeout_s: float = 30.0) -> list[dict[str, str]]:
    """The rows of the table with a `column` header, from the accessible table the grid keeps
    behind its canvas (drawn once the grid has been on screen). Looked for again until
    `timeout_s`: the page's grids may still be arriving when the first chart is drawn."""
    deadline = time.monotonic() + timeout_s
    while True:
        grids = tab.locator(DATAFRAME)
        for i in range(grids.count()):
            grid = grids.nth(i)
            grid.scroll_into_view_if_needed()
            expect(grid.locator("th").first).to_be_attached()
            names = grid.locator("th").all_text_contents()
            if column in names:
                expect(grid.locator("td").first).to_be_attached()
                cells = grid.locator("td").all_text_contents()
                return [
                    dict(zip(names, cells[start : start + len(names)], strict=True))
                    for start in range(0, len(cells), len(names))
                ]
        if time.monotonic() > deadline:
            raise AssertionError(f"no table with a {column!r} column")
        tab.wait_for_timeout(250)


def metric(tab, label: str):
    found = tab.locator("[data-testid='stMetric']").filter(has_text=label)
    return found.locator("[data-testid='stMetricValue']")


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def online_cells(scores: np.ndarray, block: int) -> list[str]:
    """The figure's cells: after each block the softmax over the keys read so far ("not read"
    after them), then the full softmax; three decimals."""
    n = len(scores)
    rows = []
    for stop in [*range(block, n, block), n]:
        rows.append([*softmax(scores[:stop]), *[None] * (n - stop)])
    rows.append(list(softmax(scores)))
    return ["not read" if w is None else f"{w:.3f}" for row in rows for w in row]


@pytest.mark.e2e
def test_online_softmax_from_a_link_and_a_new_block_size(server, page):
    open_app(page, server.url, "cost", "keys=7&seed=5")
    q, k, v = np.random.default_rng(5).standard_normal((3, 7, 2))
    scores = k @ q[0] / np.sqrt(2)  # the query's scaled scores against the 7 keys
    figure = chart(page, "The weights the running state implies")
    # Blocks of 3 (the default): k1–k3, k4–k6, k7, then the full softmax.
    expect(figure.locator(HEATMAP_TEXT)).to_have_text(online_cells(scores, 3))
    output = softmax(scores) @ v
    rows = {row["output"]: row for row in table(page, "d1")}
    for name in ("chunked, o_T / l_T", "full softmax"):
        shown = [float(rows[name]["d1"]), float(rows[name]["d2"])]
        np.testing.assert_allclose(shown, output, rtol=1e-12)

    slider = page.locator(key_selector("cost.block")).get_by_role("slider")
    slider.scroll_into_view_if_needed()
    with rerun_after(page):
        slider.press("ArrowRight")  # 3 → 4 keys per block
    wait_for_link(page, has=("keys=7", "seed=5", "block=4"))
    expect(figure.locator(HEATMAP_TEXT)).to_have_text(online_cells(scores, 4))
    expect(figure.locator(".ytick text")).to_have_text(
        ["after block 1 (k1–k4)", "after block 2 (k5–k7)", "full softmax"]
    )
    assert exceptions(page) == []


@pytest.mark.e2e
def test_kv_cache_counts_and_weights_follow_the_tokens_slider(server, page):
    open_app(page, server.url, "cost", "decode=4")
    expect(metric(page, "q·k products with the cache")).to_have_text("10")  # 1 + 2 + 3 + 4
    expect(metric(page, "without it")).to_have_text("30")  # 1 + 4 + 9 + 16
    slider = page.get_by_role("slider", name="Tokens generated")
    slider.scroll_into_view_if_needed()
    with rerun_after(page):
        slider.press("ArrowRight")  # 4 → 5 tokens
    wait_for_link(page, has=("decode=5",))
    n = 5
    # Step t scores the new query against t cached keys; without the cache, t queries × t keys.
    expect(metric(page, "q·k products with the cache")).to_have_text(
        str(sum(t for t in range(1, n + 1)))
    )
    expect(metric(page, "without it")).to_have_text(str(sum(t * t for t in range(1, n + 1))))

    q, k, _ = np.random.default_rng(0).standard_normal((3, n, 4))
    scores = q @ k.T / 2  # √4 = 2
    cells = chart(page, "Weights built one decoding step").locator(CELL_NUMBERS)
    expect(cells).to_have_count(n * n)
    shown = cells.all_text_contents()
    for t in range(n):
        row = shown[t * n : (t + 1) * n]
        assert row[t + 1 :] == ["−∞"] * (n - t - 1)  # not in the cache yet
        expected = softmax(scores[t, : t + 1])
        np.testing.assert_allclose([float(x) for x in row[: t + 1]], expected, atol=0.0051)
    assert exceptions(page) == []


@pytest.mark.e2e
def test_a_measurement_counts_four_n_squared_d_flops(server, page):
    open_app(page, server.url, "cost", "n_max=256&d=16")
    with rerun_after(page):
        page.get_by_role("button", name="Measure", exact=True).click()
    rows = table(page, "FLOPs")
    assert [(row["backend"], int(row["n"]), int(row["d"])) for row in rows] == [
        ("NumPy", 128, 16),
        ("NumPy", 256, 16),
    ]
    for row in rows:
        n, d = int(row["n"]), int(row["d"])
        assert int(row["FLOPs"]) == 2 * n * n * d + 2 * n * n * d  # QKᵀ, then the weights times V
        assert float(row["n×n matrix (MB)"]) == pytest.approx(n * n * 4 / 1e6)
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_slider(tab, "cost.keys", "5")


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("keys=5", first_request_shows_its_state)
