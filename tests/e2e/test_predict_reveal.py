"""Predict, then reveal, in Chromium: by keyboard, scored, from a teacher's link, and presented.

The expected answer is the 3-token example's, worked by hand in tests/test_quiz.py: query 3 =
(1, 1) scores the keys 2, 1, 1, so key 1 wins with softmax weight 0.503.
"""

from __future__ import annotations

import math

import pytest
from playwright.sync_api import expect

from harness.browser import exceptions, new_tab, open_app, rerun_after
from tests.e2e.test_accessibility import axe_violations, violation_report

TOP = math.exp(math.sqrt(2)) / (math.exp(math.sqrt(2)) + 2 * math.exp(1 / math.sqrt(2)))


def no_axe_violations(tab, where: str) -> None:
    violations = axe_violations(tab)
    assert not violations, f"axe-core on {where}:\n" + violation_report(violations)


@pytest.mark.e2e
def test_predict_by_keyboard_then_reveal_and_score(server, browser):
    tab = new_tab(browser)
    try:
        open_app(tab, server.url, "scaled-dot-product", "quiz=sdpa.winner,sdpa.noscale")
        main = tab.locator("[data-testid='stMain']")
        expect(main.get_by_text("Your score this session: no predictions yet.")).to_be_visible()
        lock = main.get_by_role("button", name="Lock in my prediction").first
        expect(lock).to_be_disabled()  # nothing chosen yet

        # Keyboard only: the first option of question 1 gets focus, Space chooses it, Tab
        # moves on to the (now enabled) lock button, Enter presses it.
        main.get_by_role("radio", name="1 · the").focus()
        with rerun_after(tab):
            tab.keyboard.press("Space")
        expect(main.get_by_role("radio", name="1 · the")).to_be_checked()
        expect(lock).to_be_enabled()
        lock.focus()
        with rerun_after(tab):
            tab.keyboard.press("Enter")

        expect(main.get_by_text("Right: 1 · the.")).to_be_visible()
        expect(main.get_by_text(f"{TOP:.3f}", exact=False).first).to_be_visible()
        expect(
            main.get_by_text("Your score this session: 1 of 1 predictions right.")
        ).to_be_visible()
        assert "quiz=sdpa.winner%2Csdpa.noscale" in tab.url or "quiz=sdpa.winner,sdpa" in tab.url

        # A wrong prediction on question 2: "Flatter" (it gets sharper without ÷√d_k).
        main.get_by_text("Flatter: the top weight shrinks", exact=False).click()
        with rerun_after(tab):
            main.get_by_role("button", name="Lock in my prediction").click()
        expect(
            main.get_by_text("Not this time. You predicted Flatter", exact=False)
        ).to_be_visible()
        expect(
            main.get_by_text("Your score this session: 1 of 2 predictions right.")
        ).to_be_visible()
        assert exceptions(tab) == []
        no_axe_violations(tab, "the SDPA page's answered questions")
    finally:
        tab.context.close()


@pytest.mark.e2e
def test_presenter_shows_the_question_then_reveals_the_answer(server, browser):
    tab = new_tab(browser, width=1280, height=720)
    try:
        open_app(tab, server.url, "scaled-dot-product", "present=1&quiz=sdpa.winner")
        main = tab.locator("[data-testid='stMain']")
        expect(main.get_by_text("Which key gets the most weight", exact=False)).to_be_visible()
        expect(main.get_by_text("A. 1 · the")).to_be_visible()
        expect(main.get_by_role("radio", name="1 · the")).to_have_count(0)  # the room only reads
        expect(main.get_by_text("Answer:", exact=False)).to_have_count(0)
        no_axe_violations(tab, "the presented question")

        with rerun_after(tab):
            main.get_by_role("button", name="Reveal the answer").click()
        expect(main.get_by_text("Answer: A. 1 · the")).to_be_visible()
        expect(main.get_by_text(f"{TOP:.3f}", exact=False).first).to_be_visible()
        assert "present=1" in tab.url
        assert exceptions(tab) == []
        no_axe_violations(tab, "the presented answer")
    finally:
        tab.context.close()


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("path", "ids"),
    [
        ("masking", "mask.row2,mask.sum"),
        ("multi-head", "mha.previous"),
        ("positional", "pe.shuffle,pe.nearest"),
        ("pretrained", "bert.previous"),
        ("patching", "patching.arrives"),
    ],
)
def test_each_pages_questions_open_from_a_link_without_axe_violations(server, browser, path, ids):
    tab = new_tab(browser)
    try:
        open_app(tab, server.url, path, f"quiz={ids}")
        main = tab.locator("[data-testid='stMain']")
        expect(main.get_by_role("button", name="Lock in my prediction")).to_have_count(
            len(ids.split(","))
        )
        expect(main.get_by_text(f"?quiz={ids}", exact=False).first).to_be_visible()
        assert exceptions(tab) == []
        no_axe_violations(tab, f"/{path}?quiz={ids}")
    finally:
        tab.context.close()
