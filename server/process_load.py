"""Load a model in a child process, so that the room's other viewers are not held up meanwhile.

Reading SmolLM2 is ~250 000 small Python steps (the tokenizer's vocabulary and merges) and a few
thousand NumPy calls (unpacking 272 tensors). In the server's process every one of them waits
for the GIL behind the sessions that run pages: on a busy server a viewer waited 46-52 s for a
load that takes 2.4 s on a quiet one. A child process has a GIL of its own. What comes back is
the loaded object, pickled with its arrays out of band in one file; the server reads that file
with one call into one buffer, and the arrays are views of it.

    load_in_a_process("attention_core.models.llama:load_llama", {"weights_dtype": "bfloat16"},
                      progress=lambda done, total: ...)
    LoadedOnce(load)      one value per process, loaded in a thread of its own by whichever
                          session asks first; every session waits with the same progress

The function must take a `progress(done, total)` keyword. What it raises is raised here, the
same exception; a child that dies without an answer raises `ChildLoadError` with its last words.

A model run on a busy server waits the same way: each of its thousands of NumPy calls gives up
the GIL and waits to take it back behind the page scripts (a 128-token prefill: 0.38 s alone,
3.4 s beside three threads of Python; bench/bench_gil_wait.py). So the child that loaded a model
can stay, and run the long ones:

    model, kept = load_and_keep("attention_core.models.llama:load_llama", {...}, progress)
                          the child writes the model into shared memory (a memfd), maps it back
                          and stays; this process maps the same pages, so the weights are in
                          memory once. None for `kept` where there is no memfd (not Linux)
    keep_with(model, kept)
    run_where_kept(function, model, *args, **kwargs)
                          function(model, *args, **kwargs), a module-level function, run in the
                          child that keeps `model`, or here when none does (or it has died):
                          the same value either way, its arrays back in one read

    python -m server.process_load MODULE:FUNCTION RESULT_FILE     (the child; kwargs on stdin)
    python -m server.process_load MODULE:FUNCTION --keep FD       (the child that stays)
"""

from __future__ import annotations

import importlib
import logging
import mmap
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

_ALIGN = 64  # each array starts on a cache line, as NumPy's own allocations do
_COUNT = struct.Struct("<Q")
# The line a child prints once its answer is written: what follows on its output is frames.
_WRITTEN = b"written"


class ChildLoadError(RuntimeError):
    """The child process ended without an answer (killed, out of memory, a broken install)."""


def load_in_a_process(
    target: str,
    kwargs: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """`target(progress=..., **kwargs)`, run in a fresh Python with this one's import path."""
    with tempfile.TemporaryDirectory(prefix="attention-explorer-load-") as folder:
        result = Path(folder) / "result"
        with tempfile.TemporaryFile() as stderr:
            child = _start(target, [str(result)], stderr)
            try:
                _send_kwargs(child, kwargs)
                child.stdin.close()
                _follow(child, progress)
                code = child.wait()
            finally:
                if child.poll() is None:  # this thread was interrupted: leave no child behind
                    child.kill()
                    child.wait()
            if code != 0 or not result.exists():
                raise _died(code, stderr)
        failed, value = read_result(result)
    if failed:
        raise value
    return value


def load_and_keep(
    target: str,
    kwargs: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Any, KeptProcess | None]:
    """`load_in_a_process`, but the child stays with the value, whose arrays this process and
    the child map from one memfd, and runs functions of it (`KeptProcess.run`). Without memfd
    (macOS), the value read as `load_in_a_process` does, and None."""
    if not hasattr(os, "memfd_create"):
        return load_in_a_process(target, kwargs, progress), None
    shared = os.memfd_create("attention-explorer-model")
    stderr = tempfile.TemporaryFile()
    child = None
    try:
        child = _start(target, ["--keep", str(shared)], stderr, pass_fds=(shared,))
        _send_kwargs(child, kwargs)
        if not _follow(child, progress):
            raise _died(child.wait(), stderr)
        failed, value = _mapped_frame(shared)
    except BaseException:
        if child is not None:  # this thread was interrupted, or the child failed: leave none
            child.kill()
            child.wait()
        stderr.close()
        raise
    finally:
        os.close(shared)  # the mappings keep the memory; the child holds its own descriptor
    if failed:
        KeptProcess(child, stderr).close()
        raise value
    return value, KeptProcess(child, stderr)


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
        request = (f"{function.__module__}:{function.__qualname__}", args, kwargs)
        with self._lock:
            if not self.alive():
                raise _died(self._child.returncode, self._stderr)
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


def _start(
    target: str, where: list[str], stderr: IO[bytes], pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen(
        [sys.executable, "-m", "server.process_load", target, *where],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, pass_fds=pass_fds,
    )  # fmt: skip


def _send_kwargs(child: subprocess.Popen, kwargs: dict[str, Any] | None) -> None:
    child.stdin.write(pickle.dumps(kwargs or {}))
    child.stdin.flush()


def _follow(child: subprocess.Popen, progress: Callable[[int, int], None] | None) -> bool:
    """Pass the child's progress lines on until it says its answer is written (True) or its
    output ends (False)."""
    for line in child.stdout:  # a line per step: "done total"
        if line.strip() == _WRITTEN:
            return True
        step = line.split()
        if progress is not None and len(step) == 2 and all(n.isdigit() for n in step):
            progress(int(step[0]), int(step[1]))
    return False


def _died(code: int, stderr: IO[bytes]) -> ChildLoadError:
    stderr.seek(0)
    last_words = stderr.read().decode(errors="replace").strip().splitlines()[-5:]
    return ChildLoadError(
        f"the loading process ended with exit code {code}: " + " / ".join(last_words)
    )


def write_result(path: Path, value: Any) -> None:
    """`value` in a file, as `write_frame` writes it."""
    with open(path, "wb") as out:
        write_frame(out, value)


def read_result(path: Path) -> Any:
    """What `write_result` wrote, its arrays read-only views of one buffer read in one call."""
    with open(path, "rb") as source:
        return read_frame(source)


def write_frame(out: IO[bytes], value: Any) -> None:
    """`value` pickled with its arrays out of band: the pickle and the arrays' sizes, then the
    arrays, each on a cache line counted from the frame's start."""
    arrays: list[pickle.PickleBuffer] = []
    header = pickle.dumps(value, protocol=5, buffer_callback=arrays.append)
    raws = [array.raw() for array in arrays]
    sizes = b"".join(_COUNT.pack(raw.nbytes) for raw in raws)
    prefix = _COUNT.pack(len(header)) + header + _COUNT.pack(len(raws)) + sizes
    # The arrays start on a cache line of the frame too: in a mapped file, of memory.
    out.write(prefix + b"\0" * (-len(prefix) % _ALIGN))
    offsets, _ = _offsets(tuple(raw.nbytes for raw in raws))
    written = 0
    for at, raw in zip(offsets, raws, strict=True):
        out.write(b"\0" * (at - written))
        out.write(raw)
        written = at + raw.nbytes


def read_frame(source: IO[bytes]) -> Any:
    """What `write_frame` wrote, its arrays read-only views of one buffer read in one call."""
    header, sizes = _header(lambda size: _exactly(source, size))
    offsets, end = _offsets(sizes)
    # One read: the GIL is given up and taken back once, not once per array.
    body = np.empty(end, dtype=np.uint8)
    filled = memoryview(body)
    while filled:
        count = source.readinto(filled)
        if not count:
            raise EOFError("the loaded model's file ended before its arrays did")
        filled = filled[count:]
    body.setflags(write=False)
    return _unpickled(header, body, offsets, sizes)


def _mapped_frame(descriptor: int) -> Any:
    """What `write_frame` wrote into a memfd, its arrays read-only views of a shared mapping."""
    shared = mmap.mmap(descriptor, 0, prot=mmap.PROT_READ)
    # Read as a file: a copy of the header's few kilobytes, not of the arrays.
    header, sizes = _header(lambda size: _exactly(shared, size))
    offsets, end = _offsets(sizes)
    body = np.frombuffer(shared, dtype=np.uint8, count=end, offset=shared.tell())
    return _unpickled(header, body, offsets, sizes)


def _header(read: Callable[[int], bytes]) -> tuple[bytes, tuple[int, ...]]:
    (length,) = _COUNT.unpack(read(_COUNT.size))
    header = read(length)
    (count,) = _COUNT.unpack(read(_COUNT.size))
    sizes = struct.unpack(f"<{count}Q", read(count * _COUNT.size))
    read(-(2 * _COUNT.size + length + count * _COUNT.size) % _ALIGN)
    return header, sizes


def _offsets(sizes: tuple[int, ...]) -> tuple[list[int], int]:
    offsets, end = [], 0
    for size in sizes:
        end += -end % _ALIGN
        offsets.append(end)
        end += size
    return offsets, end


def _unpickled(header: bytes, body: np.ndarray, offsets: list[int], sizes: tuple[int, ...]) -> Any:
    views = [memoryview(body[at : at + size]) for at, size in zip(offsets, sizes, strict=True)]
    return pickle.loads(header, buffers=views)


def _exactly(source: IO[bytes], size: int) -> bytes:
    data = source.read(size)
    if len(data) != size:
        raise EOFError("the loaded model's file ended before its arrays did")
    return data


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


def _child(target: str, where: list[str]) -> None:
    # Progress has standard output to itself: whatever a library prints goes to standard error.
    steps = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    kwargs = pickle.load(sys.stdin.buffer)
    function = _function(target)

    shown = [0.0]

    def progress(done: int, total: int) -> None:
        # Every 2 %: each line the server reads is one more wait for its GIL.
        if done == total or done / total - shown[0] >= 0.02:
            shown[0] = done / total
            steps.write(b"%d %d\n" % (done, total))
            steps.flush()

    try:
        answer = (False, function(progress=progress, **kwargs))
    except Exception as error:  # the parent raises it: the same type and message
        answer = (True, error)
    if where[0] != "--keep":
        write_result(Path(where[0]), answer)
        return
    shared = int(where[1])
    with os.fdopen(shared, "wb", closefd=False) as out:
        write_frame(out, answer)
    if answer[0]:
        steps.write(_WRITTEN + b"\n")
        return
    # The value again, as views of the shared pages: its own copy goes back to the system.
    _, value = _mapped_frame(shared)
    del answer
    _serve(value, sys.stdin.buffer, steps)


def _serve(value: Any, requests: IO[bytes], answers: IO[bytes]) -> None:
    from server.blas import share_cores
    from server.memory import release_freed_memory

    # One core: the server's page scripts have the other (two runs side by side on every core
    # each wait for the other's threads: server.blas).
    share_cores(2)
    release_freed_memory()
    answers.write(_WRITTEN + b"\n")
    answers.flush()
    while True:
        try:
            name, args, kwargs = read_frame(requests)
        except EOFError:  # the server let the value go, or ended
            return
        try:
            answer = (False, _function(name)(value, *args, **kwargs))
        except Exception as error:
            answer = (True, error)
        try:
            write_frame(answers, answer)
        except Exception as error:  # an answer that does not pickle: say so instead
            write_frame(answers, (True, RuntimeError(f"{name}: {type(error).__name__}: {error}")))
        answers.flush()
        del answer
        release_freed_memory()  # a run's steps, back to the system between runs


def _function(target: str) -> Callable:
    module, name = target.split(":")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2:])
