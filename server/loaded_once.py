"""One value per process, loaded once in a thread of its own by whichever session asks first;
every session waits for that load, with the same progress.

    once = LoadedOnce(load)    load(progress) -> value; progress(done, total)
    once.start()               begin loading, unless a value is held or a load is running
    once.wait(s), once.value(), once.progress
    once.forget()              let the value go (a load running now is let go when it ends)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class LoadedOnce:
    """One value per process, loaded once in a background thread and kept until `forget()`.

    `load(progress)` runs in that thread, not in the session that asked first: a session that
    moves on or closes its tab does not stop the load the others are waiting for.
    """

    def __init__(self, load: Callable[[Callable[[int, int], None]], Any]):
        self._load = load
        self._lock = threading.Lock()
        self._loaded = threading.Event()
        self._value: Any = None
        self._failure: BaseException | None = None
        self._loading = False
        self._generation = 0
        self.progress = (0, 0)  # (done, total) of the load running now

    def value(self) -> Any:
        """The loaded value, or None while nothing is loaded."""
        with self._lock:
            if self._failure is not None:
                raise self._failure
            return self._value

    def start(self) -> None:
        """Begin loading, unless a value is held or a load is running."""
        with self._lock:
            if self._value is not None or self._loading:
                return
            self._loading, self._failure, self.progress = True, None, (0, 0)
            self._loaded.clear()
            generation = self._generation
        threading.Thread(target=self._run, args=(generation,), daemon=True).start()

    def wait(self, seconds: float) -> bool:
        """True once the load that runs has ended (with a value or a failure)."""
        return self._loaded.wait(seconds)

    def forget(self) -> None:
        """Let the value go; a load running now is let go when it ends."""
        with self._lock:
            self._generation += 1
            self._value = self._failure = None
            self._loading = False
            self._loaded.clear()

    def _run(self, generation: int) -> None:
        def progress(done: int, total: int) -> None:
            self.progress = (done, total)

        value, failure = None, None
        try:
            value = self._load(progress)
        except BaseException as error:  # kept for the sessions waiting: they raise it
            failure = error
        with self._lock:
            if generation != self._generation:
                return  # forgotten while it loaded
            self._value, self._failure, self._loading = value, failure, False
            self._loaded.set()
