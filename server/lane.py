"""Model runs in two lanes, one run at a time in each, the others in line, first come first served.

A room's heavy work (a prompt through SmolLM2, the long-context passes, a probe of every head)
holds its steps while it runs: 100-300 MB for a few hundred tokens. Twenty viewers asking for
twenty different things at once would hold twenty of them, and on two cores they would not
finish sooner side by side than one after another. So every computation a byte cache makes
takes its turn in a lane (ui.widgets.byte_cache), and a viewer in line is told how many are
ahead. Two lanes, as the machine has two cores: what a page's first screen needs (a prompt's
pass, a decode step) in QUICK_RUNS, and work of many passes (the long-context passes, the
probes' causal check, hiding each token in turn) in LONG_RUNS, so that a viewer opening the
decoder does not wait behind another viewer's seconds-long experiment.

    QUICK_RUNS.turn()     a context manager: wait for the lane, run, give it back. A thread
                          already in a turn of either lane goes straight on (a decode step
                          computed inside a generation, a pass inside an experiment), so no
                          thread ever waits for a lane while it holds one
    turn(waiting=tell)    tell(runs ahead) is called every WAIT_CHECK_S while in line, outside
                          the lane's lock; whatever it raises takes the thread out of the line.
                          A page's waiting notice is drawn there, and a Streamlit script
                          stops at a drawing call once its viewer has moved a widget again:
                          a run nobody waits for any more leaves the line instead of taking
                          its turn
    lane.waiting          how many threads are in line now
    the cores             while both lanes run, NumPy's products use one core each, and
                          every core again once one lane is left (server.blas): two passes
                          that each split their products over both cores wait for each
                          other's threads
    switch_threads_often()
                          the GIL's switch interval shortened to SWITCH_INTERVAL_S, once per
                          process
    wait_until_quiet(s, wanted)
                          until neither lane has run nor had a run in line for s seconds:
                          for work nobody waits for (a page's default view, prepared ahead)
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from server.blas import share_cores

_turns = threading.local()
# How often a thread in line says where it stands: often enough that a viewer who has moved on
# leaves the line before the run ahead finishes, rarely enough to cost nothing.
WAIT_CHECK_S = 0.5


def in_a_turn() -> bool:
    """Whether this thread runs inside a turn of some lane."""
    return getattr(_turns, "depth", 0) > 0


class Lane:
    """Turns in the order they were asked for (a plain lock lets a thread lose again and again
    under a room's load); a thread already in a turn does not wait."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._condition = threading.Condition()
        self._line: deque[object] = deque()
        self._running = False

    @property
    def waiting(self) -> int:
        return len(self._line)

    def busy(self) -> bool:
        return self._running

    @contextmanager
    def turn(self, waiting: Callable[[int], None] | None = None) -> Iterator[None]:
        if in_a_turn():
            _turns.depth += 1
            try:
                yield
            finally:
                _turns.depth -= 1
            return
        ticket = object()
        with self._condition:
            self._line.append(ticket)
        try:
            while not self._taken(ticket, None if waiting is None else WAIT_CHECK_S):
                if waiting is not None:
                    waiting(self._ahead(ticket))
        except BaseException:  # out of the line while in it: the ones behind move up
            with self._condition:
                if ticket in self._line:
                    self._line.remove(ticket)
                self._condition.notify_all()
            raise
        _turns.depth = 1
        try:
            _share_cores()
            yield
        finally:
            _turns.depth = 0
            with self._condition:
                self._running = False
                self._condition.notify_all()
            _share_cores()

    def _taken(self, ticket: object, timeout: float | None) -> bool:
        """Whether the ticket got the turn, waiting up to `timeout` s for it (None: for good)."""
        with self._condition:
            if self._running or self._line[0] is not ticket:
                self._condition.wait(timeout)
            if self._running or self._line[0] is not ticket:
                return False
            self._line.popleft()
            self._running = True
            return True

    def _ahead(self, ticket: object) -> int:
        """The runs before the ticket's: the one running and those in line before it."""
        with self._condition:
            return self._line.index(ticket) + self._running


QUICK_RUNS = Lane("quick")
LONG_RUNS = Lane("long")
LANES = (QUICK_RUNS, LONG_RUNS)


def wait_until_quiet(seconds: float, wanted: Callable[[], bool], poll: float = 0.1) -> bool:
    """Wait until no lane has had a run going or in line for `seconds`: True then, False as soon
    as `wanted()` is false (what the wait was for is gone). For work no viewer asked for, which
    must not hold up one who does."""
    quiet_since = None  # seen quiet since then, with no run seen after
    while wanted():
        now = time.monotonic()
        if any(lane.busy() or lane.waiting for lane in LANES):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= seconds:
            return True
        time.sleep(poll)
    return False


_sharing = threading.Lock()


def _share_cores() -> None:
    # Counted and set under one lock: a turn ending and one starting at once must not leave
    # the count that only the first of them saw.
    with _sharing:
        share_cores(sum(lane.busy() for lane in LANES))


# A model run gives up the GIL for each large NumPy call and waits to take it back, this long
# or more, behind the sessions drawing pages: a forward pass is thousands of such calls, so a
# short interval finishes a busy server's passes sooner without costing the room its page runs
# (chosen with bench/bench_busy_first_visit.py).
SWITCH_INTERVAL_S = 0.0002


def switch_threads_often() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
