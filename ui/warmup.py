"""Everything a page needs, imported and built once per process before any page runs.

Fifty viewers who open a link on a fresh server run fifty page scripts at once, in threads of
one process. Python's import lock makes a plain `import` wait for a module that another thread
is still importing, but libraries that import lazily look in `sys.modules` without that lock
(plotly reaches for pandas that way, array-api-compat for torch) and then find a half-built
module. So the router calls `ready()` first: the first session imports and exercises the heavy
libraries under `st.cache_resource`'s lock, and every other session waits for it to finish.
It also starts the thread that hands memory back (`trim_freed_memory_forever`). A viewer's
"Clear caches" runs `ready()` again, so what must happen once per process checks that it has.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import threading
import time

import streamlit as st
from streamlit import runtime

from attention_core.models.llama import release_freed_memory

# Imported by page code or lazily by the libraries it calls: all of them, once, up front.
MODULES = (
    "numpy",
    "pandas",
    "pyarrow",
    "orjson",
    "plotly.graph_objects",
    "plotly.io",
    "attention_core",
    "ui.charts",
    "ui.editors",
    "ui.exports",
    "ui.step_views",
    "ui.mask_views",
    "ui.multihead_views",
    "ui.positional_views",
    "ui.cost_views",
    "ui.model_views",
)


# glibc keeps pages freed in the middle of a heap; a trim this often hands them back.
TRIM_EVERY_SECONDS = 30.0
TRIM_THREAD = "attention-explorer-trim"


def trim_freed_memory_forever() -> None:
    """Every TRIM_EVERY_SECONDS, let go of what no viewer can reach and return the freed pages.

    First the sessions whose tabs closed too long ago to come back (`forget_expired_sessions`),
    with the garbage cycles their pages leave (a full collection, frozen objects included, only
    when sessions were dropped). Then a trim: glibc gives memory back to the system only from
    the top of a heap, and the decoder page asks it to keep up to 256 MB of that too
    (`reuse_freed_memory`); pages freed in between stay resident. Trimming now and then makes
    the server's resident memory what it holds, not what it once held at most. ctypes lets go
    of the GIL for the call, so page scripts run on while a heap is trimmed.
    """
    while True:
        if forget_expired_sessions():
            # What they held is garbage in cycles (a page's fragments and its globals), and part
            # of it may be frozen: `ready()` freezes within the first session, its own included.
            gc.unfreeze()
            gc.collect()
            gc.freeze()
        release_freed_memory()  # where libc is not glibc, a no-op
        time.sleep(TRIM_EVERY_SECONDS)


def forget_expired_sessions() -> int:
    """Drop the sessions Streamlit keeps for tabs that may reconnect, once their time is up.

    A closed tab's session is kept `server.disconnectedSessionTTL` seconds (120) in case the tab
    comes back, in a cache that removes expired entries only when it stores another. When a room
    leaves at the end of a talk, nobody disconnects after the last viewers, and each of their
    sessions keeps its last page alive for good: the page's fragments hold its globals, and on
    the decoder page those hold the model, so its idle release frees nothing. Streamlit offers
    no public call for this, so it reaches into the server of the pinned version; tests check
    that layout and, on a real server, that the model goes. Returns how many sessions were
    dropped: 0 outside a server, or where the layout is not that one.
    """
    if not runtime.exists():
        return 0
    server = runtime.get_instance()
    try:
        # Streamlit's session manager is not thread-safe: it is used from its event loop only.
        loop = server._get_async_objs().eventloop
        dropped = asyncio.run_coroutine_threadsafe(expired_sessions_dropped(server), loop)
        return dropped.result(timeout=TRIM_EVERY_SECONDS)
    except (AttributeError, RuntimeError, TimeoutError):  # another layout; a server stopping
        return 0


async def expired_sessions_dropped(server) -> int:
    """On `server`'s event loop: shut down and remove its expired stored sessions; how many."""
    manager = server._session_mgr
    with manager._storage_lock:  # a script thread's logout moves sessions under it too
        expired = manager._session_storage._cache.expire()
    for _, stored in expired:
        # What Streamlit does when it closes a session: its files and tables go too.
        stored.session.shutdown()
        # Its server loop keeps the last session it sent messages to (a loop variable) until
        # it sends to another one: emptied of its fragments, that session holds no page.
        stored.session._fragment_storage.clear()
    return len(expired)


@st.cache_resource(show_spinner=False)
def ready() -> bool:
    """Import the heavy modules and run each lazy path once; True when done."""
    # Once per process: this cache is emptied too when a viewer clears the caches.
    trimming = any(thread.name == TRIM_THREAD for thread in threading.enumerate())
    if not trimming:
        threading.Thread(target=trim_freed_memory_forever, name=TRIM_THREAD, daemon=True).start()
    for name in MODULES:
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
    # Only the first time: after a cache clear, every live session's pages would be frozen too.
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
    return True
