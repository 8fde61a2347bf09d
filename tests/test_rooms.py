"""A room's rules, over a real SQLite store: codes, the host's secret, guessing, answers."""

from __future__ import annotations

import math

import pytest

from server import rooms
from server.room_store import ANSWERED, REVEALED, Tally, open_store
from server.rooms import RoomError

T0 = 1_800_000_000.0
Q = "sdpa.winner:0123456789"


@pytest.fixture
def store(tmp_path):
    return open_store(f"sqlite://{tmp_path}/rooms.db")


def test_codes_are_eight_unambiguous_characters_and_differ_every_time(store):
    hosts = [rooms.start_room(store, T0) for _ in range(200)]
    codes = {host.code for host in hosts}
    assert len(codes) == 200
    for code in codes:
        assert len(code) == 8 and set(code) <= set(rooms.CODE_ALPHABET)
    assert not set(rooms.CODE_ALPHABET) & set("AEIOU01L")
    # About 38 bits: a guess finds one of a thousand open rooms once in 2.8e8 tries.
    assert math.log2(len(rooms.CODE_ALPHABET) ** rooms.CODE_LENGTH) > 38
    assert len({host.secret for host in hosts}) == 200
    assert all(len(host.secret) >= 22 for host in hosts)  # 128 bits, URL-safe


def test_a_code_is_read_as_a_person_types_it(store):
    host = rooms.start_room(store, T0)
    typed = rooms.shown_code(host.code).lower().replace("-", " - ")
    assert join(store, typed) == host.code
    assert rooms.shown_code("BCDF2345") == "BCDF-2345"


@pytest.mark.parametrize(
    "crafted",
    ["", "X", "' OR 1=1 --", "BCDF234", "BCDF23456", "bcdf-234a", "../../etc", "ＢＣＤＦ２３４５"],
)
def test_a_crafted_or_unknown_code_gets_no_such_room(store, crafted):
    rooms.start_room(store, T0)
    with pytest.raises(RoomError, match="There is no such room"):
        join(store, crafted)


def test_guessing_is_stopped_per_session_even_with_the_right_code(store):
    host = rooms.start_room(store, T0)
    for guess in range(rooms.SESSION_MISSES):
        with pytest.raises(RoomError, match="no such room"):
            join(store, wrong_code(guess), session="s1", now=T0 + guess)
    with pytest.raises(RoomError, match="Too many wrong room codes"):
        join(store, host.code, session="s1", now=T0 + 30)
    # Another session at the same address is not held back by one guesser's typos...
    assert join(store, host.code, session="s2", now=T0 + 30) == host.code
    # ...and the guesser may try again once the window has passed.
    later = T0 + rooms.SESSION_MISSES + rooms.MISS_WINDOW
    assert join(store, host.code, session="s1", now=later) == host.code


def test_guessing_from_one_address_in_new_sessions_is_stopped_too(store):
    host = rooms.start_room(store, T0)
    for guess in range(rooms.ADDRESS_MISSES):
        with pytest.raises(RoomError, match="no such room"):
            join(store, wrong_code(guess), session=f"fresh-{guess}", address="10.0.0.9")
    with pytest.raises(RoomError, match="Too many wrong room codes"):
        join(store, host.code, session="fresh-last", address="10.0.0.9")
    assert join(store, host.code, session="fresh-last", address="10.0.0.10") == host.code


def join(store, raw: str, *, session: str = "s", address: str = "10.0.0.1", now: float = T0):
    return rooms.join_room(store, raw, session=session, address=address, now=now)


def wrong_code(index: int) -> str:
    digits = "".join(rooms.CODE_ALPHABET[int(d)] for d in f"{index:04d}")
    return "BCDF" + digits


def test_only_the_secret_reveals_resets_and_closes(store):
    host = rooms.start_room(store, T0)
    viewer = rooms.new_viewer()
    rooms.answer(store, host.code, Q, viewer, 1, options=3, multiple=False, now=T0)
    for wrong in (None, "", "guess", host.secret[:-1] + "x", host.code):
        with pytest.raises(RoomError, match="Only the speaker"):
            rooms.reveal(store, host.code, wrong, Q, T0)
        with pytest.raises(RoomError, match="Only the speaker"):
            rooms.ask_again(store, host.code, wrong, Q, T0)
        with pytest.raises(RoomError, match="Only the speaker"):
            rooms.close_room(store, host.code, wrong, T0)
    assert store.tally(host.code, Q) == Tally({"1": 1}, False)
    assert not rooms.is_host(store, host.code, None, T0)
    assert rooms.is_host(store, host.code, host.secret, T0)
    rooms.reveal(store, host.code, host.secret, Q, T0)
    assert store.tally(host.code, Q).revealed
    outcome = rooms.answer(store, host.code, Q, "late", 0, options=3, multiple=False, now=T0)
    assert outcome == REVEALED
    rooms.ask_again(store, host.code, host.secret, Q, T0)
    assert store.tally(host.code, Q) == Tally({}, False)
    rooms.close_room(store, host.code, host.secret, T0)
    with pytest.raises(RoomError, match="no such room"):
        join(store, host.code)


def test_the_store_keeps_a_hash_of_the_secret_never_the_secret(store):
    host = rooms.start_room(store, T0)
    assert store.room_host(host.code, T0) != host.secret
    assert host.secret not in (
        store.path.read_bytes() + store.path.with_suffix(".db-wal").read_bytes()
    ).decode("latin-1")


@pytest.mark.parametrize(
    ("chosen", "multiple"),
    [
        (3, False),
        (-1, False),
        (None, False),
        ("1", False),
        (1.0, False),
        ([0, 5], True),
        ([], True),
    ],
)
def test_an_answer_outside_the_questions_options_is_refused(store, chosen, multiple):
    host = rooms.start_room(store, T0)
    with pytest.raises(RoomError, match="one of the question's 3 options"):
        rooms.answer(store, host.code, Q, "v", chosen, options=3, multiple=multiple, now=T0)
    assert store.tally(host.code, Q).answers == 0


@pytest.mark.parametrize("question", ["sdpa.winner", "x:y", "sdpa.winner:0123456789'; DROP", ""])
def test_a_question_key_not_built_by_the_quiz_is_refused(store, question):
    host = rooms.start_room(store, T0)
    with pytest.raises(RoomError, match="does not name a question"):
        rooms.answer(store, host.code, question, "v", 0, options=3, multiple=False, now=T0)


def test_a_viewer_is_a_random_id_and_a_replay_counts_once(store):
    host = rooms.start_room(store, T0)
    viewer = rooms.new_viewer()
    assert len({rooms.new_viewer() for _ in range(100)}) == 100 and len(viewer) == 32
    for _ in range(3):
        assert (
            rooms.answer(store, host.code, Q, viewer, 2, options=3, multiple=False, now=T0)
            == ANSWERED
        )
    assert store.tally(host.code, Q) == Tally({"2": 1}, False)


def test_the_spread_counts_each_option_a_viewer_chose():
    tally = Tally({"0": 3, "2": 1, "0,2": 2}, True)
    assert rooms.spread(tally, 3) == [5, 0, 3]
    assert rooms.choice_text([2, 0, 2], 3, True) == "0,2"
    assert rooms.choice_text(1, 3, False) == "1"
