"""The app shell: every page is registered, reachable, and runs without an exception."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT, registered_pages

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
def test_each_page_runs_without_exception_and_shows_no_server_path(page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page(page.path).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    # A page names where its model comes from (the package, the Hub, a variable), never a path
    # on the server: that is the operator's business, and every viewer reads the page.
    shown = [
        element.value
        for kind in ("markdown", "caption", "info", "warning", "success", "code")
        for element in getattr(at, kind)
        if isinstance(element.value, str)
    ]
    places = (str(ROOT), sys.prefix, "site-packages", "/root/", "/home/", "/tmp/")
    assert [text for text in shown if any(place in text for place in places)] == []


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
