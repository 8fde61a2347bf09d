"""A deep link opened as the very first request to a freshly started server.

While a `pages/` folder exists, Streamlit starts every server in its legacy multipage mode: the
first script run looks the requested page up among the files of `pages/` (by file stem) before
`app.py` has had a chance to call `st.navigation`. app.py gives no page a url_path equal to its
file's stem, so that lookup misses and app.py runs. Here each page's link, carrying some view
state, is the first thing its own fresh server ever answers (the situation of a QR code on a
slide after the server restarted), and the browser must show the router (the sidebar menu and
the presenter switch app.py draws), the right page, that page's state, and no dialog.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from playwright.sync_api import expect

from harness.app_pages import registered_pages
from harness.browser import (
    StreamlitServer,
    active_page_title,
    exceptions,
    heatmap_cells,
    key_selector,
    open_app,
    wait_for_charts,
)
from harness.references import bert_tokens

PAGES = registered_pages()


# The widgets draw their values after the run has finished, so each check waits for the value.


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


def _home(tab) -> None:
    expect_slider(tab, "why.n", "4")
    # 4 tokens: 4 × 4 query·key scores, and 3 sequential steps for an RNN.
    expect_metric(tab, "scores computed", "16")
    expect_metric(tab, "sequential steps", "3")


def _sdpa(tab) -> None:
    causal = tab.locator(f"{key_selector('scaled_dot_product.causal')} input[type='checkbox']")
    expect(causal).to_be_checked()
    # The worked 3-token example: Q = [[1,0],[0,1],[1,1]], K = [[1,1],[1,0],[0,1]], d_k = 2.
    # With the causal mask query i sees keys 1..i: query 1 puts all its weight on key 1, and
    # query 2 sees scores q2·k1 = 1, q2·k2 = 0, scaled by 1/√2, so its weights are
    # softmax([1/√2, 0]) = [e^{1/√2}, 1] / (e^{1/√2} + 1) = [0.6698, 0.3302].
    q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    k = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    scores = np.where(np.tril(np.ones((3, 3), dtype=bool)), q @ k.T / np.sqrt(2), -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    assert np.allclose(weights[1, :2], [0.6698, 0.3302], atol=1e-4)
    scope = key_selector("scaled_dot_product.pipeline.weights.chart")
    wait_for_charts(tab, scope)
    shown = np.array([float(text) for text in heatmap_cells(tab, scope)]).reshape(3, 3)
    np.testing.assert_allclose(shown, weights, atol=5e-5)
    masked_scope = key_selector("scaled_dot_product.pipeline.masked.chart")
    wait_for_charts(tab, masked_scope)
    masked = heatmap_cells(tab, masked_scope)[:9]
    assert [i for i, text in enumerate(masked) if text == "−∞"] == [1, 2, 5]  # above the diagonal


def _masking(tab) -> None:
    expect_slider(tab, "masking.n", "4")


def _multi_head(tab) -> None:
    expect_text(tab, "multi_head.sentence", "a dog ran home")
    expect_slider(tab, "multi_head.heads", "2")


def _positional(tab) -> None:
    expect_text(tab, "positional.sentence", "dogs chase cats")


def _pretrained(tab) -> None:
    expect_text(tab, "pretrained.text", "Dogs bark loudly")
    tokens = bert_tokens("Dogs bark loudly")
    assert tokens == ["[CLS]", "dogs", "bark", "loudly", "[SEP]"]
    caption = tab.locator("[data-testid='stCaptionContainer']").filter(has_text="(WordPiece")
    expect(caption).to_contain_text("): " + " · ".join(tokens))


def _probe(tab) -> None:
    expect_text(tab, "probe.text", "Dogs bark loudly")
    caption = tab.locator("[data-testid='stCaptionContainer']").filter(has_text="5 tokens:")
    expect(caption).to_contain_text("5 tokens: " + " · ".join(bert_tokens("Dogs bark loudly")))


def _cost(tab) -> None:
    expect_slider(tab, "cost.keys", "5")


def _decoder(tab) -> None:
    # The link asks for one generated token: the page generates it on the first run, and the
    # cache then holds every prompt token plus that one (30 layers, K and V, 3 KV heads, 64).
    expect_text(tab, "decoder.prompt", "Dogs bark loudly")
    caption = tab.locator("[data-testid='stCaptionContainer']").filter(has_text="generated of")
    expect(caption).to_contain_text("1 generated of at most")
    metric = tab.locator("[data-testid='stMetric']").filter(has_text="Cache shape")
    expect(metric.locator("[data-testid='stMetricValue']")).to_have_text(
        re.compile(r"\(30, 2, 3, \d+, 64\)")
    )


@dataclass(frozen=True)
class LinkState:
    query: str
    check: Callable[[object], None]


# The state each page's link carries, and how to see it on the page.
STATE = {
    "why": LinkState("n=4", _home),
    "scaled-dot-product": LinkState("causal=1", _sdpa),
    "masking": LinkState("n=4", _masking),
    "multi-head": LinkState("sentence=a+dog+ran+home&heads=2", _multi_head),
    "positional": LinkState("sentence=dogs+chase+cats", _positional),
    "pretrained": LinkState("text=Dogs+bark+loudly", _pretrained),
    "probe": LinkState("text=Dogs+bark+loudly", _probe),
    "cost": LinkState("keys=5", _cost),
    "decoder": LinkState("prompt=Dogs+bark+loudly&step=1", _decoder),
}


def test_every_registered_page_has_a_link_state_check():
    assert set(STATE) == {p.url_path for p in PAGES}


@pytest.fixture(scope="module")
def fresh_servers(request) -> Iterator[dict[str, StreamlitServer]]:
    """One never-visited server per selected page, all booting at once to keep it quick."""
    selected = {
        item.callspec.params["registered"].url_path
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    servers = {path: StreamlitServer(wait=False) for path in sorted(selected)}
    try:
        yield servers
    finally:
        for running in servers.values():
            running.close()


@pytest.mark.e2e
@pytest.mark.parametrize("registered", PAGES, ids=[p.url_path for p in PAGES])
def test_deep_link_as_first_request_shows_the_page_and_its_state(fresh_servers, page, registered):
    fresh = fresh_servers[registered.url_path]
    fresh.wait_healthy()
    state = STATE[registered.url_path]
    # The default page's link is the root: that is the URL its view gives to copy.
    path = "" if registered.default else registered.url_path
    open_app(page, fresh.url, path, state.query)

    assert exceptions(page) == []
    # app.py ran: its presenter switch and the sectioned menu of st.navigation are there.
    assert page.locator(key_selector("app.present")).count() == 1
    nav = page.locator("[data-testid='stSidebarNav']")
    assert "The mechanism" in nav.inner_text()
    current = page.locator("[data-testid='stSidebarNavLink'][aria-current='page']")
    expect(current).to_contain_text(registered.title)
    assert active_page_title(page) == registered.title
    assert page.url.split("?")[0].rstrip("/") == f"{fresh.url}/{path}".rstrip("/")
    state.check(page)
    for part in filter(None, state.query.split("&")):
        assert part in page.url, f"the link lost {part}: {page.url}"
    # Last, so a failure here means everything above was right: Streamlit's legacy first run
    # answers a url_path it cannot find among pages/ with a "Page not found" dialog, even
    # though app.py then shows the right page; the app must not leave that dialog up.
    expect(page.locator("[role='dialog']")).to_have_count(0, timeout=15_000)
