"""The real-model page in a real browser: a typed sentence is split into the model's tokens.

The expected tokens come from transformers' pure-Python WordPiece tokenizer over the model's
vocab.txt (harness/references.py), not from the `tokenizers` library the page uses.
"""

from __future__ import annotations

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

SENTENCE = "Attention heads tokenize unbelievably long words!"
TOKEN_CAPTION = "[data-testid='stCaptionContainer']"


def shown_tokens(tab) -> list[str]:
    """The tokens the page lists in its "N tokens (WordPiece; ...): a · b · c" caption."""
    caption = tab.locator(TOKEN_CAPTION).filter(has_text="tokens (WordPiece").first
    text = caption.inner_text()
    return text.split("): ", 1)[1].strip().split(" · ")


@pytest.mark.e2e
def test_a_typed_sentence_shows_the_models_tokens(server, page):
    open_app(page, server.url, "pretrained")
    wait_for_visible_charts(page)
    expected = bert_tokens(SENTENCE)
    # Sub-word pieces make this a real WordPiece check, not a split on spaces.
    assert "##ize" in expected and len(expected) == 14

    text = page.locator(f"{key_selector('pretrained.text')} textarea")
    with rerun_after(page):
        text.fill(SENTENCE)
        text.press("Control+Enter")
    caption = page.locator(TOKEN_CAPTION).filter(has_text="tokens (WordPiece")
    expect(caption).to_contain_text(f"{len(expected)} tokens")
    assert shown_tokens(page) == expected
    # The typed text went into the link.
    wait_for_link(page, has=("text=Attention",))
    wait_for_visible_charts(page)
    assert exceptions(page) == []


def first_request_shows_its_state(tab) -> None:
    """What the page shows of `FIRST_REQUEST`'s link, opened on a fresh server."""
    expect_text(tab, "pretrained.text", "Dogs bark loudly")
    tokens = bert_tokens("Dogs bark loudly")
    assert tokens == ["[CLS]", "dogs", "bark", "loudly", "[SEP]"]
    caption = tab.locator("[data-testid='stCaptionContainer']").filter(has_text="(WordPiece")
    expect(caption).to_contain_text("): " + " · ".join(tokens))


# Its link as the very first request to a fresh server (tests/e2e/test_navigation.py).
FIRST_REQUEST = LinkState("text=Dogs+bark+loudly", first_request_shows_its_state)
