"""The probe page in a real browser: choosing another ablation reruns its part of the page, the
link follows, and the sentence-embedding similarity shown is transformers' own.

The expected similarities come from Hugging Face transformers (eager BertModel) on the text with
and without the token, and with layer 3, head 2 removed (transformers 4's head_mask, rebuilt in
tests/hf_head_mask.py), pooled as sentence-transformers does (mean, then L2), not from the page's
code.
"""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import expect

from harness.browser import (
    exceptions,
    key_selector,
    open_app,
    rerun_after,
    wait_for_link,
    wait_for_visible_charts,
)
from harness.references import bert_tokens
from tests.e2e.links import LinkState, expect_text

TIRED = "The animal didn't cross the street because it was too tired."
TIRED_AT = 13  # [CLS] the animal didn ' t cross the street because it was too tired . [SEP]


def transformers_similarities(drop: int, layer: int, head: int) -> tuple[float, float]:
    """Cosine of the text's embedding with the text without token `drop`, and with the text
    read without head (`layer`, `head`), all from 0."""
    import torch
    from transformers import BertModel, BertTokenizerFast

    from attention_core.models import find_model_dir
    from tests.hf_head_mask import use_head_mask

    path = str(find_model_dir().path)
    tokenizer = BertTokenizerFast.from_pretrained(path)
    model = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    use_head_mask(model)
    ids = tokenizer(TIRED)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids[drop]) == "tired"

    def embed(token_ids: list[int], head_mask=None) -> np.ndarray:
        with torch.inference_mode():
            hidden = model(torch.tensor([token_ids]), head_mask=head_mask).last_hidden_state[0]
        pooled = hidden.mean(0)
        return (pooled / pooled.norm()).numpy().astype(np.float64)

    head_mask = torch.ones(6, 12)
    head_mask[layer, head] = 0.0
    plain = embed(ids)
    return float(plain @ embed(ids[:drop] + ids[drop + 1 :])), float(plain @ embed(ids, head_mask))


@pytest.mark.e2e
def test_removing_a_token_or_a_head_shows_transformers_similarity_and_the_link_follows(
    server, page
):
    open_app(page, server.url, "probe")
    wait_for_visible_charts(page)
    expected, expected_head = transformers_similarities(TIRED_AT, 2, 1)
    radio = page.locator(key_selector("probe.mode"))
    with rerun_after(page):
        radio.get_by_text("Remove it").click()
    wait_for_link(page, has=("mode=remove",))
    metric = page.locator("[data-testid='stMetric']").filter(has_text="cosine similarity")
    expect(metric.locator("[data-testid='stMetricValue']")).to_have_text(f"{expected:.4f}")
    caption = page.locator("[data-testid='stCaptionContainer']").filter(
        has_text="move one position forward"
    )
    expect(caption).to_have_count(1)
    wait_for_visible_charts(page)
    # Removing a head (the default one: layer 3, head 2) instead of the token.
    with rerun_after(page):
        radio.get_by_text("Remove a head").click()
    wait_for_link(page, has=("mode=head",))
    expect(metric.locator("[data-testid='stMetricValue']")).to_have_text(f"{expected_head:.4f}")
    wait_for_visible_charts(page)
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_text(tab, "probe.text", "Dogs bark loudly")
    caption = tab.locator("[data-testid='stCaptionContainer']").filter(has_text="5 tokens:")
    expect(caption).to_contain_text("5 tokens: " + " · ".join(bert_tokens("Dogs bark loudly")))


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("text=Dogs+bark+loudly", first_request_shows_its_state)
