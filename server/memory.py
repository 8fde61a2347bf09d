"""Memory the process gives back: glibc's knobs, and the thread that trims its heap now and then.

A long-lived server that loads a 135 M-weight model and runs forward passes for a room frees
hundreds of megabytes in pieces that glibc keeps. These functions decide what it keeps and hand
the rest back to the system; where the C library is not glibc (musl, macOS) each is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from server.resident import children_mb, status_mb


def release_freed_memory() -> None:
    """Hand freed memory back to the operating system: the loader's temporaries, or a whole
    model and its steps once a server lets them go.

    Unpacking and stacking a model's matrices frees many same-sized pieces that glibc keeps on
    its heap, scattered between the kept weights, so the process would stay larger by all of
    them. malloc_trim(0) returns those free pages.
    Other C libraries (musl, macOS) have no malloc_trim, and there is nothing to do here.
    """
    try:
        _libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass


@cache
def _libc() -> ctypes.CDLL:
    # Looked up once: find_library runs `ldconfig -p` in a child process, and the server's
    # trim thread asks for the library every 30 s.
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def stop_reusing_freed_memory() -> bool:
    """Back to glibc's defaults (reuse_freed_memory undone), for once the model has gone."""
    return _set_malloc_thresholds(mmap_kb=128, keep_kb=128)


def reuse_freed_memory(keep_mb: int = 16) -> bool:
    """Let glibc take arrays up to 32 MiB from its heap, and keep a free heap top under ``keep_mb``.

    By default glibc maps a large array on its own and hands its pages back as soon as it is
    freed; the next forward pass takes them again, one zeroed 4 KiB page fault at a time. From
    the heap, the pages freed in its middle stay for the next pass until the trim thread
    returns them (`trim_freed_memory_forever`).

    The free top of each heap is another matter: glibc keeps it while it stays under
    ``keep_mb`` and hands all of it back once it grows past, and a server has a heap per busy
    thread. Kept large, a forward pass's steps would stay for the next one, a little faster,
    but a room would hold hundreds of MB of freed memory at its peak; the room's memory is the
    line that binds (``keep_mb`` chosen with bench/bench_memory.py).
    Process-wide, so the app calls it where the decoder's model loads. Returns False where the
    C library is not glibc (nothing is changed there).
    """
    return _set_malloc_thresholds(mmap_kb=32 * 1024, keep_kb=keep_mb * 1024)


def fewer_heaps(count: int = 2) -> bool:
    """Let glibc make at most `count` heaps (arenas) in this process, not 8 per core.

    A thread that finds the heaps busy gets a heap of its own, and a server runs each viewer's
    page in a thread: a room ends up with a dozen heaps, each keeping its own freed pieces
    between the ones still in use (a trim returns only whole free pages). Two heaps on two
    cores keep threads from waiting on one lock and the pieces in fewer places. Set before the
    pages run (server.warmup); heaps made before stay. Returns False where the C library is not
    glibc.
    """
    return _mallopt((M_ARENA_MAX, count))


def _set_malloc_thresholds(mmap_kb: int, keep_kb: int) -> bool:
    return _mallopt((M_MMAP_THRESHOLD, mmap_kb * 1024), (M_TRIM_THRESHOLD, keep_kb * 1024))


# glibc's malloc.h
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8


def _mallopt(*settings: tuple[int, int]) -> bool:
    """glibc's mallopt for each (option, value) in turn; False at the first it refuses, or
    where the C library is not glibc."""
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(option, value) for option, value in settings)


# glibc keeps pages freed in the middle of a heap; a trim this often hands them back.
TRIM_EVERY_SECONDS = 30.0
TRIM_THREAD = "attention-explorer-trim"
# A file to which each trim adds a line: the process's resident memory and what the caches hold.
REPORT_ENV_VAR = "ATTENTION_EXPLORER_MEMORY_REPORT"


def trim_freed_memory_forever(holding: Callable[[], dict] | None = None) -> None:
    """Every TRIM_EVERY_SECONDS, let go of what no viewer can reach and return the freed pages.

    First the sessions whose tabs closed too long ago to come back (`forget_expired_sessions`),
    with the garbage cycles their pages leave (a full collection, frozen objects included, only
    when sessions were dropped). Then a trim: glibc gives memory back to the system only from
    the top of a heap, and keeps that too while it is under 16 MB (`reuse_freed_memory`, which
    the decoder page sets); pages freed in between stay resident. Trimming now and then makes
    the server's resident memory what it holds, not what it once held at most. ctypes lets go
    of the GIL for the call, so page scripts run on while a heap is trimmed.

    With REPORT_ENV_VAR set, each round then adds `report_memory(holding())` to that file.
    """
    # Here, not at the top: the model's kept process (server.kept_process) trims with this
    # module and has no Streamlit to import.
    from server.sessions import forget_expired_sessions

    report_to = os.environ.get(REPORT_ENV_VAR)
    while True:
        if forget_expired_sessions():
            # What they held is garbage in cycles (a page's fragments and its globals), and part
            # of it may be frozen: `ready()` freezes within the first session, its own included.
            gc.unfreeze()
            gc.collect()
            gc.freeze()
        release_freed_memory()  # where libc is not glibc, a no-op
        if report_to and holding is not None:
            report_memory(Path(report_to), holding())
        time.sleep(TRIM_EVERY_SECONDS)


def report_memory(path: Path, holding: dict) -> None:
    """Add one JSON line to `path`: the time, this process's resident MB, what kind of pages
    they are (`resident_parts_mb`), what glibc's heaps hold (`heap_mb`), the model's kept
    process on its own (`children_mb`) and `holding` (what each cache holds), so that an
    operator or a benchmark sees where a peak came from: a cache, live arrays, or freed memory
    kept."""
    status = status_mb(os.getpid(), "VmRSS", *RESIDENT_PARTS)
    line = {
        "time": round(time.time(), 1),
        "rss_mb": round(status.get("VmRSS", 0.0), 1),
        "resident_parts_mb": _parts(status),
        "heap_mb": heap_mb(),
        "children_mb": round(children_mb(os.getpid()), 1),
        "holding": holding,
    }
    with open(path, "a", encoding="utf-8") as report:
        report.write(json.dumps(line) + "\n")


# This process's resident memory by kind, as /proc/<pid>/status names it: `anon` (heaps, arrays,
# Python's objects), `file` (libraries and mapped model files, which the system can drop and
# read again) and `shmem` (the model's shared memory, server.shared_memory).
RESIDENT_PARTS = {"RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}


def resident_parts_mb() -> dict[str, float]:
    """This process's resident memory by kind (RESIDENT_PARTS), in MB."""
    return _parts(status_mb(os.getpid(), *RESIDENT_PARTS))


def _parts(status: dict[str, float]) -> dict[str, float]:
    return {
        part: round(status[field], 1) for field, part in RESIDENT_PARTS.items() if field in status
    }


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def heap_mb() -> dict[str, float]:
    """What glibc's heaps hold, over every heap: `in_use` (live allocations on them),
    `freed_kept` (freed but not handed back: what a trim may return) and `mapped` (arrays
    above the mmap threshold, each mapped on its own). Empty where the C library is not glibc
    2.33 or later. Python's small objects live in arenas of their own, outside these."""
    try:
        mallinfo2 = _libc().mallinfo2
    except (OSError, AttributeError):
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    megabyte = 1024 * 1024
    return {
        "in_use": round(info.uordblks / megabyte, 1),
        "freed_kept": round(info.fordblks / megabyte, 1),
        "mapped": round(info.hblkhd / megabyte, 1),
    }
