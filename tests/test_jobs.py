"""server.jobs: one run per key shared by every caller, at most `running` at once and the rest in
line, runs nobody watches paused and resumed where they were, memory bounded, no key past the
board's places."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from server import jobs
from server.jobs import BoardFull, JobBoard
from server.lane import Lane


def counting(
    limit: int, gate: threading.Event | None = None, started: list | None = None, pace: float = 0
):
    """An iterator of 0..limit-1 (a `start`), waiting at each item for `gate` if given, and
    `pace` seconds."""

    def start():
        if started is not None:
            started.append(1)
        for i in range(limit):
            if gate is not None:
                gate.wait(5)
            time.sleep(pace)
            yield i

    return start


def board(**options) -> JobBoard:
    defaults = {"running": 2, "max_jobs": 8, "max_bytes": 10**9, "size": lambda items: 0}
    return JobBoard("test", lane=Lane("test"), **{**defaults, **options})


def until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_every_caller_of_a_key_gets_the_one_run_and_sees_it_grow():
    runs, gate, started = board(), threading.Event(), []
    first = runs.run("a", counting(5, gate, started))
    again = runs.run("a", counting(5, gate, started))
    assert again is first
    gate.set()
    until(lambda: first.state == "done")
    assert first.items == (0, 1, 2, 3, 4)
    assert started == [1]  # started once, for both callers
    assert runs.holding() == (1, 0)


def test_at_most_running_runs_advance_and_the_rest_wait_in_line():
    runs, gate = board(running=2), threading.Event()
    a, b, c = (runs.run(key, counting(3, gate)) for key in "abc")
    until(lambda: a.state == b.state == "running")
    assert c.state == "waiting" and c.ahead == 2 and c.items == ()
    gate.set()
    until(lambda: c.state == "done")
    assert a.items == b.items == c.items == (0, 1, 2)


def test_a_failed_run_keeps_what_it_made_and_says_why():
    def start():
        yield 1
        raise ValueError("no more")

    runs = board()
    job = runs.run("x", start)
    until(lambda: job.finished)
    assert job.state == "failed" and job.items == (1,) and str(job.error) == "no more"


def test_a_run_nobody_watches_pauses_and_goes_on_where_it_was(monkeypatch):
    monkeypatch.setattr(jobs, "IDLE_S", 0.2)
    runs = board(running=1)
    job = runs.run("slow", counting(50, pace=0.02))
    until(lambda: job.state == "idle", timeout=10)
    paused_at = len(job.items)
    assert 0 < paused_at < 50
    # Its slot is free meanwhile: another run advances.
    other = runs.run("other", counting(3))
    until(lambda: other.state == "done")
    time.sleep(0.3)
    assert len(job.items) == paused_at
    while job.state != "done":  # a viewer looking at it again and again
        runs.run("slow", counting(50))
        time.sleep(0.05)
    assert job.items == tuple(range(50))


def test_finished_runs_go_least_recently_seen_first_once_the_bytes_pass_the_bound():
    runs = board(max_bytes=3 * 800, size=lambda items: sum(np.asarray(i).nbytes for i in items))

    def arrays():
        yield np.zeros(100)  # 800 bytes

    for key in "abcd":
        job = runs.run(key, arrays)
        until(lambda job=job: job.state == "done")
        time.sleep(0.01)
    runs.run("b", arrays)  # looked at again: now the most recently seen
    time.sleep(0.01)
    last = runs.run("e", arrays)
    until(lambda: last.state == "done")
    until(lambda: runs.holding()[1] <= 3 * 800)
    kept = set(runs._jobs)
    assert "b" in kept and "e" in kept and "a" not in kept
    assert runs.holding() == (3, 2400)


def test_a_board_full_of_unfinished_runs_refuses_a_new_key(monkeypatch):
    runs, gate = board(running=1, max_jobs=2), threading.Event()
    runs.run("a", counting(2, gate))
    runs.run("b", counting(2, gate))
    with pytest.raises(BoardFull, match="already running 2 trainings"):
        runs.run("c", counting(2, gate))
    gate.set()
    until(lambda: all(job.finished for job in runs._jobs.values()))
    assert runs.run("c", counting(2)).key == "c"  # a finished run makes room


def test_clear_stops_and_drops_every_run():
    runs, gate = board(), threading.Event()
    job = runs.run("a", counting(100, gate))
    until(lambda: job.state == "running")
    runs.clear()
    gate.set()
    time.sleep(0.1)
    assert runs.holding() == (0, 0)
    assert len(job.items) <= 2  # it stopped at its next item


def test_a_job_counts_the_viewers_watching_it():
    runs = board()
    job = runs.run("a", counting(3), viewer="one")
    runs.run("a", counting(3), viewer="two")
    runs.run("a", counting(3), viewer="one")
    assert job.watchers(5.0) == 2
    time.sleep(0.05)
    runs.run("a", counting(3), viewer="three")
    assert job.watchers(0.03) == 1  # only the latest looked this recently
