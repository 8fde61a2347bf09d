"""The room stores, each against the real thing: a SQLite file and a redis-server.

The same tests run on both, since the pages cannot tell which one a deployment chose.
"""

from __future__ import annotations

import re
import sqlite3
import threading

import pytest

from server import room_store
from server.room_store import ANSWERED, FULL, GONE, IDLE_SECONDS, REVEALED, open_store

T0 = 1_800_000_000.0
Q = "sdpa.winner:0123456789"


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.serving)])
def store(request, tmp_path):
    if request.param == "sqlite":
        return open_store(f"sqlite://{tmp_path}/rooms.db")
    url = request.getfixturevalue("redis_url")
    made = open_store(url)
    made.client.flushdb()
    return made


def test_one_answer_per_viewer_and_question_the_last_one_kept(store):
    assert store.create_room("ROOM2345", "host-hash", T0)
    assert store.put_answer("ROOM2345", Q, "a", "1", T0, 100) == ANSWERED
    assert store.put_answer("ROOM2345", Q, "b", "1", T0, 100) == ANSWERED
    assert store.put_answer("ROOM2345", Q, "a", "0", T0 + 1, 100) == ANSWERED
    assert store.put_answer("ROOM2345", Q, "a", "0", T0 + 2, 100) == ANSWERED  # a replay
    tally = store.tally("ROOM2345", Q)
    assert tally.counts == {"0": 1, "1": 1} and tally.answers == 2 and not tally.revealed
    assert store.viewer_choice("ROOM2345", Q, "a") == "0"
    assert store.viewer_choice("ROOM2345", Q, "nobody") is None
    # Another question, another room: apart.
    assert store.tally("ROOM2345", "sdpa.noscale:0123456789").counts == {}
    assert store.create_room("OTHER234", "h", T0)
    assert store.tally("OTHER234", Q).counts == {}


def test_a_taken_code_is_not_given_twice_and_the_host_hash_is_kept(store):
    assert store.create_room("ROOM2345", "first", T0)
    assert not store.create_room("ROOM2345", "second", T0)
    assert store.room_host("ROOM2345", T0) == "first"
    assert store.room_host("NOROOM23", T0) is None


def test_after_a_reveal_no_answer_is_taken_and_asking_again_starts_over(store):
    store.create_room("ROOM2345", "h", T0)
    store.put_answer("ROOM2345", Q, "a", "2", T0, 100)
    store.set_revealed("ROOM2345", Q, T0)
    assert store.put_answer("ROOM2345", Q, "b", "2", T0, 100) == REVEALED
    assert store.tally("ROOM2345", Q).counts == {"2": 1}
    assert store.tally("ROOM2345", Q).revealed
    store.clear_question("ROOM2345", Q, T0)
    assert store.tally("ROOM2345", Q) == room_store.Tally({}, False)
    assert store.put_answer("ROOM2345", Q, "b", "0", T0, 100) == ANSWERED
    assert store.tally("ROOM2345", Q).counts == {"0": 1}


def test_a_room_holds_a_bounded_number_of_answers_but_a_viewer_may_change_theirs(store):
    store.create_room("ROOM2345", "h", T0)
    other = "sdpa.noscale:0123456789"
    assert store.put_answer("ROOM2345", Q, "a", "0", T0, 3) == ANSWERED
    assert store.put_answer("ROOM2345", Q, "b", "0", T0, 3) == ANSWERED
    assert store.put_answer("ROOM2345", other, "a", "0", T0, 3) == ANSWERED
    assert store.put_answer("ROOM2345", other, "b", "0", T0, 3) == FULL
    assert store.put_answer("ROOM2345", Q, "b", "1", T0, 3) == ANSWERED
    # Asking a question again gives its answers' room back.
    store.clear_question("ROOM2345", Q, T0)
    assert store.put_answer("ROOM2345", other, "b", "0", T0, 3) == ANSWERED


def test_a_closed_room_is_gone_with_its_answers(store):
    store.create_room("ROOM2345", "h", T0)
    store.put_answer("ROOM2345", Q, "a", "0", T0, 100)
    store.set_revealed("ROOM2345", Q, T0)
    store.delete_room("ROOM2345")
    assert store.room_host("ROOM2345", T0) is None
    assert store.put_answer("ROOM2345", Q, "b", "0", T0, 100) == GONE
    assert store.tally("ROOM2345", Q) == room_store.Tally({}, False)
    # The code may be handed out again, to a room that starts empty.
    assert store.create_room("ROOM2345", "new", T0)
    assert store.tally("ROOM2345", Q).answers == 0


def test_misses_are_counted_per_address_within_the_window(store):
    assert store.misses("10.0.0.1", T0, 600) == 0
    assert [store.misses("10.0.0.1", T0 + i, 600, add=True) for i in range(3)] == [1, 2, 3]
    assert store.misses("10.0.0.1", T0 + 3, 600) == 3
    assert store.misses("10.0.0.2", T0 + 3, 600) == 0


def test_sqlite_forgets_a_room_idle_for_twelve_hours(tmp_path):
    store = open_store(f"sqlite://{tmp_path}/rooms.db")
    store.create_room("IDLE2345", "h", T0)
    store.put_answer("IDLE2345", Q, "a", "0", T0 + 10, 100)
    assert store.room_host("IDLE2345", T0 + 10 + IDLE_SECONDS - 1) == "h"
    later = T0 + 10 + IDLE_SECONDS + 1
    assert store.room_host("IDLE2345", later) is None
    assert store.put_answer("IDLE2345", Q, "b", "0", later, 100) == GONE
    # The next room started takes the idle one's rows with it.
    store.create_room("NEXT2345", "h", later)
    rows = sqlite3.connect(tmp_path / "rooms.db").execute("SELECT COUNT(*) FROM answers")
    assert rows.fetchone()[0] == 0


@pytest.mark.serving
def test_redis_keys_expire_after_twelve_idle_hours(redis_url):
    store = open_store(redis_url)
    store.client.flushdb()
    store.create_room("IDLE2345", "h", T0)
    store.put_answer("IDLE2345", Q, "a", "0", T0, 100)
    store.set_revealed("IDLE2345", Q, T0)
    keys = store.client.keys("ae:room:IDLE2345*")
    assert len(keys) == 4  # the room, its answers, its revealed and its questions sets
    assert all(0 < store.client.ttl(key) <= IDLE_SECONDS for key in keys)


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path):
    store = open_store(f"sqlite://{tmp_path}/rooms.db")
    store.create_room("ROOM2345", "h", T0)
    db = store._connection()
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000


def test_many_writers_in_threads_and_in_a_second_store_each_counted_once(tmp_path):
    # Two stores on one file are two workers of one host; threads are one worker's sessions.
    url = f"sqlite://{tmp_path}/rooms.db"
    workers = [open_store(url), open_store(url)]
    workers[0].create_room("ROOM2345", "h", T0)

    def viewer(index: int) -> None:
        for repeat in range(3):  # an answer, changed, then sent again
            choice = str((index + repeat) % 4)
            outcome = workers[index % 2].put_answer("ROOM2345", Q, f"v{index}", choice, T0, 1000)
            assert outcome == ANSWERED

    threads = [threading.Thread(target=viewer, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected: dict[str, int] = {}
    for index in range(40):
        choice = str((index + 2) % 4)
        expected[choice] = expected.get(choice, 0) + 1
    assert workers[1].tally("ROOM2345", Q).counts == expected


@pytest.mark.parametrize(
    "url", ["postgres://x", "sqlite://", "sqlite:///", "sqlite://host/x.db", "rooms.db"]
)
def test_an_unknown_store_url_is_refused_by_name(url):
    with pytest.raises(ValueError, match=re.escape("sqlite:///path/to/rooms.db")):
        open_store(url)
