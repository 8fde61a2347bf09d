"""The multi-head page in a real browser: a deep link, then more heads and another seed.

The expected numbers are worked out here with NumPy from the page's inputs only: the seeded
embeddings X and parameters (attention_core's `token_embeddings`, `init_multi_head_params`),
then head h's own slice of Q = X W_Qᵀ + b_Q and K = X W_Kᵀ + b_K, softmax(q kᵀ / √d_head).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from playwright.sync_api import expect

from attention_core import init_multi_head_params
from attention_core.reference import token_embeddings
from harness.browser import (
    CELL_NUMBERS,
    TIMEOUT_MS,
    exceptions,
    heatmap_cells,
    key_selector,
    open_app,
    rerun_after,
    wait_for_charts,
    wait_for_link,
)
from tests.e2e.links import LinkState, expect_slider, expect_text

TOKENS = ["the", "cat", "sat", "on"]
D_MODEL = 8
ZOOMED = 2  # the link's head=2
WEIGHTS = key_selector(f"multi_head.zoom.h{ZOOMED}.weights.chart")


def head_weights(num_heads: int, head: int, seed: int) -> np.ndarray:
    """Head `head`'s (from 1) weights `(q_pos, k_pos)` on TOKENS, by hand."""
    x = token_embeddings(TOKENS, D_MODEL, seed)  # (pos, d_model)
    p = init_multi_head_params(D_MODEL, num_heads, seed)
    d_head = D_MODEL // num_heads
    columns = slice((head - 1) * d_head, head * d_head)
    q = (x @ p.w_q.T + p.b_q)[:, columns]  # (pos, d_head)
    k = (x @ p.w_k.T + p.b_k)[:, columns]
    scores = q @ k.T / np.sqrt(d_head)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def expect_weights(tab, weights: np.ndarray) -> None:
    """Wait until the zoomed head's weights heatmap shows `weights` (4 decimals a cell)."""
    wait_for_charts(tab, WEIGHTS)
    labels = tab.locator(f"{WEIGHTS} [data-testid='stPlotlyChart'] {CELL_NUMBERS}")
    expect(labels).to_have_text([f"{w:.4f}" for w in weights.ravel()], timeout=TIMEOUT_MS)
    shown = np.array([float(t) for t in heatmap_cells(tab, WEIGHTS)]).reshape(weights.shape)
    np.testing.assert_allclose(shown, weights, atol=5e-5)
    np.testing.assert_allclose(shown.sum(axis=-1), 1.0, atol=5e-4)


def expect_metric(tab, label: str, value: str) -> None:
    metric = tab.locator("[data-testid='stMetric']").filter(has_text=label)
    expect(metric.first.locator("[data-testid='stMetricValue']")).to_have_text(value)


@pytest.mark.e2e
def test_more_heads_and_another_seed_change_the_zoomed_heads_weights(server, page):
    open_app(page, server.url, "multi-head", f"sentence={'+'.join(TOKENS)}&heads=2&head={ZOOMED}")
    # 2 heads of d_model 8: d_head 4, and weights (head, q_pos, k_pos) = (2, 4, 4).
    expect_metric(page, "d_head", "4")
    expect(page.get_by_text("scores (2, 4, 4) scaled by 1/√4", exact=False).first).to_be_attached()
    expect_weights(page, head_weights(2, ZOOMED, seed=0))

    # d_model 8 offers 1, 2, 4, 8 heads: one step right is 4 heads of 2 features.
    thumb = page.locator(f"{key_selector('multi_head.heads')} input[type='range']")
    thumb.scroll_into_view_if_needed()
    with rerun_after(page):
        thumb.press("ArrowRight")
    # 4 heads is the page's default, which the link leaves out.
    wait_for_link(page, has=(f"head={ZOOMED}",), lacks=("heads=",))
    expect_metric(page, "d_head", "2")
    # 4·d_model² + 4·d_model parameters whatever the number of heads.
    expect_metric(page, "parameters", str(4 * D_MODEL**2 + 4 * D_MODEL))
    expect(page.get_by_text("scores (4, 4, 4) scaled by 1/√2", exact=False).first).to_be_attached()
    four_heads = head_weights(4, ZOOMED, seed=0)
    assert not np.allclose(four_heads, head_weights(2, ZOOMED, seed=0), atol=1e-3)
    expect_weights(page, four_heads)

    seed = page.locator(f"{key_selector('multi_head.seed')} input")
    seed.scroll_into_view_if_needed()
    with rerun_after(page):
        seed.fill("3")
        seed.press("Enter")
    wait_for_link(page, has=("seed=3",), lacks=("heads=",))
    expect_weights(page, head_weights(4, ZOOMED, seed=3))
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_text(tab, "multi_head.sentence", "a dog ran home")
    expect_slider(tab, "multi_head.heads", "2")


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("sentence=a+dog+ran+home&heads=2", first_request_shows_its_state)


# Each box's text inside its box, each arrow's label clear of every box and of the other labels,
# as Chromium lays out the page's own font (the diagram is laid out in Python from a char width).
FLOW_LAYOUT = """async (svg) => {
    await document.fonts.ready;
    const rect = (e) => {
        const b = e.getBBox();
        return [b.x, b.y, b.x + b.width, b.y + b.height];
    };
    const children = [...svg.children];
    const boxes = children.filter((e) => e.tagName === "rect").map(rect);
    const inBox = children.filter((e, i) => i > 0 && children[i - 1].tagName === "rect")
        .map(rect);
    const labels = children.filter((e, i) => e.tagName === "text"
        && (i === 0 || children[i - 1].tagName !== "rect") && e.hasAttribute("x")).map(rect);
    return {boxes, inBox, labels, font: getComputedStyle(svg.querySelector("text")).fontFamily};
}"""


@pytest.mark.e2e
@pytest.mark.parametrize("link", ["", "heads=8&d_model=16&attention=cross&causal=1"])
def test_the_flow_diagrams_text_fits_its_boxes_in_the_browser(server, page, link):
    open_app(page, server.url, "multi-head", link)
    svg = page.locator("svg[role='img'][aria-label^='Flow of multi-head attention']")
    svg.scroll_into_view_if_needed()
    layout = svg.evaluate(FLOW_LAYOUT)
    assert "Source Sans" in layout["font"]
    assert len(layout["inBox"]) == len(layout["boxes"]) >= 9
    for (x0, y0, x1, y1), (a0, b0, a1, b1) in zip(layout["boxes"], layout["inBox"], strict=True):
        assert x0 + 2 <= a0 and a1 <= x1 - 2 and y0 <= b0 and b1 <= y1, ((x0, x1), (a0, a1))

    def apart(a, b):
        return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]

    assert len(layout["labels"]) >= 12
    for label in layout["labels"]:
        assert all(apart(label, box) for box in layout["boxes"]), label
    for a, b in itertools.combinations(layout["labels"], 2):
        assert apart(a, b), (a, b)
    assert exceptions(page) == []
