"""A server that lists models of its own (ATTENTION_EXPLORER_MODELS), in Chromium: a link opens
a real-model page on a listed model, the sidebar switches to it, a crafted link is refused, and
axe-core finds nothing on a page showing one.

The models are tiny checkpoints built by transformers (tests/tiny_checkpoints.py); the
expected numbers are transformers' own on the same files.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from harness.browser import (
    StreamlitServer,
    choose_option,
    exceptions,
    new_tab,
    open_app,
    rerun_after,
    wait_for_charts,
    wait_for_link,
)
from tests.e2e.test_accessibility import axe_violations, violation_report
from tests.tiny_checkpoints import write_tiny
from ui.models.chosen import MODELS_ENV_VAR

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PROMPT = "the cat sat on the mat and the dog"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    return {family: write_tiny(family, root / f"tiny-{family}") for family in
            ("llama", "bert", "gpt2")}  # fmt: skip


@pytest.fixture(scope="module")
def listing_server(folders):
    running = StreamlitServer(env={MODELS_ENV_VAR: ",".join(map(str, folders.values()))})
    yield running
    running.close()


def next_token(folder) -> tuple[str, float]:
    """transformers' likeliest next token after PROMPT (its text), and its probability."""
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    ids = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1)
    return tokenizer.decode([int(p.argmax())]), float(p.max())


def open_decoder_link(page, server, folder, name: str, line: str) -> None:
    """The decoder page opened by a link naming the listed ``name``: its model line holds
    ``line``, and greedy takes transformers' likeliest next token, at its probability."""
    best, probability = next_token(folder)
    open_app(page, server.url, "decoder", f"model={name}&prompt={PROMPT}")
    wait_for_charts(page)
    expect(page.get_by_text(re.compile(line))).to_be_visible()
    expect(page.get_by_role("combobox", name="Model (decoder)")).to_have_value(name)
    expect(page.get_by_text(f"“{best}”", exact=True)).to_be_visible()
    expect(page.get_by_text(f"p = {probability:.4f} by the model (T = 1)")).to_be_visible()


@pytest.mark.e2e
def test_a_link_opens_the_decoder_on_a_listed_model(listing_server, page, folders):
    open_decoder_link(page, listing_server, folders["llama"], "tiny-llama",
                      r"Llama · 57,072 parameters")  # fmt: skip
    assert exceptions(page) == []


@pytest.mark.e2e
def test_a_link_opens_the_decoder_on_a_listed_gpt2(listing_server, page, folders):
    """GPT-2 on the decoder page, and where RoPE's plot would be, the learned positions with the
    sentence saying why."""
    open_decoder_link(page, listing_server, folders["gpt2"], "tiny-gpt2",
                      r"GPT-2 · 74,112 parameters")  # fmt: skip
    expect(page.get_by_text(re.compile("This model has no RoPE"))).to_be_visible()
    expect(page.get_by_role("heading", name=re.compile("RoPE inside the model"))).to_have_count(0)
    assert exceptions(page) == []


@pytest.mark.e2e
def test_the_sidebar_switches_the_encoder_and_the_link_follows(listing_server, page):
    open_app(page, listing_server.url, "pretrained", "")
    wait_for_charts(page)
    with rerun_after(page):
        choose_option(page, "[data-testid='stSidebar'] [data-testid='stSelectbox']", "tiny-bert")
    wait_for_link(page, has=("model=tiny-bert",))
    expect(page.get_by_text(re.compile(r"BERT · 4,688 parameters"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"see all 8 heads \(2 layers × 4\)"))).to_be_visible()
    assert exceptions(page) == []


@pytest.mark.e2e
def test_a_crafted_link_is_refused_and_shows_the_shipped_model(listing_server, page):
    open_app(page, listing_server.url, "decoder", "model=/etc/passwd")
    wait_for_charts(page)
    expect(page.get_by_text(re.compile(r"`?model=/etc/passwd`? was ignored"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"SmolLM2-135M-Instruct from"))).to_be_visible()


@pytest.mark.e2e
@pytest.mark.parametrize(("path", "name"), [("decoder", "tiny-llama"), ("pretrained", "tiny-bert")])
def test_axe_finds_no_violation_on_a_listed_model(listing_server, browser, path, name):
    tab = new_tab(browser)
    try:
        open_app(tab, listing_server.url, path, f"model={name}&against_hf=1")
        wait_for_charts(tab)
        expect(tab.get_by_text(re.compile("Against transformers"))).to_be_visible()
        violations = axe_violations(tab)
        assert not violations, violation_report(violations)
    finally:
        tab.context.close()
