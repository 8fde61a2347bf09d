"""The app shell: every page is registered, reachable, and runs without an exception."""

import gc
import json
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
import streamlit as st
from streamlit.runtime.fragment import MemoryFragmentStorage
from streamlit.runtime.memory_session_storage import MemorySessionStorage
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.runtime.session_manager import SessionInfo
from streamlit.runtime.websocket_session_manager import WebsocketSessionManager
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT, registered_pages
from harness.stream import run_to_end
from server.memory import TRIM_THREAD
from server.sessions import expired_sessions_dropped, forget_expired_sessions

PAGES = registered_pages()


def test_every_page_file_is_registered_and_every_registered_page_exists():
    on_disk = {f"pages/{path.name}" for path in (ROOT / "pages").glob("*.py")}
    registered = {page.path for page in PAGES}
    assert on_disk == registered
    assert all((ROOT / path).is_file() for path in registered)


def test_url_paths_are_unique_and_never_a_file_stem():
    # A url_path equal to a pages/ file stem would let a first-request deep link run that file
    # through Streamlit's legacy pages/ lookup, without the router.
    url_paths = [page.url_path for page in PAGES]
    assert len(set(url_paths)) == len(url_paths)
    stems = {Path(page.path).stem for page in PAGES}
    assert not stems & set(url_paths)
    assert sum(page.default for page in PAGES) == 1


@pytest.mark.parametrize("page", PAGES, ids=[page.url_path for page in PAGES])
def test_each_page_runs_without_exception(page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page(page.path).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_presenter_mode_from_the_link_is_kept_in_the_link():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["present"] = "1"
    at.run()
    assert at.toggle(key="app.present").value is True
    at.slider(key="why.n").set_value(3).run()
    assert at.query_params["present"] == "1"
    at.toggle(key="app.present").set_value(False).run()
    assert "present" not in at.query_params


def test_chart_downloads_switch_between_png_and_svg_with_a_meaningful_name():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    options = json.loads(at.main.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]
    assert options == {"format": "png", "filename": "rnn-vs-attention", "scale": 2}
    at.button_group(key="app.figure_format").set_value("SVG").run()
    options = json.loads(at.main.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]
    assert options["format"] == "svg" and options["filename"] == "rnn-vs-attention"


def test_a_plain_visit_to_the_home_page_does_not_import_torch():
    script = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        f"at = AppTest.from_file({str(ROOT / 'app.py')!r}, default_timeout=60).run(); "
        "assert not at.exception, at.exception; print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_warm_up_trims_from_one_thread_and_freezes_once_even_after_the_caches_are_cleared():
    def trimmers() -> int:
        return sum(thread.name == TRIM_THREAD for thread in threading.enumerate())

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert trimmers() == 1
    frozen = gc.get_freeze_count()
    assert frozen > 0
    st.cache_resource.clear()  # what a viewer's "Clear caches" does; warm-up runs again
    at.run()
    assert not at.exception
    assert trimmers() == 1
    # Nothing of the sessions alive at that moment is frozen for good.
    assert gc.get_freeze_count() <= frozen


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
    assert run_to_end(expired_sessions_dropped(server)) == 0  # the tab may still come back
    time.sleep(0.3)
    assert storage.get("closed-tab") is None  # expired: a reconnect would not find it...
    gc.collect()
    assert held() is not None  # ...and yet Streamlit still holds it, with its page
    assert run_to_end(expired_sessions_dropped(server)) == 1
    assert closed_tab.shut_down
    gc.collect()
    assert held() is None  # even though the session itself is still referenced
    assert forget_expired_sessions() == 0  # outside a server: nothing to do
