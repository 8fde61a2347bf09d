"""A talk's room on the pages, under AppTest: one AppTest is one browser tab (its own session),
and every tab reads the same SQLite file (the conftest gives each test its own).

The expected counts are the answers these tests give; the right answer of the SDPA page's
first question comes from NumPy (its first preset: query 3 = (1, 1), keys as in test_quiz.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT
from server import room_store
from server.room_store import STORE_ENV_VAR
from ui.widgets.room import CODE_KEY, SECRET_KEY

SDPA = "pages/sdpa_steps.py"
WINNER = "quiz.sdpa.winner"
Q3, K = np.array([1.0, 1.0]), np.array([[1.0, 1], [1, 0], [0, 1]])


def tab(params: dict[str, str] | None = None, page: str = SDPA) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.run()  # the router's first run draws the sidebar; a page switched to at once does not
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def run(at) -> AppTest:
    """Run the tab (or the tab of a widget just clicked) and check it ran cleanly."""
    at = at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def start_room() -> tuple[AppTest, str, str]:
    speaker = tab({"present": "1"})
    (start,) = [b for b in speaker.sidebar.button if b.label == "Start a room"]
    run(start.click())
    return speaker, speaker.session_state[CODE_KEY], speaker.session_state[SECRET_KEY]


def answer(at: AppTest, qid: str, option: int) -> AppTest:
    """Choose `option` of question `qid` (the only one, for a question of several) and lock in."""
    widgets = [*at.radio, *at.button_group]
    (choice,) = [w for w in widgets if (w.key or "").startswith(f"quiz.{qid}.choice")]
    run(choice.set_value([option] if choice in at.button_group else option))
    return run(at.button(key=f"quiz.{qid}.lock").click())


def texts(at: AppTest, *kinds: str) -> list[str]:
    return [e.value for kind in kinds for e in getattr(at, kind)]


def count_line(speaker: AppTest) -> str:
    (line,) = [m for m in texts(run(speaker), "markdown") if "so far" in m][:1]
    return line


def test_answers_are_counted_then_revealed_with_their_spread_on_every_screen():
    speaker, code, _ = start_room()
    assert count_line(speaker) == "**0 answers so far**"
    # The right key of query 3: NumPy's own softmax of q·k/√2.
    scores = K @ Q3 / np.sqrt(2)
    right = int(np.argmax(scores))
    audience = [tab({"room": code}) for _ in range(4)]
    chosen = [right, right, right, (right + 1) % 3]
    for viewer, option in zip(audience, chosen, strict=True):
        answer(viewer, "sdpa.winner", option)
        assert any("It is in room" in t for t in texts(viewer, "info"))
        # Before the reveal nobody in the audience sees whether they were right.
        assert texts(viewer, "success", "error") == []
        assert not [b for b in viewer.button if (b.key or "").endswith(".reveal")]
    assert count_line(speaker) == "**4 answers so far**"
    # The speaker sees only the count until the reveal.
    assert speaker.dataframe == [] or all("viewers" not in d.value for d in speaker.dataframe)
    run(speaker.button(key=f"{WINNER}.reveal").click())
    (table,) = [d.value for d in speaker.dataframe if "viewers" in d.value.columns]
    options = range(len(table))  # the three keys, and a tie
    assert table["viewers"].tolist() == [chosen.count(i) for i in options]
    assert table["% of answers"].tolist() == [100 * chosen.count(i) / 4 for i in options]
    assert [i for i, label in enumerate(table.index) if "(right)" in label] == [right]
    # Each phone, at its next refresh: its verdict and the room's spread.
    for viewer, option in zip(audience, chosen, strict=True):
        run(viewer)
        verdict = texts(viewer, "success", "error")[0]
        assert verdict.startswith("Right" if option == right else "Not this time")
        (shown,) = [d.value for d in viewer.dataframe if "viewers" in d.value.columns]
        assert shown["viewers"].tolist() == table["viewers"].tolist()


def test_a_changed_answer_replaces_the_first_and_a_rerun_counts_nothing_twice():
    speaker, code, _ = start_room()
    viewer = tab({"room": code})
    answer(viewer, "sdpa.winner", 0)
    run(viewer.button(key=f"{WINNER}.again").click())
    answer(viewer, "sdpa.winner", 2)
    for _ in range(3):
        run(viewer)  # replays of the page's run: the same session, the same one answer
    run(speaker.button(key=f"{WINNER}.reveal").click())
    (table,) = [d.value for d in speaker.dataframe if "viewers" in d.value.columns]
    assert table["viewers"].tolist() == [0, 0, 1] + [0] * (len(table) - 3)


def test_asking_again_clears_the_count_and_the_audience_predicts_anew():
    speaker, code, _ = start_room()
    viewer = tab({"room": code})
    answer(viewer, "sdpa.winner", 1)
    run(speaker.button(key=f"{WINNER}.reveal").click())
    run(speaker.button(key=f"{WINNER}.ask").click())
    assert count_line(speaker) == "**0 answers so far**"
    run(viewer)
    assert any("asks this question again" in t for t in texts(viewer, "info"))
    answer(viewer, "sdpa.winner", 0)
    assert count_line(speaker) == "**1 answer so far**"


def test_the_audience_cannot_act_as_the_speaker_even_with_a_guessed_secret():
    _, code, secret = start_room()
    for params in ({"room": code, "present": "1"}, {"room": code, "host": "guess", "present": "1"}):
        viewer = tab(params)
        assert viewer.session_state[SECRET_KEY] is None
        assert not [b for b in viewer.button if (b.key or "").endswith((".reveal", ".ask"))]
        assert not [t for t in texts(viewer, "markdown") if "so far" in t]
        assert "host" not in viewer.query_params
    # The speaker's own link, opened in a new tab (a restarted worker's new session): the room.
    again = tab({"room": code, "host": secret})
    assert again.session_state[SECRET_KEY] == secret
    assert again.toggle(key="app.present").value is True
    assert count_line(again) == "**0 answers so far**"


def test_links_the_speaker_shows_never_carry_the_secret():
    speaker, code, secret = start_room()
    (speaker_link,) = [c for c in texts(speaker, "code") if "host=" in c]
    assert f"room={code}" in speaker_link and f"host={secret}" in speaker_link
    (picture,) = [i.proto.imgs[0] for i in speaker.get("image")]
    assert picture.url.startswith("data:image/svg+xml;base64,")
    alt = picture.alt
    assert alt.startswith("QR code that opens") and f"room={code}" in alt
    assert secret not in alt and "present" not in alt and "host" not in alt
    shown = [m for m in texts(speaker, "markdown") if "Scan the code" in m]
    assert shown and secret not in shown[0]


@pytest.mark.parametrize("crafted", ["NOPE", "ZZZZZZZZ", "' OR 1=1 --", "A" * 5000])
def test_a_crafted_code_gets_no_such_room_and_the_page_works_without_one(crafted):
    start_room()
    viewer = tab({"room": crafted})
    assert any("There is no such room" in w for w in texts(viewer, "warning"))
    assert CODE_KEY not in viewer.session_state or not viewer.session_state[CODE_KEY]
    # The quiz as without a room: the verdict at once.
    answer(viewer, "sdpa.winner", 0)
    assert texts(viewer, "success", "error")


def test_following_the_talk_to_another_page_keeps_the_room():
    speaker, code, _ = start_room()
    viewer = tab({"room": code})
    viewer.switch_page("pages/masking_lab.py").run()
    assert any(f"room **{code[:4]}-{code[4:]}**" in t for t in texts(viewer, "info"))
    assert viewer.query_params["room"] == code
    answer(viewer, "mask.row2", 0)
    speaker.switch_page("pages/masking_lab.py").run()
    counts = [t for t in texts(run(speaker), "markdown") if "so far" in t]
    assert counts[0] == "**1 answer so far**"


def test_a_closed_room_tells_its_audience_and_the_page_goes_on():
    speaker, code, _ = start_room()
    viewer = tab({"room": code})
    run(next(b for b in speaker.sidebar.button if b.label == "Close the room").click())
    assert CODE_KEY not in speaker.session_state
    run(viewer)
    assert any("This room has closed" in w for w in texts(viewer, "warning"))
    assert "room" not in viewer.query_params


def test_without_a_room_nothing_is_written_anywhere(monkeypatch, tmp_path):
    monkeypatch.setenv(STORE_ENV_VAR, f"sqlite://{tmp_path}/never/rooms.db")
    viewer = tab({"present": "1"})
    answer(tab(), "sdpa.winner", 0)
    run(viewer)
    assert not Path(tmp_path, "never").exists()


def test_the_default_store_is_a_file_in_the_apps_data_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(STORE_ENV_VAR)
    monkeypatch.setenv("ATTENTION_EXPLORER_DATA_DIR", str(tmp_path))
    assert room_store.store_url() == f"sqlite://{tmp_path}/rooms.db"
    monkeypatch.delenv("ATTENTION_EXPLORER_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert room_store.store_url() == f"sqlite://{tmp_path}/xdg/attention-explorer/rooms.db"


def test_a_code_typed_in_the_sidebar_joins_as_a_link_does():
    speaker, code, _ = start_room()
    viewer = tab()
    run(viewer.sidebar.text_input(key="room.typed").input(f" {code[:4].lower()}-{code[4:]} "))
    assert viewer.session_state[CODE_KEY] == code
    assert viewer.query_params["room"] == code
    answer(viewer, "sdpa.winner", 1)
    assert count_line(speaker) == "**1 answer so far**"
    other = tab()
    run(other.sidebar.text_input(key="room.typed").input("ZZZZ-ZZZZ"))
    assert any("There is no such room" in w for w in texts(other, "warning"))


def test_the_speakers_screen_says_so_when_the_room_closed_elsewhere():
    speaker, code, secret = start_room()
    other_tab = tab({"room": code, "host": secret})
    run(next(b for b in other_tab.sidebar.button if b.label == "Close the room").click())
    run(speaker)
    assert any("This room has closed" in w for w in texts(speaker, "warning"))
    assert CODE_KEY not in speaker.session_state
