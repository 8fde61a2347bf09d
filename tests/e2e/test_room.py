"""A talk's room in Chromium, through `make serve WORKERS=2`'s deployment (two workers behind
HAProxy): a speaker's tab and audience tabs, each in its own browser context (own cookies, so
HAProxy spreads them over both workers), answering the SDPA page's first question.

The speaker's count must equal the answers given, before and after one worker is restarted; the
revealed spread (the chart's text alternative) must equal them too. The right answer is the
3-token example's, worked by hand in tests/test_quiz.py: key 1 wins query 3's row.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from harness.browser import (
    ARTIFACTS,
    exceptions,
    full_page_screenshot,
    new_tab,
    open_app,
    rerun_after,
    wait_for_app_run,
)
from server.room_store import STORE_ENV_VAR
from server.serve import ROOT, Deployment
from tests.e2e.test_accessibility import axe_violations, violation_report

OPTIONS = ["1 · the", "2 · cat", "3 · sat"]


def answer(tab, link: str, option: str) -> None:
    tab.goto(link)
    wait_for_app_run(tab)
    main = tab.locator("[data-testid='stMain']")
    expect(main.get_by_text("You are in room", exact=False)).to_be_visible()
    with rerun_after(tab):
        main.get_by_role("radiogroup").first.get_by_text(option, exact=True).click()
    expect(main.get_by_role("radio", name=option).first).to_be_checked()
    with rerun_after(tab):
        main.get_by_role("button", name="Lock in my prediction").first.click()
    expect(main.get_by_text("It is in room", exact=False)).to_be_visible()
    # No verdict before the speaker reveals it.
    expect(main.get_by_text("Right:", exact=False)).to_have_count(0)


@pytest.mark.e2e
@pytest.mark.serving
def test_a_room_counts_every_answer_across_two_workers_and_a_restart(browser, tmp_path):
    env = {STORE_ENV_VAR: f"sqlite://{tmp_path}/rooms.db"}
    with Deployment(ROOT / "app.py", workers=2, env=env) as server:
        url = f"http://127.0.0.1:{server.port}"
        speaker = new_tab(browser, width=1280, height=900)
        audience = [new_tab(browser, width=390, height=844) for _ in range(4)]
        try:
            # As a speaker does it: presenter mode on in the sidebar, then a room.
            open_app(speaker, url, "scaled-dot-product", "quiz=sdpa.winner")
            sidebar = speaker.locator("[data-testid='stSidebar']")
            with rerun_after(speaker):
                sidebar.get_by_text("Presenter mode").click()
            main = speaker.locator("[data-testid='stMain']")
            with rerun_after(speaker):  # the sidebar closes in presenter mode: the questions' own
                main.get_by_role("button", name="Start a room").click()
            expect(main.get_by_text("answer on your phone", exact=False)).to_be_visible()
            qr = main.get_by_role("img", name=re.compile("QR code that opens"))
            expect(qr).to_be_visible()
            link = qr.get_attribute("alt").removeprefix("QR code that opens ")
            assert "room=" in link and "host=" not in link and "present" not in link
            expect(main.get_by_text("0 answers so far")).to_be_visible()
            violations = axe_violations(speaker)
            assert not violations, violation_report(violations)

            given = ["1 · the", "1 · the", "2 · cat", "1 · the"]
            for tab, option in zip(audience, given, strict=True):
                answer(tab, link, option)
            expect(main.get_by_text("4 answers so far")).to_be_visible()
            violations = axe_violations(audience[0])
            assert not violations, violation_report(violations)
            workers = {c["value"] for t in audience for c in t.context.cookies()
                       if c["name"] == "AE_WORKER"}  # fmt: skip
            assert workers == {"w1", "w2"}

            server.restart_worker(0)  # its sessions are gone; the room's answers are not
            late = new_tab(browser, width=390, height=844)
            audience.append(late)
            expect(main.get_by_text("4 answers so far")).to_be_visible()
            answer(late, link, "3 · sat")
            given.append("3 · sat")
            expect(main.get_by_text("5 answers so far")).to_be_visible()

            with rerun_after(speaker):
                main.get_by_role("button", name="Reveal the answer").click()
            expect(main.get_by_text("Answer: A. 1 · the")).to_be_visible()
            counts = [given.count(option) for option in OPTIONS]
            spread = "; ".join(
                f"{chr(65 + i)}. {option}: {n} ({100 * n / len(given):.0f}%)"
                for i, (option, n) in enumerate(zip(OPTIONS, counts, strict=True))
            )
            described = main.locator(
                f'[aria-label^="Bar chart of the room\'s {len(given)} answers"]'
            )
            expect(described).to_have_count(1)
            assert spread.replace("A. 1 · the: 3 (60%)", "A. 1 · the: 3 (60%) · right") in (
                described.get_attribute("aria-label")
            )
            # The phones: the answer and the room's spread, at their next refresh.
            phone = audience[1].locator("[data-testid='stMain']")
            expect(phone.get_by_text("Right: 1 · the.")).to_be_visible()
            expect(
                phone.locator('[aria-label^="Bar chart of the room\'s 5 answers"]')
            ).to_have_count(1)
            assert [exceptions(tab) for tab in [speaker, *audience]] == [[]] * 6
            violations = axe_violations(audience[1])
            assert not violations, violation_report(violations)
        finally:
            full_page_screenshot(speaker, ARTIFACTS / "room_speaker.png")
            full_page_screenshot(audience[1], ARTIFACTS / "room_phone.png")
            for tab in [speaker, *audience]:
                tab.context.close()
