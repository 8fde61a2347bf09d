"""A process-wide cache bounded in bytes, for computations whose results are large arrays.

`st.cache_resource` counts entries, and one entry of a model page can hold a few kilobytes or a
hundred megabytes: a bound in entries says nothing about memory. This cache counts the bytes of
the arrays its results hold, each buffer once however many results share it, and lets the least
recently used results go once the total passes its bound. Like `st.cache_resource` it is shared
by every session, computes each key once while other sessions asking for the same key wait for
it, and for nothing else (fifty viewers of one link cost one forward pass), skips arguments
whose name starts with "_" when it makes the key (a model is passed as `_model` with its
`model_id`), and is emptied by the menu's "Clear caches". What it computes takes its turn in
one of the process's two lanes (server.lane), so a room holds two runs' steps at most, not one
per viewer; a session in line whose viewer has moved a widget since leaves the line. Cheap
work (a toy page's arithmetic, milliseconds) is cached with `lane=None`: computed in the
caller's thread at once, never behind another viewer's forward pass, still once per key. Such
a computation must not call a cache with a lane: it would wait for a turn while holding its
key. A result holding no array (a few numbers: a timing, a comparison's largest difference)
counts as SMALL_ENTRY_BYTES, so a cache of them is bounded too. A cache whose bound is set for
its largest results may also keep at most `max_entries` of them: small results would otherwise
fill the bound many times over what a viewer looks at.

    @bounded_by_bytes(64 * MB, name="heads.lens")
    def lens_of(prompt_ids: tuple[int, ...], model_id: int, _model) -> LogitLens: ...

    @bounded_by_bytes(MB, name="cost.decoding", lane=None)
    def step_by_step(n_decode: int, seed: int) -> tuple[np.ndarray, float]: ...

    lens_of.clear()           empty it (a model let go: see ui.models.smollm.let_go_with_model)
    lens_of.holding()         (entries, bytes) now: what the cache holds, for the benchmarks
    lens_of.computed()        how many results it has computed (a miss each), for the tests
    read_only(value)          `value`, its arrays made read-only: one result is every
                              session's, so no caller may change it in place
    digest_of(*inputs)        a string standing for a result, made from the inputs that
                              computed it (the figure cache's key: ui.widgets.render.digested)
    every_cache()             each cache's name and holding (what_caches_hold: in MB, for
                              server.memory's report)
    register_holder(name, h)  something else holding a room's arrays (a board of runs),
                              counted and emptied with the caches
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import pickle
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Protocol

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from server.lane import QUICK_RUNS, WAIT_CHECK_S, Lane

MB = 2**20
# What a result holding no array counts against its cache's bound: a few numbers and their
# Python objects take a few hundred bytes, and without a size a cache of them would never shrink.
SMALL_ENTRY_BYTES = 1024

_CACHES: dict[str, _ByteCache | Holder] = {}
_spinning = threading.local()


def arrays(value: Any) -> Iterator[np.ndarray]:
    """The NumPy arrays `value` holds, in dataclass fields, tuples, lists and dicts."""
    if isinstance(value, np.ndarray):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from arrays(getattr(value, field.name))
    elif isinstance(value, tuple | list):
        for part in value:
            yield from arrays(part)
    elif isinstance(value, dict):
        for part in value.values():
            yield from arrays(part)


def _owner(array: np.ndarray) -> np.ndarray:
    return array if not isinstance(array.base, np.ndarray) else array.base


def buffers(value: Any) -> dict[int, np.ndarray]:
    """The arrays that own the memory of the NumPy arrays `value` holds (in dataclass fields,
    tuples, lists, dicts), by id: each buffer once however many views of it there are."""
    return {id(owner): owner for owner in map(_owner, arrays(value))}


def read_only(value: Any) -> Any:
    """`value`, with every array it holds (and the buffer under it) made read-only: a cached
    result is every session's, and a caller writing into it would change what others see."""
    for array in arrays(value):
        array.setflags(write=False)
        _owner(array).setflags(write=False)
    return value


def digest_of(*inputs: Any) -> str:
    """A sha256 of `inputs` (small, picklable: ids, a text, a model's id, a digest): given to a
    result made from them, it stands for the result's arrays in the figure cache's key."""
    return hashlib.sha256(pickle.dumps(inputs, protocol=5)).hexdigest()


def nbytes(value: Any) -> int:
    """The bytes of the NumPy arrays `value` holds, each buffer counted once."""
    return sum(owner.nbytes for owner in buffers(value).values())


@st.cache_resource(show_spinner=False)
def _cleared_with_streamlit() -> object:
    # Held by Streamlit's resource cache alone: the menu's "Clear caches" lets it go, and its
    # finalizer empties every byte cache with it. The next cached call makes a new one.
    token = _Token()
    weakref.finalize(token, clear_every_cache)
    return token


class _Token:
    """Something to finalize: a bare object() takes no weak reference."""


class _Notice:
    """A line on the page, drawn again at every call. Drawing is also where Streamlit stops a
    script whose viewer has moved a widget since the run began (it checks for a newer run at
    each element sent): a wait that draws its notice every WAIT_CHECK_S ends within that long
    once nobody is waiting for its result any more."""

    def __init__(self) -> None:
        self._slot: Any = None

    def show(self, text: str) -> None:
        if not _on_a_page():
            return
        if self._slot is None:
            self._slot = st.empty()
        self._slot.caption(f":material/hourglass_top: {text}")

    def clear(self) -> None:
        if self._slot is not None:
            self._slot.empty()


@contextmanager
def waiting_turn(lane: Lane) -> Iterator[None]:
    """The lane's turn. A session in line is told how many runs are ahead of it, and leaves the
    line if its viewer moves on meanwhile (_Notice). For model work that is not cached (a
    timing), so that it too takes its turn."""
    notice = _Notice()

    def tell(ahead: int) -> None:
        runs = "run" if ahead == 1 else "runs"
        notice.show(f"Waiting for the model: {ahead} other viewer {runs} ahead of yours…")

    with lane.turn(waiting=tell):
        notice.clear()
        yield


def _on_a_page() -> bool:
    # A thread of the server's own (a default view prepared after a load) has no page to draw on.
    return get_script_run_ctx(suppress_warning=True) is not None


def _outermost(spinner: str | None) -> Any:
    # One spinner, the outermost: a result computed from others (a decoder's step from the
    # step before) would otherwise stack one per level. None: no spinner to show.
    if spinner is None or getattr(_spinning, "on", False) or not _on_a_page():
        return None
    return st.spinner(spinner)


def _with_spinner(spinner: str | None, compute: Callable[[], Any]) -> Any:
    shown = _outermost(spinner)
    if shown is None:
        return compute()
    _spinning.on = True
    try:
        with shown:
            return compute()
    finally:
        _spinning.on = False


_MISSING = object()


class _ByteCache:
    """Entries by key, least recently used first, and the buffers they hold. Results often
    share buffers (the KV caches of a generation's steps are views of one growing buffer), so
    the bound counts each buffer once across the whole cache, however many entries hold it."""

    def __init__(
        self,
        name: str,
        max_bytes: int,
        lane: Lane | None,
        size: Callable[[Any], int] | None,
        max_entries: int | None = None,
    ):
        self.name, self.max_bytes, self.lane, self.size = name, max_bytes, lane, size
        self.max_entries = max_entries
        # key → (value, ids of the buffers it holds, bytes of its own: SMALL_ENTRY_BYTES or 0)
        self._entries: OrderedDict[str, tuple[Any, tuple[int, ...], int]] = OrderedDict()
        # id → [entries holding it, the buffer]; holding the buffer keeps its id its own.
        self._held: dict[int, list] = {}
        self._bytes = 0
        self._computed = 0
        self._lock = threading.Lock()
        self._computing: dict[str, threading.Lock] = {}

    def get(self, key: str, compute: Callable[[], Any], spinner: str | None = None) -> Any:
        with self._lock:
            kept, running = self._kept(key), self._computing.get(key)
        if kept is not _MISSING:
            return kept
        if running is not None:
            # Another session computes this very key in its turn: wait for that run, not behind
            # every run in the lane (fifty viewers of one link wait for one pass), saying what
            # it computes. Holding no lock or turn meanwhile, this thread is in no cycle.
            notice = _Notice()
            with _outermost(spinner) or nullcontext():
                while not running.acquire(timeout=WAIT_CHECK_S):
                    notice.show("Another viewer's run is computing this: its result is yours too.")
                running.release()
            notice.clear()
            with self._lock:
                kept = self._kept(key)
            if kept is not _MISSING:
                return kept
        # The lane before the key's lock: a thread holding a key's lock is always in its turn
        # (or needs none, lane=None, and takes none while it holds it), so one in line never
        # holds a lock that the one running needs.
        with nullcontext() if self.lane is None else waiting_turn(self.lane):
            with self._lock:
                # One lock per key: a session asking for a key another computes waits for it.
                computing = self._computing.setdefault(key, threading.Lock())
            with computing:
                with self._lock:
                    kept = self._kept(key)  # computed while this session waited in line
                if kept is not _MISSING:
                    return kept
                try:
                    value = _with_spinner(spinner, compute)
                    owners = buffers(value)
                    # Kept before the key's lock and the turn are given up: a session next in
                    # line for the same key then finds it instead of computing it again.
                    with self._lock:
                        self._add(key, value, owners)
                        self._shrink()
                        self._computed += 1
                finally:
                    with self._lock:
                        self._computing.pop(key, None)
        return value

    def _kept(self, key: str) -> Any:
        # Under self._lock: the entry's value, now the most recently used, or _MISSING.
        if key not in self._entries:
            return _MISSING
        self._entries.move_to_end(key)
        return self._entries[key][0]

    def _add(self, key: str, value: Any, owners: dict[int, np.ndarray]) -> None:
        if key in self._entries:  # computed again after a clear() that raced with it
            self._drop(key)
        for ident, owner in owners.items():
            held = self._held.setdefault(ident, [0, owner])
            if held[0] == 0:
                self._bytes += owner.nbytes
            held[0] += 1
        # What holds no array counts what `size` says (a figure) or SMALL_ENTRY_BYTES.
        own = self.size(value) if self.size else 0 if owners else SMALL_ENTRY_BYTES
        self._bytes += own
        self._entries[key] = (value, tuple(owners), own)

    def _drop(self, key: str) -> None:
        _, idents, own = self._entries.pop(key)
        self._bytes -= own
        for ident in idents:
            held = self._held[ident]
            held[0] -= 1
            if held[0] == 0:
                self._bytes -= held[1].nbytes
                del self._held[ident]

    def _shrink(self) -> None:
        # The newest entry stays even if it alone passes the bound: it is what a viewer is
        # looking at.
        most = self.max_entries or len(self._entries)
        while len(self._entries) > 1 and (
            self._bytes > self.max_bytes or len(self._entries) > most
        ):
            self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held.clear()
            self._bytes = 0

    def holding(self) -> tuple[int, int]:
        with self._lock:
            return len(self._entries), self._bytes

    def computed(self) -> int:
        """How many results this process has computed for the cache (a miss each)."""
        with self._lock:
            return self._computed


def bounded_by_bytes(
    max_bytes: int,
    *,
    name: str,
    spinner: str | None = None,
    lane: Lane | None = QUICK_RUNS,
    size: Callable[[Any], int] | None = None,
    max_entries: int | None = None,
) -> Callable[[Callable], Callable]:
    """Cache a function's results process-wide, at most `max_bytes` of arrays (see module);
    `spinner`, if given, is shown to the session that computes a result, which waits for its
    turn in `lane` (server.lane.LONG_RUNS for work of many passes; None for cheap work that
    needs no turn: computed at once in the caller's thread, still once per key). `size(result)`
    counts what a result holds besides its arrays (a figure's Plotly objects); `max_entries`,
    if given, how many results it keeps at most."""

    def wrap(function: Callable) -> Callable:
        signature = inspect.signature(function)
        cache = _CACHES.setdefault(name, _ByteCache(name, max_bytes, lane, size, max_entries))

        @functools.wraps(function)
        def cached(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            keyed = {k: v for k, v in bound.arguments.items() if not k.startswith("_")}
            key = hashlib.sha256(pickle.dumps(keyed, protocol=5)).hexdigest()
            _cleared_with_streamlit()
            return cache.get(key, lambda: function(*args, **kwargs), spinner)

        cached.clear = cache.clear
        cached.holding = cache.holding
        cached.computed = cache.computed
        cached.max_bytes = max_bytes
        return cached

    return wrap


class Holder(Protocol):
    """Something else that holds a room's arrays: counted and emptied with the caches."""

    def holding(self) -> tuple[int, int]: ...

    def clear(self) -> None: ...


def register_holder(name: str, holder: Holder) -> None:
    """Count `holder` (entries, bytes) among the caches and empty it with them (the learning
    page's board of runs: server.jobs)."""
    _CACHES[name] = holder


def every_cache() -> dict[str, tuple[int, int]]:
    """Each byte-bounded cache's (entries, bytes) now, by name."""
    return {name: cache.holding() for name, cache in _CACHES.items()}


def what_caches_hold() -> dict[str, dict[str, float]]:
    """Each byte-bounded cache's entries and MB now, by name: for server.memory's report."""
    return {
        name: {"entries": entries, "mb": round(held / MB, 1)}
        for name, (entries, held) in every_cache().items()
    }


def clear_every_cache() -> None:
    """Empty every byte-bounded cache (the tests start each test with cold caches)."""
    for cache in _CACHES.values():
        cache.clear()
