"""How many cores NumPy's products may use: all of them for one model run, one each for two.

NumPy's wheels bring OpenBLAS, which splits a large product over every core. Two forward passes
side by side (the two lanes of server.lane) then ask for four threads on two cores, and each
waits for the other's threads, so two passes finish sooner on one core each; a pass alone, even
beside a page script's Python, is faster on every core. So the lanes set the count from how many
of them run: `share_cores(runs)`.

The count is the library's, for every thread of the process (OpenBLAS's "local" count turned
out to be the same number here). Where NumPy's BLAS is not OpenBLAS, this is a no-op.
"""

from __future__ import annotations

import ctypes
import glob
import os
from dataclasses import dataclass
from functools import cache

import numpy as np


def share_cores(runs: int) -> int | None:
    """Give `runs` model runs at once the cores between them: the library's own count for
    one run (or none), that count split between more. Returns the count set, or None where it
    cannot be set."""
    library = _openblas()
    if library is None:
        return None
    count = library.cores if runs <= 1 else max(1, library.cores // runs)
    library.set_threads(count)
    return count


def blas_threads() -> int | None:
    """The library's thread count now, or None where it cannot be read."""
    library = _openblas()
    return None if library is None else library.get_threads()


@dataclass(frozen=True)
class _OpenBLAS:
    set_threads: object
    get_threads: object
    cores: int  # the count it started with: OPENBLAS_NUM_THREADS, else every core


# The names differ by build: scipy-openblas (NumPy ≥ 2), the 64-bit builds before it, plain.
_NAMES = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


@cache
def _openblas() -> _OpenBLAS | None:
    for path in _numpy_openblas_paths():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _NAMES:
            set_threads = getattr(library, set_name, None)
            get_threads = getattr(library, get_name, None)
            if set_threads is not None and get_threads is not None:
                set_threads.argtypes, set_threads.restype = [ctypes.c_int], None
                get_threads.argtypes, get_threads.restype = [], ctypes.c_int
                return _OpenBLAS(set_threads, get_threads, cores=max(1, get_threads()))
    return None


def _numpy_openblas_paths() -> list[str]:
    # Where the wheels put their own libraries: numpy.libs beside the package on Linux, .dylibs
    # inside it on macOS. The library is already loaded: CDLL finds that copy again.
    package = os.path.dirname(np.__file__)
    return [
        *sorted(glob.glob(os.path.join(package, os.pardir, "numpy.libs", "*openblas*"))),
        *sorted(glob.glob(os.path.join(package, ".dylibs", "*openblas*"))),
    ]
