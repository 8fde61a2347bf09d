"""A real head in the step-by-step editor, in Chromium: the deep link opens the head's weights,
and the real-model page's link leads there too.

Expected weights come from Hugging Face transformers on the model's files
(harness/references.py), not from the app's own forward pass.
"""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pytest
from playwright.sync_api import expect

from harness.browser import (
    CELL_NUMBERS,
    PLOTLY_CHART,
    exceptions,
    heatmap_cells,
    open_app,
    rerun_after,
    wait_for_charts,
    wait_for_visible_charts,
)
from harness.references import bert_attention, bert_tokens
from tests.e2e.test_accessibility import EXPLAINED, axe_violations, violation_report
from tests.e2e.test_scaled_dot_product import WEIGHTS

SENTENCE = "The cat sat on the mat."


def expect_weights(tab, expected: np.ndarray) -> None:
    """The weights heatmap shows `expected`, to the 2 decimals it writes for 9 keys."""
    wait_for_charts(tab, WEIGHTS)
    cells = tab.locator(f"{WEIGHTS} {PLOTLY_CHART} {CELL_NUMBERS}")
    expect(cells).to_have_count(expected.size)
    shown = np.array([float(t) for t in heatmap_cells(tab, WEIGHTS)]).reshape(expected.shape)
    np.testing.assert_allclose(shown, expected, atol=0.005 + 1e-6)


@pytest.mark.e2e
def test_a_real_heads_link_shows_its_weights_in_the_editor(server, page):
    tokens = bert_tokens(SENTENCE)
    assert len(tokens) == 9
    reference = bert_attention(SENTENCE)
    query = urlencode({"source": "bert", "text": SENTENCE, "layer": 3, "head": 5})
    open_app(page, server.url, "scaled-dot-product", query)
    expect(page.get_by_text("all-MiniLM-L6-v2, BERT's layer 3, head 5")).to_be_visible()
    expect_weights(page, reference[2, 4])
    ticks = page.locator(f"{WEIGHTS} {PLOTLY_CHART} .xtick text").all_text_contents()
    assert ticks == tokens
    wait_for_visible_charts(page)
    # Once the page's own repairs have run, as every axe check: before them, a run caught the
    # sidebar's list and the formulas' scroll boxes unrepaired.
    violations = axe_violations(page)
    failing = [
        v for v in violations if v["impact"] in {"serious", "critical"} or v["id"] not in EXPLAINED
    ]
    assert not failing, violation_report(failing)

    # The same session, from the real-model page's link: another head arrives.
    open_app(page, server.url, "pretrained", urlencode({"text": SENTENCE, "layer": 1, "head": 2}))
    link = page.get_by_role("link", name="Edit layer 1, head 2 in the step-by-step page")
    with rerun_after(page):
        link.click()
    expect(page.get_by_text("all-MiniLM-L6-v2, BERT's layer 1, head 2")).to_be_visible()
    expect_weights(page, reference[0, 1])
    assert "source=bert" in page.url and "head=2" in page.url
    assert exceptions(page) == []
