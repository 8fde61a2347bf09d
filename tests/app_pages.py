"""The pages the router registers: the one list in ui/pages.py, which app.py's menu reads."""

from pathlib import Path

from ui.pages import PAGES, PageRecord

ROOT = Path(__file__).resolve().parents[1]

# The name the tests and benchmarks have always used for one registered page.
RegisteredPage = PageRecord


def registered_pages() -> list[PageRecord]:
    return list(PAGES)
