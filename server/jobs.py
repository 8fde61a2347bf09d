"""Long computations a room watches together: one run per key, in a thread of its own, its
progress readable by every viewer at any moment.

Training a model on the learning page takes seconds to a minute, and every viewer of one link
must watch the same run grow: a room of fifty starts one, and a viewer who arrives midway sees
what is done so far. So a run is not a page script's call: `board.run(key, start)` starts it
once, in a thread of its own, and hands every caller the same `Job`, whose items grow as the run
yields them. Each item is made in a turn of the LONG_RUNS lane (server.lane), so the room's
other long runs wait for one item at most, and at most `running` jobs advance at once, the
others in line, first come first served.

    board = JobBoard("learning", running=2, max_jobs=8, max_bytes=64 * MB, size=nbytes)
    job = board.run(key, start)    the job of `key`; `start()` -> an iterator, called once
    job.items                      the items so far: a tuple, replaced (never changed) as it grows
    job.state                      "waiting", "running", "idle", "done" or "failed"
    job.ahead                      while waiting: the jobs running or in line before it
    job.error                      a failed job's exception
    job.seen(viewer)               a viewer looks at it: a job no viewer has looked at for
                                   IDLE_S stops between items (its slot goes to the next in
                                   line) and goes on where it was when someone looks again
    job.watchers(seconds)          how many viewers looked in the last `seconds`
    board.holding()                (jobs, bytes of their items), bounded: finished jobs go,
                                   least recently seen first, once the bytes pass max_bytes
    board.clear()                  every job stopped and dropped

A board refuses a new key (BoardFull) when `max_jobs` jobs are unfinished, so a stranger's
links cannot start runs without end.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from server.lane import LONG_RUNS, Lane

__all__ = ["IDLE_S", "BoardFull", "Job", "JobBoard"]

# A job nobody has looked at for this long stops taking turns: pages look every second or so
# while a run grows, so a minute without one means every viewer has left.
IDLE_S = 60.0
# The viewers a job remembers at most (a room's), each by the server's name for its session.
MAX_VIEWERS = 256


class BoardFull(RuntimeError):
    """Every place on the board holds an unfinished job."""


class Job:
    """One run, shared by everyone who asked for its key (see the module docstring)."""

    def __init__(self, key: str, start: Callable[[], Iterator[Any]]) -> None:
        self.key = key
        self.items: tuple[Any, ...] = ()
        self.state = "waiting"
        self.ahead = 0
        self.error: BaseException | None = None
        self._start = start
        self._iterator: Iterator[Any] | None = None
        self._seen = time.monotonic()
        self._viewers: dict[str, float] = {}
        self._stopped = False

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    def seen(self, viewer: str = "") -> None:
        now = self._seen = time.monotonic()
        if viewer:
            self._viewers[viewer] = now
            if len(self._viewers) > 4 * MAX_VIEWERS:  # forget those gone longest
                for gone in sorted(self._viewers, key=self._viewers.get)[:MAX_VIEWERS]:
                    del self._viewers[gone]

    def watchers(self, seconds: float) -> int:
        """How many viewers have looked at the job in the last `seconds`."""
        since = time.monotonic() - seconds
        return sum(seen >= since for seen in list(self._viewers.values()))

    def idle_for(self) -> float:
        return time.monotonic() - self._seen

    def _next(self, lane: Lane) -> bool:
        """Make one more item in a turn of `lane`; False once the run has ended."""
        with lane.turn():
            if self._iterator is None:
                self._iterator = self._start()
            try:
                item = next(self._iterator)
            except StopIteration:
                self.state = "done"
                return False
            except Exception as error:  # a run's own failure is its viewers' to read
                self.error, self.state = error, "failed"
                return False
        self.items = (*self.items, item)
        return True


class JobBoard:
    """The jobs of one kind of run, by key (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        running: int = 2,
        max_jobs: int = 8,
        max_bytes: int,
        size: Callable[[Any], int],
        lane: Lane = LONG_RUNS,
    ) -> None:
        self.name, self.running, self.max_jobs = name, running, max_jobs
        self.max_bytes, self.size, self.lane = max_bytes, size, lane
        self._jobs: dict[str, Job] = {}
        self._line: deque[Job] = deque()
        self._active: set[Job] = set()
        self._condition = threading.Condition()

    def run(self, key: str, start: Callable[[], Iterator[Any]], viewer: str = "") -> Job:
        """The job of `key`, started (in line) if the board does not hold it; `viewer` (a
        session's name, given by the server) looks at it."""
        with self._condition:
            job = self._jobs.get(key)
            if job is None:
                self._make_room()
                job = self._jobs[key] = Job(key, start)
                self._line.append(job)
                threading.Thread(target=self._work, args=(job,), daemon=True,
                                 name=f"{self.name}-job").start()  # fmt: skip
            job.seen(viewer)
            self._condition.notify_all()  # an idle job that is looked at again goes on
            return job

    def _make_room(self) -> None:
        # Under the condition: finished jobs go first, then the longest idle unfinished one.
        while len(self._jobs) >= self.max_jobs:
            finished = [job for job in self._jobs.values() if job.finished]
            idle = [job for job in self._jobs.values() if job.idle_for() > IDLE_S]
            candidates = finished or idle
            if not candidates:
                raise BoardFull(
                    f"This server is already running {len(self._jobs)} trainings for other "
                    "viewers; yours can start when one of them finishes, in a minute or so."
                )
            self._drop(max(candidates, key=Job.idle_for))

    def _drop(self, job: Job) -> None:
        job._stopped = True
        self._jobs.pop(job.key, None)
        if job in self._line:
            self._line.remove(job)
        self._condition.notify_all()

    def _work(self, job: Job) -> None:
        while self._take_slot(job):
            while not job._stopped and job.idle_for() <= IDLE_S and job._next(self.lane):
                self._shrink()
            with self._condition:
                self._active.discard(job)
                self._condition.notify_all()
                if job.finished or job._stopped:
                    self._shrink()
                    return
                # Idle: the slot goes to the next in line until someone looks again.
                job.state = "idle"
                while not job._stopped and job.idle_for() > IDLE_S:
                    self._condition.wait(1.0)
                if job._stopped:
                    return
                job.state = "waiting"
                self._line.append(job)

    def _take_slot(self, job: Job) -> bool:
        """Wait in line for one of the `running` slots; False if the job was dropped meanwhile."""
        with self._condition:
            while not job._stopped and (
                self._line[0] is not job or len(self._active) >= self.running
            ):
                job.ahead = self._line.index(job) + len(self._active)
                self._condition.wait(1.0)
            if job._stopped:
                return False
            self._line.popleft()
            self._active.add(job)
            job.state, job.ahead = "running", 0
            self._condition.notify_all()
            return True

    def _shrink(self) -> None:
        with self._condition:
            finished = sorted(
                (job for job in self._jobs.values() if job.finished),
                key=Job.idle_for,
                reverse=True,
            )
            while finished and self.holding()[1] > self.max_bytes:
                self._drop(finished.pop(0))

    def holding(self) -> tuple[int, int]:
        """(jobs, bytes their items hold)."""
        jobs = list(self._jobs.values())
        return len(jobs), sum(self.size(job.items) for job in jobs)

    def clear(self) -> None:
        with self._condition:
            for job in list(self._jobs.values()):
                self._drop(job)
