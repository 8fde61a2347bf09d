"""The scaled dot-product page in a real browser: typing into Q, the causal mask, downloads.

Expected numbers come from the one-line NumPy formula softmax(QKᵀ/√d_k [+ mask]) V on the
page's worked 3-token example, whose inputs are written out here:
Q = [[1,0],[0,1],[1,1]], K = [[1,1],[1,0],[0,1]], V = [[10,0],[0,10],[5,5]], d_k = 2.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from playwright.sync_api import expect

from harness.browser import (
    CELL_NUMBERS,
    TIMEOUT_MS,
    choose_option,
    edit_cell,
    exceptions,
    heatmap_cells,
    key_selector,
    open_app,
    rerun_after,
    wait_for_app_run,
    wait_for_charts,
    wait_for_link,
)
from tests.e2e.links import LinkState

Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
K = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
WEIGHTS = key_selector("scaled_dot_product.pipeline.weights.chart")
OUTPUT = key_selector("scaled_dot_product.pipeline.output.chart")


def attention(q, k, v, *, causal=False):
    scores = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape, dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights, weights @ v


def cell_texts(matrix: np.ndarray) -> list[str]:
    """How the page writes a small matrix's cells: 4 decimals, row by row."""
    return [f"{x:.4f}" for x in matrix.ravel()]


def expect_heatmap(tab, scope: str, matrix: np.ndarray) -> None:
    """Wait until the heatmap under `scope` shows `matrix`, then compare the numbers."""
    wait_for_charts(tab, scope)
    labels = tab.locator(f"{scope} [data-testid='stPlotlyChart'] {CELL_NUMBERS}")
    expect(labels).to_have_text(cell_texts(matrix), timeout=TIMEOUT_MS)
    shown = np.array([float(t) for t in heatmap_cells(tab, scope)]).reshape(matrix.shape)
    np.testing.assert_allclose(shown, matrix, atol=5e-5)


@pytest.fixture
def sdpa(server, page):
    open_app(page, server.url, "scaled-dot-product")
    weights, output = attention(Q, K, V)
    # The hand-worked first row: scores [1, 1, 0]/√2, weights e^{0.7071}/(2e^{0.7071}+1) twice
    # and 1/(2e^{0.7071}+1) once = [0.4011, 0.4011, 0.1978], output 0.4011·(10,0) +
    # 0.4011·(0,10) + 0.1978·(5,5) = (5, 5).
    np.testing.assert_allclose(weights[0], [0.4011, 0.4011, 0.1978], atol=1e-4)
    np.testing.assert_allclose(output[0], [5.0, 5.0], atol=1e-3)
    expect_heatmap(page, WEIGHTS, weights)
    expect_heatmap(page, OUTPUT, output)
    return page


@pytest.mark.e2e
def test_typing_into_q_changes_the_weights_and_output(sdpa):
    with rerun_after(sdpa):
        # Q's first row, column d2 (column 0 is the token): [1, 0] -> [1, 2].
        edit_cell(sdpa, key_selector("scaled_dot_product.q.v1"), row=0, col=2, text="2")
    edited = Q.copy()
    edited[0, 1] = 2.0
    weights, output = attention(edited, K, V)
    # By hand: q1·K = [3, 1, 2], /√2 -> weights [0.5760, 0.1400, 0.2840], output (7.18, 2.82).
    np.testing.assert_allclose(weights[0], [0.5760, 0.1400, 0.2840], atol=1e-4)
    expect_heatmap(sdpa, WEIGHTS, weights)
    expect_heatmap(sdpa, OUTPUT, output)
    # Only the first query changed.
    assert heatmap_cells(sdpa, OUTPUT)[2:] == cell_texts(attention(Q, K, V)[1][1:])
    # The hand-edited matrices went into the link.
    wait_for_link(sdpa, has=("Q=1%2C2%3B0%2C1%3B1%2C1",))
    assert exceptions(sdpa) == []


@pytest.mark.e2e
def test_causal_toggle_masks_the_future_and_changes_the_weights(sdpa):
    with rerun_after(sdpa):
        sdpa.locator(f"{key_selector('scaled_dot_product.causal')} label").click()
    weights, output = attention(Q, K, V, causal=True)
    assert np.array_equal(weights[0], [1.0, 0.0, 0.0])  # the first query sees only itself
    expect_heatmap(sdpa, WEIGHTS, weights)
    expect_heatmap(sdpa, OUTPUT, output)
    # The masked scores: −∞ above the diagonal, the scaled scores q·k/√2 elsewhere.
    scaled = Q @ K.T / np.sqrt(2)
    masked = ["−∞" if j > i else f"{scaled[i, j]:.4f}" for i in range(3) for j in range(3)]
    labels = sdpa.locator(
        f"{key_selector('scaled_dot_product.pipeline.masked.chart')} [data-testid='stPlotlyChart'] "
        + CELL_NUMBERS
    )
    expect(labels.nth(8)).to_be_attached(timeout=TIMEOUT_MS)
    assert labels.all_text_contents()[:9] == masked
    wait_for_link(sdpa, has=("causal=1",))

    with rerun_after(sdpa):
        sdpa.locator(f"{key_selector('scaled_dot_product.causal')} label").click()
    expect_heatmap(sdpa, WEIGHTS, attention(Q, K, V)[0])
    wait_for_link(sdpa, lacks=("causal",))


@pytest.mark.e2e
def test_the_json_download_holds_the_edited_example_and_its_steps(sdpa, tmp_path):
    with rerun_after(sdpa):
        edit_cell(sdpa, key_selector("scaled_dot_product.v.v1"), row=2, col=1, text="-4")
    edited_v = V.copy()
    edited_v[2, 0] = -4.0
    weights, output = attention(Q, K, edited_v)
    expect_heatmap(sdpa, OUTPUT, output)

    # The JSON download sits under the steps it saves, with the settings that made them.
    button = sdpa.locator(f"{key_selector('scaled_dot_product.download.json')} button")
    with sdpa.expect_download(timeout=TIMEOUT_MS) as info:
        button.click()
    download = info.value
    assert download.suggested_filename == "sdpa-example.json"
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    wait_for_app_run(sdpa)

    document = json.loads(target.read_text(encoding="utf-8"))
    np.testing.assert_array_equal(np.array(document["Q"]), Q)
    np.testing.assert_array_equal(np.array(document["K"]), K)
    np.testing.assert_array_equal(np.array(document["V"]), edited_v)
    assert document["query_tokens"] == ["the", "cat", "sat"]
    np.testing.assert_allclose(np.array(document["steps"]["weights"]), weights, atol=1e-12)
    np.testing.assert_allclose(np.array(document["steps"]["output"]), output, atol=1e-12)
    assert document["settings"]["causal"] is False


@pytest.mark.e2e
def test_the_weights_csv_download_holds_the_weights_on_screen(sdpa, tmp_path):
    with rerun_after(sdpa):
        sdpa.locator(f"{key_selector('scaled_dot_product.causal')} label").click()
    weights, _ = attention(Q, K, V, causal=True)
    expect_heatmap(sdpa, WEIGHTS, weights)

    chooser = key_selector("scaled_dot_product.pipeline.download.which")
    with rerun_after(sdpa):
        choose_option(sdpa, chooser, "4 · Weights (softmax)")
    button = sdpa.locator(f"{key_selector('scaled_dot_product.pipeline.download.button')} button")
    with sdpa.expect_download(timeout=TIMEOUT_MS) as info:
        button.click()
    download = info.value
    assert download.suggested_filename == "sdpa-weights.csv"
    target = tmp_path / download.suggested_filename
    download.save_as(target)

    with target.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["query", "the", "cat", "sat"]
    assert [row[0] for row in rows[1:]] == ["the", "cat", "sat"]
    np.testing.assert_allclose(
        np.array([[float(x) for x in row[1:]] for row in rows[1:]]), weights, rtol=0, atol=1e-15
    )


@pytest.mark.e2e
def test_choosing_a_query_reruns_its_fragment_and_the_link_follows(server, page):
    open_app(page, server.url, "scaled-dot-product", "causal=1")
    chooser = key_selector("scaled_dot_product.row")
    page.locator(chooser).scroll_into_view_if_needed()
    with rerun_after(page):
        choose_option(page, chooser, "3: sat")
    # The page-level parameter from the link stays; the fragment's own joins it.
    wait_for_link(page, has=("causal=1", "row=3"))
    expect(page.get_by_text("Query 3 “sat” against the keys", exact=False)).to_be_visible()
    # Causal: query 3 sees all three keys, scores q₃·K/√2 = [2, 1, 1]/√2.
    weights, _ = attention(Q, K, V, causal=True)
    expect_heatmap(page, WEIGHTS, weights)
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
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


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("causal=1", first_request_shows_its_state)
