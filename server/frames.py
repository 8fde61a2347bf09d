"""A value and its arrays as one frame, for the way back from a child process: the pickle, then
the arrays, each on a cache line.

Pickled with its arrays out of band (protocol 5), a loaded model is a small pickle and a few
hundred arrays. Read back with one call into one buffer, the arrays are read-only views of it:
the GIL is given up and taken back once, not once per array.

    write_frame(out, value)       on a stream: the pickle and the arrays' sizes, then the arrays
    read_frame(source)            the value, its arrays views of one buffer read in one call
    read_frame_in_place(mapping)  the value, its arrays views of the mapping itself (no copy)
    write_result(path, value), read_result(path)
                                  the same in a file of its own
"""

from __future__ import annotations

import mmap
import pickle
import struct
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

_ALIGN = 64  # each array starts on a cache line, as NumPy's own allocations do
_COUNT = struct.Struct("<Q")


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


def read_frame_in_place(mapping: mmap.mmap) -> Any:
    """What `write_frame` wrote at the mapping's position, its arrays views of the mapping
    itself: read-only where the mapping is."""
    # Read as a file: a copy of the header's few kilobytes, not of the arrays.
    header, sizes = _header(lambda size: _exactly(mapping, size))
    offsets, end = _offsets(sizes)
    body = np.frombuffer(mapping, dtype=np.uint8, count=end, offset=mapping.tell())
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


def _exactly(source: IO[bytes] | mmap.mmap, size: int) -> bytes:
    data = source.read(size)
    if len(data) != size:
        raise EOFError("the loaded model's file ended before its arrays did")
    return data
