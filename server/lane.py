"""One model computation at a time in the process, the others in line.

A room's heavy work (a prompt through SmolLM2, the long-context passes, a probe of every head)
holds its steps while it runs: 100-300 MB for a few hundred tokens. Twenty viewers asking for
twenty different things at once would hold twenty of them, and on two cores they would not
finish sooner side by side than one after another. So every computation a byte cache makes
takes its turn here (ui.widgets.byte_cache), and a viewer in line is told how many are ahead.

    MODEL_RUNS.turn()     a context manager: wait for the lane, run, give it back; a thread
                          already in its turn (a decode step computed inside a generation)
                          goes straight on
    MODEL_RUNS.waiting    how many threads are in line now
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Lane:
    """A lock that a thread may take again while it holds it, and that counts who waits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = threading.Lock()
        self._holder = threading.local()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    def held_here(self) -> bool:
        return getattr(self._holder, "depth", 0) > 0

    def busy(self) -> bool:
        return self._lock.locked()

    @contextmanager
    def turn(self) -> Iterator[None]:
        if self.held_here():
            self._holder.depth += 1
            try:
                yield
            finally:
                self._holder.depth -= 1
            return
        with self._count:
            self._waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._count:
                self._waiting -= 1
        self._holder.depth = 1
        try:
            yield
        finally:
            self._holder.depth = 0
            self._lock.release()


MODEL_RUNS = Lane()
