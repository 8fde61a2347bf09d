"""Everything a page needs, imported and built once per process before any page runs.

Fifty viewers who open a link on a fresh server run fifty page scripts at once, in threads of
one process. Python's import lock makes a plain `import` wait for a module that another thread
is still importing, but libraries that import lazily look in `sys.modules` without that lock
(plotly reaches for pandas that way, array-api-compat for torch) and then find a half-built
module. So the router calls `ready()` first: the first session imports and exercises the heavy
libraries under a lock, and every other session waits for it to finish.
It also caps glibc's heaps (`fewer_heaps`), starts the thread that hands memory back
(`trim_freed_memory_forever`), shortens the GIL's switch interval (`switch_threads_often`) and,
on a talk's server, starts loading the LLM. The router hands it what only the app knows: the
pages' own modules, what the caches hold and the preload step, so the server imports nothing
of the app above it. Once per process, whatever a viewer clears: a cache cleared leaves every
module imported and the trim thread running.
"""

from __future__ import annotations

import gc
import importlib
import threading
from collections.abc import Callable, Sequence

from server.lane import switch_threads_often
from server.memory import TRIM_THREAD, fewer_heaps, trim_freed_memory_forever

# Imported lazily by the libraries the pages call, or by several pages: once, up front.
LIBRARIES = (
    "numpy",
    "pandas",
    "pyarrow",
    "orjson",
    "plotly.graph_objects",
    "plotly.io",
    "attention_core",
)


def modules(page_modules: Sequence[str]) -> tuple[str, ...]:
    """Every module to import before a page runs: the libraries, then `page_modules`, every
    registered page's own package and what it imports."""
    return (*LIBRARIES, *page_modules)


def ready(
    page_modules: Callable[[], Sequence[str]],
    holding: Callable[[], int],
    preload: Callable[[], None],
) -> bool:
    """Import the heavy modules and run each lazy path once; True when done.

    page_modules   the pages' own modules, listed when the warm-up runs (not at every rerun)
    holding        the bytes the caches hold, which the trim thread leaves alone
    preload        what a talk's server loads before its audience arrives
    """
    with _WARMING:
        if not _WARMED.is_set():
            _warm_up(page_modules, holding)
            _WARMED.set()
    # At every visit, not once: it only starts a load that is not held or running already.
    preload()
    return True


# The first session warms the process up; the others wait for it here, then pass at once.
_WARMING = threading.Lock()
_WARMED = threading.Event()


def _warm_up(page_modules: Callable[[], Sequence[str]], holding: Callable[[], int]) -> None:
    fewer_heaps()  # before the pages' threads ask glibc for heaps of their own
    threading.Thread(
        target=trim_freed_memory_forever, kwargs={"holding": holding}, name=TRIM_THREAD,
        daemon=True,
    ).start()  # fmt: skip
    switch_threads_often()
    for name in modules(page_modules()):
        importlib.import_module(name)
    import pandas as pd
    import plotly.graph_objects as go
    import plotly.io

    # Serialising a figure with a data frame in it walks every lazy import plotly has.
    figure = go.Figure(go.Scatter(x=pd.Series([0.0, 1.0]), y=[0.0, 1.0]))
    plotly.io.to_json(figure, validate=False)
    # What was built up to here lives as long as the process: keep it out of every later
    # garbage collection, which then only walks what the page runs allocate. The first session's
    # own objects are frozen with it; the trim thread collects them once that session is gone.
    # Not over a process that froze its objects already (a test runner's own).
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
