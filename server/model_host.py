"""The model host: each real model loaded once per process, shared by every session, let go when
nobody has used it for a while, and what was computed with it let go with it.

    host = ModelHost(read, idle_minutes=..., kept_for_life=...)
    host.start(), host.wait(s), host.value(), host.progress
                            the load, in a thread of its own (`LoadedOnce`): a session that
                            moves on does not stop the load the others wait for
    host.used()             a viewer used the model: the idle clock starts again (server.idle)
    host.holds(cache)       a cache of what the model computed (anything with `clear()`):
                            emptied when the model is let go
    host.after_load(f)      `f(model)` prepares what a page's default link shows, after every
                            load, once no viewer's model run has been going or in line for a
                            while (server.lane.wait_until_quiet)
    host.release()          let the model and those caches go, and hand the memory back
    host.forget()           the same, and read the files again at the next load

    ChosenModelHost(read, ...)  the same for one model of several a server lists: host.want(name)
                            lets another one go and loads `name` at the next start

`read(progress)` returns a result with a `model` attribute (None when the model could not be
loaded, the result then saying why). How a model is read (a child process that keeps it, or a
plain read here), and what a page shows meanwhile, are the caller's: nothing here draws.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from server.idle import IdleRelease
from server.lane import wait_until_quiet
from server.loaded_once import LoadedOnce
from server.memory import release_freed_memory, reuse_freed_memory, stop_reusing_freed_memory

# Nobody asked for the default views: they wait until no viewer's model run has been going or in
# line for this long, so in a busy room the viewers compute as they would without them.
QUIET_BEFORE_PREPARING_S = 1.0
# "0" leaves the default views to the first viewer who asks (a server that must not compute what
# nobody asked for; the in-process tests, whose every test starts from empty caches).
PREPARE_ENV_VAR = "ATTENTION_EXPLORER_PREPARE_DEFAULT_VIEWS"


class Loaded(Protocol):
    model: Any


class ModelHost:
    """One model for the process (see the module). `idle_minutes()` read at each use: 0 keeps
    the model for the server's life; `reuse_memory` keeps freed heap pages between passes (a
    model whose every pass frees a few hundred MB of steps)."""

    def __init__(
        self,
        read: Callable[[Callable[[int, int], None]], Loaded],
        *,
        name: str,
        idle_minutes: Callable[[], float] = lambda: 0.0,
        reuse_memory: bool = False,
    ):
        self.name = name
        self._read = read
        self._reuse_memory = reuse_memory
        self._loading = LoadedOnce(self._load)
        self._idle = IdleRelease(self.release, idle_minutes)
        self._held: list = []
        self._prepares: list[Callable[[Any], object]] = []
        self._last: Callable[[], Any] = _nothing
        self.preparing_thread = f"{name}-default-views"

    # -- the load ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin loading, unless the model is held or a load is running."""
        self._loading.start()

    def wait(self, seconds: float) -> bool:
        """True once the load that runs has ended (with a model or a reason why not)."""
        return self._loading.wait(seconds)

    def value(self) -> Loaded | None:
        """What the last load gave, or None while nothing is loaded."""
        return self._loading.value()

    @property
    def progress(self) -> tuple[int, int]:
        """(done, total) of the load running now."""
        return self._loading.progress

    def used(self) -> None:
        self._idle.used()

    def release_if_idle(self) -> None:
        """What the idle timer does: let the model go if nothing used it since."""
        self._idle.release_if_idle()

    def _load(self, progress: Callable[[int, int], None]) -> Loaded:
        loaded = self._read(progress)
        model = loaded.model
        if model is None:
            return loaded
        if self._last() is not model:
            self._remember(model)
        if self._reuse_memory:
            reuse_freed_memory()
        if self._prepares and os.environ.get(PREPARE_ENV_VAR, "").strip() != "0":
            threading.Thread(target=self.prepare_default_views, args=(weakref.ref(model),),
                             name=self.preparing_thread, daemon=True).start()  # fmt: skip
        return loaded

    def last_model(self) -> Any:
        """The model a viewer still holds after an idle release, or None: the next load takes
        that copy instead of reading a second one."""
        return self._last()

    def _remember(self, model: Any) -> None:
        # Its memory goes back once the last holder lets go: glibc keeps freed pages until
        # trimmed, and the arrays go just after the model.
        self._last = weakref.ref(model)
        weakref.finalize(model, _trim_soon)

    # -- what goes with the model -----------------------------------------------------------------

    def holds(self, cache: Any) -> Any:
        """Register a cache (anything with `clear()`) whose entries hold what the model
        computed: `release` empties it with the model."""
        self._held.append(cache)
        return cache

    def after_load(self, prepare: Callable[[Any], object]) -> Callable[[Any], object]:
        """Register `prepare(model)`, which fills a page's caches with its default link's view."""
        self._prepares.append(prepare)
        return prepare

    @property
    def default_views(self) -> tuple[Callable[[Any], object], ...]:
        return tuple(self._prepares)

    def prepare_default_views(self, model: weakref.ref) -> None:
        """Each registered default view in turn, each once the lanes are quiet; stops if the
        model (a weak reference: preparing does not keep it from an idle release) is let go."""
        for prepare in self._prepares:
            if not wait_until_quiet(QUIET_BEFORE_PREPARING_S, lambda: model() is not None):
                return
            loaded = model()
            if loaded is None:
                return
            try:
                prepare(loaded)
            except Exception as error:  # a viewer opening the page meets it, with its message
                logging.getLogger(__name__).error("Preparing %s failed: %s",
                                                  prepare.__qualname__, error)  # fmt: skip
            del loaded

    def release(self) -> None:
        """Let the model and everything computed with it go, and hand their memory back."""
        self._loading.forget()
        for cache in self._held:
            cache.clear()
        gc.collect()
        if self._reuse_memory:
            stop_reusing_freed_memory()
        release_freed_memory()

    def forget(self) -> None:
        """Read the model files again at the next load (after a failed load, or a new file)."""
        self._last = _nothing
        self.release()


def _nothing() -> None:
    return None


def _trim_soon() -> None:
    timer = threading.Timer(1.0, release_freed_memory)
    timer.daemon = True
    timer.start()


class ChosenModelHost(ModelHost):
    """The one model, of those a server lists, held besides its defaults: asking for another
    lets the held one go, with what was computed with it, and loads the one asked for next.

    `read(name, progress)` reads the model `name`; its result says which name it holds
    (`loaded.name`), so a session that finds another model there (a viewer asked for another
    one meanwhile) waits for its own."""

    def __init__(
        self,
        read: Callable[[str, Callable[[int, int], None]], Loaded],
        *,
        name: str,
        idle_minutes: Callable[[], float] = lambda: 0.0,
    ):
        self._choice_lock = threading.Lock()
        self._wanted = ""
        self._read_named = read
        super().__init__(self._read_wanted, name=name, idle_minutes=idle_minutes)

    def _read_wanted(self, progress: Callable[[int, int], None]) -> Loaded:
        return self._read_named(self._wanted, progress)

    @property
    def wanted(self) -> str:
        return self._wanted

    def forget(self) -> None:
        """Let the model go, and want none until asked again."""
        self._wanted = ""
        super().forget()

    def want(self, name: str) -> None:
        """Hold `name` from now on: another model held or loading is let go."""
        with self._choice_lock:
            if name == self._wanted:
                return
            if self._wanted:
                self.forget()
            self._wanted = name
