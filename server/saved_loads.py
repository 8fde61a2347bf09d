"""A loaded model kept on disk, so that the next load of the same checkpoint on this machine copies
it back instead of reading the checkpoint again.

What a child that loads a model (server.process_load) hands the server is one frame
(server.frames) in a memfd (server.shared_memory). Reading SmolLM2's GGUF to make it takes
seconds of unpacking (every tensor dequantized and rounded to bfloat16), and a server does it
again after each restart, after each idle release, and in each worker. So the child copies the
frame to a file once it has answered, and the next child to load the same checkpoint with the
same options, on the same code, copies the file into its memfd and reads nothing else.

    saved_load(target, kwargs, sources)  the file of this load, or None (turned off, or a
                                         source that cannot be read)
    restore(path, descriptor)            the saved value, copied into the memfd and mapped from
                                         it; None if there is none or it cannot be read
    save(descriptor, path)               the memfd's frame copied to `path`, in one rename

The file's name is a digest of everything the frame depends on: the loader and its options, each
source file's path, size and modification time, and the code that builds and reads the frame
(every module of attention_core and server.frames, NumPy's and Python's versions). A folder
keeps one file per loader and checkpoint: a new save replaces the old one. Best effort
throughout: a folder that cannot be written, or a file that cannot be read, only means that
the checkpoint is read.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from server.shared_memory import map_shared

# A folder, or "off"; by default the user's cache folder.
SAVED_LOADS_ENV_VAR = "ATTENTION_EXPLORER_SAVED_LOADS"
_ROOT = Path(__file__).resolve().parent.parent
_SUFFIX = ".frame"


def saved_loads_folder() -> Path | None:
    value = os.environ.get(SAVED_LOADS_ENV_VAR, "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value).expanduser()
    try:
        cache_home = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    except (KeyError, RuntimeError):  # a user with no home (a container's arbitrary uid)
        return None
    return Path(cache_home) / "attention-explorer" / "loads"


def saved_load(target: str, kwargs: dict[str, Any], sources: Sequence[Path]) -> Path | None:
    """Where the load of `target(**kwargs)` from the files `sources` (each a file or a folder)
    is kept; None when saving is off or there is no source to key it on."""
    folder = saved_loads_folder()
    if folder is None or not sources:
        return None
    try:
        places = sorted(str(Path(source).resolve()) for source in sources)
        files = [(str(path), *_size_and_time(path)) for place in places for path in _files(place)]
    except OSError:
        return None
    checkpoint = _digest(target, places)
    key = _digest(checkpoint, sorted(kwargs.items()), files, _code())
    return folder / f"{checkpoint[:16]}-{key[:24]}{_SUFFIX}"


def restore(path: Path | None, descriptor: int) -> Any | None:
    """The value saved at `path`, copied into the empty memfd `descriptor` and mapped from it;
    None when there is no such file, or it cannot be read (then it goes, and the memfd is empty
    again)."""
    if path is None or not path.is_file():
        return None
    try:
        with open(path, "rb") as source, os.fdopen(descriptor, "wb", closefd=False) as out:
            shutil.copyfileobj(source, out, 16 * 2**20)
        failed, value = map_shared(descriptor)
        if failed:
            raise ValueError("a saved load holds an error")
    except Exception as error:  # cut short, or written by code the key did not foresee
        logging.getLogger(__name__).warning("Reading the checkpoint again: %s: %s", path, error)
        path.unlink(missing_ok=True)
        os.ftruncate(descriptor, 0)
        os.lseek(descriptor, 0, os.SEEK_SET)
        return None
    return value


def save(descriptor: int, path: Path | None) -> None:
    """The memfd's frame copied to `path`, renamed into place once whole (a reader never meets
    half of it); the folder's older saves of the same loader and checkpoint go."""
    if path is None:
        return
    part = None
    try:
        # The server's own: what it saves, it unpickles.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        checkpoint = path.name.split("-")[0]
        for old in path.parent.glob(f"{checkpoint}-*"):
            old.unlink(missing_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f"{checkpoint}-", suffix=".part",
                                         delete=False) as out:  # fmt: skip
            part = Path(out.name)
            with mmap.mmap(descriptor, 0, prot=mmap.PROT_READ) as frame:
                out.write(frame)
        os.replace(part, path)
    except OSError as error:
        logging.getLogger(__name__).warning("Not saving the load to %s: %s", path, error)
        if part is not None:
            part.unlink(missing_ok=True)


def _files(place: str) -> Iterator[Path]:
    path = Path(place)
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file())
    else:
        yield path


def _size_and_time(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@cache
def _code() -> str:
    """A digest of the code that builds a loaded model and reads its frame back."""
    code = hashlib.sha256(f"{np.__version__} {sys.version}".encode())
    for path in (*sorted((_ROOT / "attention_core").rglob("*.py")), _ROOT / "server" / "frames.py"):
        code.update(path.read_bytes())
    return code.hexdigest()


def _digest(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()
