"""Let a model go after some minutes without a viewer, as Ollama's keep-alive does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class IdleRelease:
    """Calls `release` once `minutes()` have passed since the last `used()`; 0 minutes: never.

    One timer at a time, armed by the first use after a release: a busy page costs a clock read
    per run, not a thread.
    """

    def __init__(self, release: Callable[[], None], minutes: Callable[[], float]):
        self._release = release
        self._minutes = minutes
        self._lock = threading.Lock()
        self._last_use = 0.0
        self._timer: threading.Timer | None = None

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def used(self) -> None:
        minutes = self._minutes()
        if minutes <= 0:
            return
        with self._lock:
            self._last_use = time.monotonic()
            if self._timer is None:
                self._arm(60 * minutes)

    def _arm(self, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self.release_if_idle)
        self._timer.daemon = True
        self._timer.start()

    def release_if_idle(self) -> None:
        """What the timer does: release now if nothing used it since, else wait out the rest."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()  # a no-op when the timer itself is the caller
                self._timer = None
            limit = 60 * self._minutes()
            if limit <= 0:
                return
            left = limit - (time.monotonic() - self._last_use)
            if left > 0:
                self._arm(left)
                return
        self._release()
