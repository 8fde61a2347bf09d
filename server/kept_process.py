"""Calls into the child that keeps a model: a long model run made there, with a GIL of its own.

A model run on a busy server waits for the GIL once for each of its thousands of NumPy calls,
behind the page scripts (bench/bench_gil_wait.py measures how much). So the child that loaded a
model stays (server.process_load.load_and_keep) and makes the long runs, on the weights it
shares with the server (server.shared_memory):

    keep_with(model, kept)  `run_where_kept(..., model, ...)` runs in `kept`; the child ends
                            when `model` goes
    run_where_kept(function, model, *args, **kwargs)
                            function(model, *args, **kwargs), a module-level function, run in
                            the child that keeps `model`, or here when none does (or it has
                            died): the same value either way, its arrays back in one read
    KeptProcess.run(function, *args, **kwargs)
                            one call: a frame (server.frames) out with the function's name and
                            arguments, a frame back with its value or what it raised
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
        request = (function_name(function), args, kwargs)
        with self._lock:
            if not self.alive():
                raise child_ended(self._child.returncode, self._stderr)
            try:
                write_frame(self._child.stdin, request)
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
    with _kept_lock:
        kept = _kept.get(id(value))
    if kept is not None:
        try:
            return kept.run(function, *args, **kwargs)
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
