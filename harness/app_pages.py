"""The pages the router registers: the one list in ui/pages.py, which app.py's menu reads."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui import pages
from ui.pages import PageRecord

ROOT = Path(__file__).resolve().parents[1]


def registered_pages() -> list[PageRecord]:
    """The pages app.py registers, read when asked (a test may register one more)."""
    return list(pages.PAGES)


def open_model_page(page_file: str, params: dict[str, str] | None, timeout: float) -> AppTest:
    """A model page as its link opens it: the app starts, the link's parameters arrive, the
    page runs (loading its model the first time, hence the long `timeout`)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout).run()
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.switch_page(page_file).run()
    assert not at.exception, [e.value for e in at.exception]
    return at
