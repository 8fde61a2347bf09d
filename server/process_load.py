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

    python -m server.process_load MODULE:FUNCTION RESULT_FILE     (the child; kwargs on stdin)
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

_ALIGN = 64  # each array starts on a cache line, as NumPy's own allocations do
_COUNT = struct.Struct("<Q")


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
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with tempfile.TemporaryFile() as stderr:
            child = subprocess.Popen(
                [sys.executable, "-m", "server.process_load", target, str(result)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env,
            )  # fmt: skip
            try:
                child.stdin.write(pickle.dumps(kwargs or {}))
                child.stdin.close()
                for line in child.stdout:  # a line per step: "done total"
                    step = line.split()
                    if progress is not None and len(step) == 2 and all(n.isdigit() for n in step):
                        progress(int(step[0]), int(step[1]))
                code = child.wait()
            finally:
                if child.poll() is None:  # this thread was interrupted: leave no child behind
                    child.kill()
                    child.wait()
            if code != 0 or not result.exists():
                stderr.seek(0)
                last_words = stderr.read().decode(errors="replace").strip().splitlines()[-5:]
                raise ChildLoadError(
                    f"the loading process ended with exit code {code}: " + " / ".join(last_words)
                )
        failed, value = read_result(result)
    if failed:
        raise value
    return value


def write_result(path: Path, value: Any) -> None:
    """`value` pickled with its arrays out of band: the pickle, the arrays' sizes, the arrays."""
    arrays: list[pickle.PickleBuffer] = []
    header = pickle.dumps(value, protocol=5, buffer_callback=arrays.append)
    raws = [array.raw() for array in arrays]
    with open(path, "wb") as out:
        out.write(_COUNT.pack(len(header)) + header + _COUNT.pack(len(raws)))
        out.write(b"".join(_COUNT.pack(raw.nbytes) for raw in raws))
        body = out.tell()  # offsets are aligned from here: the reader reads the rest in one buffer
        for raw in raws:
            out.write(b"\0" * (-(out.tell() - body) % _ALIGN))
            out.write(raw)


def read_result(path: Path) -> Any:
    """What `write_result` wrote, its arrays read-only views of one buffer read in one call."""
    with open(path, "rb") as source:
        (length,) = _COUNT.unpack(source.read(_COUNT.size))
        header = source.read(length)
        (count,) = _COUNT.unpack(source.read(_COUNT.size))
        sizes = struct.unpack(f"<{count}Q", source.read(count * _COUNT.size))
        offsets, end = [], 0
        for size in sizes:
            end += -end % _ALIGN
            offsets.append(end)
            end += size
        # One read: the GIL is given up and taken back once, not once per array.
        body = np.empty(end, dtype=np.uint8)
        if source.readinto(body) != end:
            raise EOFError("the loaded model's file ended before its arrays did")
    body.setflags(write=False)
    views = [memoryview(body[at : at + size]) for at, size in zip(offsets, sizes, strict=True)]
    return pickle.loads(header, buffers=views)


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


def _child(target: str, result: str) -> None:
    # Progress has standard output to itself: whatever a library prints goes to standard error.
    steps = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    kwargs = pickle.load(sys.stdin.buffer)
    module, name = target.split(":")
    function = getattr(importlib.import_module(module), name)

    shown = [0.0]

    def progress(done: int, total: int) -> None:
        # Every 2 %: each line the server reads is one more wait for its GIL.
        if done == total or done / total - shown[0] >= 0.02:
            shown[0] = done / total
            print(done, total, file=steps, flush=True)

    try:
        answer = (False, function(progress=progress, **kwargs))
    except Exception as error:  # the parent raises it: the same type and message
        answer = (True, error)
    write_result(Path(result), answer)


if __name__ == "__main__":
    _child(*sys.argv[1:3])
