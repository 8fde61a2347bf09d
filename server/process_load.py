"""Load a model in a child process, so that the room's other viewers are not held up meanwhile.

Reading SmolLM2 is ~250 000 small Python steps (the tokenizer's vocabulary and merges) and a few
thousand NumPy calls (unpacking 272 tensors). In the server's process every one of them waits
for the GIL behind the sessions that run pages, so a busy server would take many times as long
as a quiet one; a child process has a GIL of its own. What comes back is the loaded object as
a frame (server.frames): read with one call into one buffer, its arrays views of it.

    load_in_a_process("attention_core.models.llama:load_llama", {"weights_dtype": "bfloat16"},
                      progress=lambda done, total: ...)
    model, kept = load_and_keep("attention_core.models.llama:load_llama", {...}, progress)
                          the child writes the model into shared memory (server.shared_memory),
                          maps it back and stays to run functions of it (server.kept_process);
                          this process maps the same pages, so the weights are in memory once.
                          None for `kept` where there is no memfd (not Linux)
    load_and_keep(..., sources=(path,))
                          the same, the child copying a save of this load of the files
                          `sources` back instead of calling the function when there is one,
                          and saving it when there is not (server.saved_loads)

The function must take a `progress(done, total)` keyword. What it raises is raised here, the
same exception; a child that dies without an answer raises `ChildLoadError` (server.child) with
its last words.

    python -m server.process_load MODULE:FUNCTION RESULT_FILE     (the child; kwargs on stdin)
    python -m server.process_load MODULE:FUNCTION --keep FD [SAVED]   (the child that stays)
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from server.blas import share_cores
from server.child import child_ended, function_named
from server.frames import read_result, write_result
from server.kept_process import KeptProcess, answer_calls
from server.memory import release_freed_memory
from server.saved_loads import restore, save, saved_load
from server.shared_memory import (
    map_shared,
    new_shared_memory,
    shared_memory_available,
    write_shared,
)

# The line a child prints once its answer is written: what follows on its output is frames.
_WRITTEN = b"written"


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
                raise child_ended(code, stderr)
        failed, value = read_result(result)
    if failed:
        raise value
    return value


def load_and_keep(
    target: str,
    kwargs: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    sources: Sequence[Path] = (),
) -> tuple[Any, KeptProcess | None]:
    """`load_in_a_process`, but the child stays with the value, whose arrays this process and
    the child map from one memfd, and runs functions of it (`KeptProcess.run`); with `sources`,
    the files the function reads, the value comes from a save of this load if there is one,
    and is saved if not. Without memfd (macOS), the value read as `load_in_a_process` does, and
    None."""
    if not shared_memory_available():
        return load_in_a_process(target, kwargs, progress), None
    saved = saved_load(target, kwargs or {}, sources)
    shared = new_shared_memory()
    stderr = tempfile.TemporaryFile()
    child = None
    try:
        where = ["--keep", str(shared), *([str(saved)] if saved is not None else [])]
        child = _start(target, where, stderr, pass_fds=(shared,))
        _send_kwargs(child, kwargs)
        if not _follow(child, progress):
            raise child_ended(child.wait(), stderr)
        failed, value = map_shared(shared)
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


def _child(target: str, where: list[str]) -> None:
    # Progress has standard output to itself: whatever a library prints goes to standard error.
    steps = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    kwargs = pickle.load(sys.stdin.buffer)

    shown = [0.0]

    def progress(done: int, total: int) -> None:
        # Every 2 %: each line the server reads is one more wait for its GIL.
        if done == total or done / total - shown[0] >= 0.02:
            shown[0] = done / total
            steps.write(b"%d %d\n" % (done, total))
            steps.flush()

    shared = int(where[1]) if where[0] == "--keep" else None
    saved = Path(where[2]) if shared is not None and len(where) > 2 else None
    value = None if shared is None else restore(saved, shared)
    if value is not None:
        saved = None  # it came from there
    else:
        function = function_named(target)
        try:
            answer = (False, function(progress=progress, **kwargs))
        except Exception as error:  # the parent raises it: the same type and message
            answer = (True, error)
        if shared is None:
            write_result(Path(where[0]), answer)
            return
        write_shared(shared, answer)
        if answer[0]:
            steps.write(_WRITTEN + b"\n")
            return
        # The value again, as views of the shared pages: its own copy goes back to the system.
        _, value = map_shared(shared)
        del answer
    # One core: the server's page scripts have the other (two runs side by side on every core
    # each wait for the other's threads: server.blas).
    share_cores(2)
    release_freed_memory()
    steps.write(_WRITTEN + b"\n")
    steps.flush()
    # Saved once the server has its answer: the viewer waiting for the load does not wait for it.
    save(shared, saved)
    answer_calls(value, sys.stdin.buffer, steps)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2:])
