"""One frame in memory that two processes map: a model's weights held once, by the server and by
the child that keeps the model.

A memfd is a file that lives in memory only. The child writes the loaded model into one and
maps it back; the server maps the same descriptor, so both read the same pages. Linux only:
elsewhere (macOS) `shared_memory_available()` is False.

    descriptor = new_shared_memory()
    write_shared(descriptor, value)   `value` as a frame (server.frames), from the start
    map_shared(descriptor)            the value, its arrays read-only views of a shared mapping,
                                      which keeps the memory after the descriptor is closed
"""

from __future__ import annotations

import mmap
import os
from typing import Any

from server.frames import read_frame_in_place, write_frame

# The mapping's name in /proc/<pid>/maps and smaps, where an operator (or a test) finds it.
SHARED_MEMORY_NAME = "attention-explorer-model"


def shared_memory_available() -> bool:
    return hasattr(os, "memfd_create")


def new_shared_memory() -> int:
    """A new, empty memfd's descriptor; the caller closes it."""
    return os.memfd_create(SHARED_MEMORY_NAME)


def write_shared(descriptor: int, value: Any) -> None:
    """`value` written as a frame into the memfd, whose descriptor stays open."""
    with os.fdopen(descriptor, "wb", closefd=False) as out:
        write_frame(out, value)


def map_shared(descriptor: int) -> Any:
    """What `write_shared` wrote, its arrays read-only views of a shared mapping."""
    return read_frame_in_place(mmap.mmap(descriptor, 0, prot=mmap.PROT_READ))
