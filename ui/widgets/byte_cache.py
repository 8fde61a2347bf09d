"""A process-wide cache bounded in bytes, for computations whose results are large arrays.

`st.cache_resource` counts entries, and one entry of a model page can hold a few kilobytes or a
hundred megabytes: a bound in entries says nothing about memory. This cache counts the bytes of
the arrays each result holds and lets the least recently used results go once the total passes
its bound. Like `st.cache_resource` it is shared by every session, computes each key once while
other sessions asking for the same key wait for it (fifty viewers of one link cost one forward
pass), and skips arguments whose name starts with "_" when it makes the key (a model is passed
as `_model` with its `model_id`).

    @bounded_by_bytes(64 * MB, name="heads.lens")
    def lens_of(prompt_ids: tuple[int, ...], model_id: int, _model) -> LogitLens: ...

    lens_of.clear()           empty it (a model let go: see ui.models.smollm.let_go_with_model)
    lens_of.holding()         (entries, bytes) now: what the cache holds, for the benchmarks
    every_cache()             each cache's name and holding, for a memory report
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

MB = 2**20

_CACHES: dict[str, _ByteCache] = {}


def nbytes(value: Any) -> int:
    """The bytes of the NumPy arrays `value` holds (in dataclass fields, tuples, lists, dicts),
    each buffer counted once however many views of it there are."""
    seen: set[int] = set()

    def walk(item: Any) -> int:
        if isinstance(item, np.ndarray):
            owner = (
                item if item.base is None or not isinstance(item.base, np.ndarray) else item.base
            )
            if id(owner) in seen:
                return 0
            seen.add(id(owner))
            return owner.nbytes
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return sum(walk(getattr(item, f.name)) for f in dataclasses.fields(item))
        if isinstance(item, tuple | list):
            return sum(walk(part) for part in item)
        if isinstance(item, dict):
            return sum(walk(part) for part in item.values())
        return 0

    return walk(value)


class _ByteCache:
    def __init__(self, name: str, max_bytes: int):
        self.name, self.max_bytes = name, max_bytes
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._computing: dict[str, threading.Lock] = {}

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
            # One lock per key: a second session asking for it waits for the first's result.
            computing = self._computing.setdefault(key, threading.Lock())
        with computing:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key][0]
            try:
                value = compute()
            finally:
                with self._lock:
                    self._computing.pop(key, None)
            size = nbytes(value)
            with self._lock:
                self._entries[key] = (value, size)
                self._shrink()
            return value

    def _shrink(self) -> None:
        total = sum(size for _, size in self._entries.values())
        # The newest entry stays even if it alone passes the bound: it is what a viewer is
        # looking at.
        while total > self.max_bytes and len(self._entries) > 1:
            _, (_, size) = self._entries.popitem(last=False)
            total -= size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def holding(self) -> tuple[int, int]:
        with self._lock:
            return len(self._entries), sum(size for _, size in self._entries.values())


def bounded_by_bytes(max_bytes: int, *, name: str) -> Callable[[Callable], Callable]:
    """Cache a function's results process-wide, at most `max_bytes` of arrays (see module)."""

    def wrap(function: Callable) -> Callable:
        signature = inspect.signature(function)
        cache = _CACHES.setdefault(name, _ByteCache(name, max_bytes))

        @functools.wraps(function)
        def cached(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            keyed = {k: v for k, v in bound.arguments.items() if not k.startswith("_")}
            key = hashlib.sha256(pickle.dumps(keyed, protocol=5)).hexdigest()
            return cache.get(key, lambda: function(*args, **kwargs))

        cached.clear = cache.clear
        cached.holding = cache.holding
        return cached

    return wrap


def every_cache() -> dict[str, tuple[int, int]]:
    """Each byte-bounded cache's (entries, bytes) now, by name."""
    return {name: cache.holding() for name, cache in _CACHES.items()}


def clear_every_cache() -> None:
    """Empty every byte-bounded cache (the tests start each test with cold caches)."""
    for cache in _CACHES.values():
        cache.clear()
