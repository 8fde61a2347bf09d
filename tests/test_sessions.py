"""server.sessions: the layout of Streamlit's session manager it relies on (streamlit==1.67.0),
built from Streamlit's own classes, and a closed tab's page let go once it cannot come back."""

import gc
import time
import weakref
from types import SimpleNamespace

from streamlit.runtime.fragment import MemoryFragmentStorage
from streamlit.runtime.memory_session_storage import MemorySessionStorage
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.runtime.session_manager import SessionInfo
from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

from server.sessions import expired_sessions_dropped, forget_expired_sessions


class _Page:
    """What a closed tab's session keeps: a page whose globals refer back to it (its fragments)."""

    def __init__(self):
        self.globals = {"page": self}


class _ClosedTab:
    """A stored session as Streamlit keeps it: its page reachable through its fragments."""

    def __init__(self, page: _Page):
        self.id = "closed-tab"
        self._fragment_storage = MemoryFragmentStorage()
        self._fragment_storage.register("fragment", lambda: page.globals)
        self.shut_down = False

    def shutdown(self):
        self.shut_down = True


def test_a_closed_tabs_session_is_let_go_once_it_can_no_longer_reconnect():
    # Streamlit's own session manager and storage, as its server builds them, with a short TTL.
    storage = MemorySessionStorage(ttl_seconds=0.2)
    server = SimpleNamespace(
        _session_mgr=WebsocketSessionManager(
            storage, MemoryUploadedFileManager("/upload"), ScriptCache(), None
        )
    )
    page = _Page()
    held = weakref.ref(page)
    closed_tab = _ClosedTab(page)  # kept here as Streamlit's server loop keeps the last one
    storage.save(SessionInfo(client=None, session=closed_tab))
    del page
    assert expired_sessions_dropped(server) == 0  # the tab may still come back
    time.sleep(0.3)
    assert storage.get("closed-tab") is None  # expired: a reconnect would not find it...
    gc.collect()
    assert held() is not None  # ...and yet Streamlit still holds it, with its page
    assert expired_sessions_dropped(server) == 1
    assert closed_tab.shut_down
    gc.collect()
    assert held() is None  # even though the session itself is still referenced
    assert forget_expired_sessions() == 0  # outside a server: nothing to do
