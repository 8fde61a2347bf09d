"""The learning page in a real browser: the default link trains until an induction head forms;
the model downloaded from the page loads into TransformerLens, whose own numbers find the
induction head in layer 1, and the page's "one layer" link gives a model in which no head has
it. Bad settings are said next to their input, and a file that is not a model is refused.

The independent check: TransformerLens's HookedTransformer, loaded from the downloaded file by
`load_state_dict`, scored on held-out repeated random sequences drawn in the test
(tests/test_model_file.py's `score_with_transformer_lens`), never by the app's code.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from playwright.sync_api import expect

from attention_core.training.attn_only import AttnOnlyConfig, init_params
from attention_core.training.model_file import to_npz
from harness.browser import TIMEOUT_MS, exceptions, key_selector, open_app, wait_for_app_run
from tests.e2e.links import LinkState, expect_slider, expect_text
from tests.test_model_file import load_into_transformer_lens, score_with_transformer_lens

# Training the default link takes 10-20 s here alone, longer beside the other browser tests.
TRAINED_MS = max(TIMEOUT_MS, 300_000)


def wait_until_trained(tab, steps: str) -> None:
    expect(tab.get_by_text(f"Trained: {steps} steps")).to_be_visible(timeout=TRAINED_MS)
    wait_for_app_run(tab)


def downloaded_model(tab, tmp_path, name: str):
    button = tab.get_by_role("button", name="Download the model (.npz)")
    button.scroll_into_view_if_needed()
    with tab.expect_download(timeout=TIMEOUT_MS) as download:
        button.click()
    path = tmp_path / name
    download.value.save_as(path)
    assert re.fullmatch(r"attention-only-.*-step\d+\.npz", download.value.suggested_filename)
    return load_into_transformer_lens(path.read_bytes())


@pytest.mark.e2e
def test_the_default_link_grows_an_induction_head_transformer_lens_confirms(server, page, tmp_path):
    open_app(page, server.url, "learning")
    wait_until_trained(page, "1,000")
    expect(page.get_by_text("became an induction head").first).to_be_visible()
    assert exceptions(page) == []
    model = downloaded_model(page, tmp_path, "two-layers.npz")
    prefix, first_half, repeated = score_with_transformer_lens(model, seed=2026)
    chance = np.mean(1 / np.arange(17, 33))
    assert np.unravel_index(prefix.argmax(), prefix.shape)[0] == 1
    assert prefix.max() > 0.6 > 10 * chance
    assert repeated < 0.1 * first_half

    other = page.get_by_role("button", name="Train the same with 1 layer")
    other.scroll_into_view_if_needed()
    other.click()
    wait_until_trained(page, "1,000")
    expect(page.get_by_text("With one layer, no head can become an induction head")).to_be_visible()
    assert "layers=1" in page.url  # the link says which run this is
    one_layer = downloaded_model(page, tmp_path, "one-layer.npz")
    prefix, first_half, repeated = score_with_transformer_lens(one_layer, seed=2026)
    assert prefix.max() < 0.25 and repeated > 0.3 * first_half
    assert exceptions(page) == []


@pytest.mark.e2e
def test_a_learning_rate_of_zero_is_said_next_to_its_input_and_nothing_trains(server, page):
    open_app(page, server.url, "learning", "steps=50&d_model=16&heads=2&context=8&vocab=16")
    box = page.locator(f"{key_selector('learning.lr')} input")
    box.fill("0")
    box.press("Enter")
    sentence = "The learning rate must be greater than 0, got 0: at 0 the weights never move."
    expect(page.get_by_text(sentence)).to_be_visible()
    # Right under the input: the element after the learning rate's is its sentence.
    following = page.locator(key_selector("learning.lr")).evaluate(
        "(box) => box.nextElementSibling && box.nextElementSibling.textContent"
    )
    assert sentence in following
    expect(
        page.get_by_text("Fix the settings marked above and the training starts.")
    ).to_be_visible()
    expect(box).to_have_value("0")
    assert page.locator("[data-testid='stProgress']").count() == 0
    box.fill("0.003")
    box.press("Enter")
    wait_until_trained(page, "50")
    assert exceptions(page) == []


@pytest.mark.e2e
def test_an_uploaded_file_is_refused_or_inspected(server, page, tmp_path):
    open_app(page, server.url, "learning", "steps=50&d_model=16&heads=2&context=8&vocab=16")
    page.get_by_text("Go on from a downloaded model").click()
    chooser = page.locator(f"{key_selector('learning.upload')} input[type='file']")
    notes = tmp_path / "notes.npz"
    notes.write_bytes(b"not, a, model\n")
    chooser.set_input_files(str(notes))
    expect(
        page.get_by_text("“notes.npz”: This file is not an attention-only model")
    ).to_be_visible()

    model = tmp_path / "mine.npz"
    config = AttnOnlyConfig(n_layers=2, n_heads=2, d_model=16, d_vocab=16, n_ctx=8)
    model.write_bytes(to_npz(config, init_params(config, 5), {"steps": 0}))
    chooser.set_input_files(str(model))
    expect(page.get_by_text("“mine.npz”: 2 layers of 2 heads, d_model 16")).to_be_visible()
    wait_until_trained(page, "0")
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_slider(tab, "learning.layers", "1")
    expect_text(tab, "learning.seed", "3")


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("layers=1&seed=3&steps=100", first_request_shows_its_state)
