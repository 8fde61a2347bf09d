"""A talk's room served as at a talk: workers behind HAProxy, every viewer speaking Streamlit's
websocket protocol (harness/room.py), the answers in one SQLite file or one Redis server.

They assert on what the speaker's screen says and on what the store holds, never on timings:
bench/bench_room.py measures how fast an answer reaches the speaker.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from harness.room import RoomViewer
from harness.stream import run_to_end, worker_cookie
from server.room_store import STORE_ENV_VAR, open_store
from server.rooms import CODE_LENGTH
from server.serve import ROOT, Deployment

pytestmark = pytest.mark.serving

PAGE = "scaled-dot-product"
QUESTION = "sdpa.winner"


async def speaker_starts_a_room(port: int) -> tuple[RoomViewer, str, str]:
    """Presenter mode, then *Start a room*, as the speaker clicks it; the code and secret read
    off the speaker's own screen (the sidebar's speaker link)."""
    http = f"http://127.0.0.1:{port}"
    cookie = await asyncio.to_thread(worker_cookie, http)
    speaker = RoomViewer(f"ws://127.0.0.1:{port}/_stcore/stream", PAGE, "present=1", cookie)
    async with speaker.connected():
        await speaker.rerun()
        await speaker.press("room.start")  # the sidebar's (the questions have one too)
        await speaker.rerun()
    (link,) = speaker.said(r"host=")
    code = re.search(r"room=(\w+)", link).group(1)
    secret = re.search(r"host=([\w-]+)", link).group(1)
    assert len(code) == CODE_LENGTH
    return speaker, code, secret


async def audience_answers(port: int, code: str, options: list[int], seed: int = 0) -> list[str]:
    """Each viewer, in a tab of their own (their own worker cookie), arrives at once, answers
    and leaves; returns the worker each one was on."""

    async def one(index: int, option: int) -> str:
        http = f"http://127.0.0.1:{port}"
        cookie = await asyncio.to_thread(worker_cookie, http)
        viewer = RoomViewer(
            f"ws://127.0.0.1:{port}/_stcore/stream", PAGE, f"room={code}", cookie, seed + index
        )
        async with viewer.connected():
            await viewer.rerun()
            assert viewer.said(r"You are in room"), viewer.texts
            await viewer.answer(QUESTION, option)
            assert viewer.said(r"It is in room"), viewer.texts
            assert viewer.log.exceptions == []
        return (cookie or "").split("=")[-1]

    return await asyncio.gather(*(one(i, o) for i, o in enumerate(options)))


async def speaker_count(port: int, code: str, secret: str, expected: int) -> int | None:
    """The speaker's screen, opened from the speaker link, refreshed until it shows `expected`
    answers or 10 s have passed."""
    http = f"http://127.0.0.1:{port}"
    cookie = await asyncio.to_thread(worker_cookie, http)
    speaker = RoomViewer(
        f"ws://127.0.0.1:{port}/_stcore/stream",
        PAGE,
        f"room={code}&host={secret}&present=1",
        cookie,
    )
    async with speaker.connected():
        await speaker.rerun()
        deadline = time.monotonic() + 10
        while (shown := await speaker.count(QUESTION)) != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
    return shown


def tally(url: str, code: str) -> dict[str, int]:
    store = open_store(url)
    (question,) = [q for q in _questions(store, code)]
    return store.tally(code, question).counts


def _questions(store, code: str) -> list[str]:
    if hasattr(store, "client"):
        return sorted(store.client.smembers(f"ae:room:{code}:questions"))
    rows = store._read("SELECT DISTINCT question FROM answers WHERE code = ?", (code,))
    return [q for (q,) in rows if q.startswith(QUESTION + ":")]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_fifty_viewers_on_two_workers_counted_once_each_through_a_worker_restart(
    backend, tmp_path, request
):
    url = request.getfixturevalue("redis_url") if backend == "redis" else (
        f"sqlite://{tmp_path}/rooms.db"
    )  # fmt: skip
    if backend == "redis":
        open_store(url).client.flushdb()
    with Deployment(ROOT / "app.py", workers=2, env={STORE_ENV_VAR: url}) as server:
        _, code, secret = run_to_end(speaker_starts_a_room(server.port))
        first = [i % 4 for i in range(50)]  # options 1-4 of the winner question
        workers = run_to_end(audience_answers(server.port, code, first))
        assert set(workers) == {"w1", "w2"}  # the room spans both workers
        assert run_to_end(speaker_count(server.port, code, secret, 50)) == 50
        assert tally(url, code) == {str(o): first.count(o) for o in set(first)}

        server.restart_worker(0)  # every session it held is gone; the answers are not
        assert run_to_end(speaker_count(server.port, code, secret, 50)) == 50
        later = [2] * 10
        workers = run_to_end(audience_answers(server.port, code, later, seed=100))
        assert "w1" in workers  # the restarted worker takes viewers again
        assert run_to_end(speaker_count(server.port, code, secret, 60)) == 60
        given = first + later
        assert tally(url, code) == {str(o): given.count(o) for o in set(given)}


def test_a_replayed_lock_in_counts_once_and_a_guessed_code_gets_nothing(tmp_path):
    url = f"sqlite://{tmp_path}/rooms.db"
    with Deployment(ROOT / "app.py", workers=2, env={STORE_ENV_VAR: url}) as server:
        _, code, secret = run_to_end(speaker_starts_a_room(server.port))

        async def replay() -> RoomViewer:
            cookie = await asyncio.to_thread(worker_cookie, f"http://127.0.0.1:{server.port}")
            viewer = RoomViewer(
                f"ws://127.0.0.1:{server.port}/_stcore/stream", PAGE, f"room={code}", cookie
            )
            async with viewer.connected():
                await viewer.rerun()
                await viewer.answer(QUESTION, 1)
                for _ in range(5):  # the same message again, as a replaying client sends it
                    await viewer.press(f"quiz.{QUESTION}.again")
                    await viewer.answer(QUESTION, 1)
            return viewer

        run_to_end(replay())
        assert run_to_end(speaker_count(server.port, code, secret, 1)) == 1

        async def guess(candidate: str) -> RoomViewer:
            cookie = await asyncio.to_thread(worker_cookie, f"http://127.0.0.1:{server.port}")
            viewer = RoomViewer(
                f"ws://127.0.0.1:{server.port}/_stcore/stream", PAGE, f"room={candidate}", cookie
            )
            async with viewer.connected():
                await viewer.rerun()
            return viewer

        guessed = run_to_end(guess(code[:-1] + ("B" if code[-1] != "B" else "C")))
        assert guessed.said("There is no such room") and not guessed.said("You are in room")
        # The page works as without a room: its question judges at once.
        assert any(w.endswith(f"quiz.{QUESTION}.lock") for w in guessed.buttons)
        assert tally(url, code) == {"1": 1}
