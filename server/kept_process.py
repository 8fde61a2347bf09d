"""Calls into the child that keeps a model: model runs made there, with a GIL of its own.

A model run on a busy server waits for the GIL once for each of its thousands of NumPy calls,
behind the page scripts (bench/bench_gil_wait.py measures how much). So the child that loaded a
model stays (server.process_load.load_and_keep) and makes the long runs, and the quick ones
whenever it is idle, on the weights it shares with the server (server.shared_memory):

    keep_with(model, kept)  `run_where_kept(..., model, ...)` runs in `kept`; the child ends
                            when `model` goes
    run_where_kept(function, model, *args, **kwargs)
                            function(model, *args, **kwargs), a module-level function, run in
                            the child that keeps `model`, or here when none does (or it has
                            died): the same value either way, its arrays back in one read
    run_where_idle(function, model, *args, **kwargs)
                            the same, in the child only if it runs nothing now, else here at
                            once: for a quick run, which must not wait behind a long one
    KeptProcess.run(function, *args, **kwargs)
                            one call: a frame (server.frames) out with the function's name and
                            arguments, a frame back with its value or what it raised
    KeptProcess.run_if_idle(function, *args, **kwargs)
                            (True, the same) if no call was running, else (False, None) at once
    answer_calls(model, requests, answers)
                            the child's side: each call answered in turn until its input ends
"""

from __future__ import annotations

import logging
import subprocess
import threading
import weakref
from collections.abc import Callable
from typing import IO, Any

from server.child import ChildLoadError, child_ended, function_name, function_named
from server.frames import read_frame, write_frame
from server.memory import release_freed_memory


class KeptProcess:
    """The child that keeps a loaded value and runs functions of it, one at a time."""

    def __init__(self, child: subprocess.Popen, stderr: IO[bytes]) -> None:
        self._child, self._stderr = child, stderr
        self._lock = threading.Lock()

    def alive(self) -> bool:
        return self._child.poll() is None

    def run(self, function: Callable, *args: Any, **kwargs: Any) -> Any:
        """`function(value, *args, **kwargs)` in the child; what it raises is raised here. A
        child that has died raises `ChildLoadError`."""
        with self._lock:
            return self._call(function, args, kwargs)

    def run_if_idle(self, function: Callable, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
        """(True, what `run` returns) if the child was running nothing; (False, None) at once
        if it was."""
        if not self._lock.acquire(blocking=False):
            return False, None
        try:
            return True, self._call(function, args, kwargs)
        finally:
            self._lock.release()

    def _call(self, function: Callable, args: tuple, kwargs: dict) -> Any:
        # The caller holds the lock.
        if not self.alive():
            raise child_ended(self._child.returncode, self._stderr)
        try:
            write_frame(self._child.stdin, (function_name(function), args, kwargs))
            self._child.stdin.flush()
            failed, value = read_frame(self._child.stdout)
        except (OSError, EOFError) as error:
            self.close()
            raise ChildLoadError(f"the model's process ended during a run: {error}") from None
        except BaseException:  # interrupted mid-frame: the next request would read its rest
            self.close()
            raise
        if failed:
            raise value
        return value

    def close(self) -> None:
        """End the child (it ends by itself once its input closes) and let its memory go."""
        try:
            self._child.stdin.close()
        except OSError:
            pass
        try:
            self._child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        self._child.stdout.close()
        self._stderr.close()


# The kept processes by the id of the value they keep, while that value lives.
_kept: dict[int, KeptProcess] = {}
_kept_lock = threading.Lock()


def keep_with(value: Any, kept: KeptProcess | None) -> None:
    """Have `run_where_kept(..., value, ...)` run in `kept`; the child ends when `value` goes."""
    if kept is None:
        return
    with _kept_lock:
        _kept[id(value)] = kept
    weakref.finalize(value, _let_go, id(value), kept)


def _let_go(ident: int, kept: KeptProcess) -> None:
    _forget(ident, kept)
    kept.close()


def _forget(ident: int, kept: KeptProcess) -> None:
    # Only that entry: a value loaded since may have a child of its own under a reused id.
    with _kept_lock:
        if _kept.get(ident) is kept:
            del _kept[ident]


def run_where_kept(function: Callable, value: Any, *args: Any, **kwargs: Any) -> Any:
    """`function(value, *args, **kwargs)`, in the child that keeps `value` if there is one."""
    return _run(function, value, args, kwargs, wait=True)


def run_where_idle(function: Callable, value: Any, *args: Any, **kwargs: Any) -> Any:
    """The same, in the child only if it is running nothing now, else here at once: a quick run
    (a prompt's pass) does not wait behind another viewer's long one, and in the child it does
    not wait for the GIL behind the page scripts after each NumPy call."""
    return _run(function, value, args, kwargs, wait=False)


def _run(function: Callable, value: Any, args: tuple, kwargs: dict, *, wait: bool) -> Any:
    with _kept_lock:
        kept = _kept.get(id(value))
    if kept is not None:
        try:
            if wait:
                return kept.run(function, *args, **kwargs)
            ran, result = kept.run_if_idle(function, *args, **kwargs)
            if ran:
                return result
        except ChildLoadError as error:
            # The page still gets its numbers, at this process's pace.
            logging.getLogger(__name__).error(
                "Running %s here instead: %s", function.__name__, error
            )
            _forget(id(value), kept)
    return function(value, *args, **kwargs)


def answer_calls(value: Any, requests: IO[bytes], answers: IO[bytes]) -> None:
    """In the child: each `KeptProcess.run` read from `requests` and answered on `answers`,
    until `requests` ends (the server let the value go, or ended)."""
    while True:
        try:
            name, args, kwargs = read_frame(requests)
        except EOFError:
            return
        try:
            answer = (False, function_named(name)(value, *args, **kwargs))
        except Exception as error:
            answer = (True, error)
        try:
            write_frame(answers, answer)
        except Exception as error:  # an answer that does not pickle: say so instead
            write_frame(answers, (True, RuntimeError(f"{name}: {type(error).__name__}: {error}")))
        answers.flush()
        del answer
        release_freed_memory()  # a run's steps, back to the system between runs
