"""The one place that touches Streamlit's private internals: closed tabs' stored sessions.

Streamlit offers no public call to drop the sessions it keeps for tabs that may reconnect, so
this module reaches into the server of the pinned version (streamlit==1.67.0 in
requirements.txt). tests/test_app.py pins the layout it relies on, and checks on a real server
that a closed tab's session, and the model its page held, really go.
"""

from __future__ import annotations

import concurrent.futures

from streamlit import runtime

# How long `forget_expired_sessions` waits for the server's loop to answer.
TIMEOUT_SECONDS = 30.0


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
    except (AttributeError, RuntimeError):  # another layout (AppTest's runtime has no server)
        return 0
    if not loop.is_running():  # a runtime without a serving loop (AppTest's) answers nothing
        return 0
    dropped: concurrent.futures.Future[int] = concurrent.futures.Future()

    def on_the_loop() -> None:
        if dropped.set_running_or_notify_cancel():
            try:
                dropped.set_result(expired_sessions_dropped(server))
            except Exception as error:  # handed to the thread that waits
                dropped.set_exception(error)

    # A plain call, not a coroutine: a loop that stops before running it leaves nothing behind.
    try:
        loop.call_soon_threadsafe(on_the_loop)
    except RuntimeError:  # a server stopping: its loop takes nothing more
        return 0
    try:
        return dropped.result(timeout=TIMEOUT_SECONDS)
    except (AttributeError, RuntimeError, TimeoutError):  # another layout; a server stopping
        dropped.cancel()
        return 0


def expired_sessions_dropped(server) -> int:
    """On `server`'s event loop thread: shut down and remove its expired stored sessions;
    return how many."""
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
