"""The add-a-page recipe (README.md, "Adding a page"), tested: a page registered in ui/pages.py
with its package `ui/<id>/` is picked up by everything that lists pages, and the recipe's other
parts (its tests, its benchmark) are asked for by name.

The page made here is real: a page file and a `ui.linear_attention` package written to a
temporary folder, registered for the test's duration, run by app.py's router in AppTest.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui
from harness.app_pages import registered_pages
from server import warmup
from tests.test_code_layout import missing_parts
from ui import pages
from ui.pages import PAGES, PageRecord

ROOT = Path(__file__).resolve().parents[1]

PAGE_SCRIPT = """
import streamlit as st

from ui.linear_attention import features
from ui.widgets.layout import page_intro
from ui.widgets.state import PageState

view = PageState("linear_attention")
page_intro("Linear attention", "Replace the softmax by a kernel and the n × n matrix goes.")
n = st.slider("Tokens", 2, 64, key=view.int_key("n", 8, lo=2, hi=64))
st.metric("Scores held with softmax attention", features.softmax_scores(n))
view.sync_url()
"""

FEATURES = """
def softmax_scores(n: int) -> int:
    return n * n
"""


@pytest.fixture
def new_page(tmp_path, monkeypatch) -> PageRecord:
    """`linear-attention`: its page file and its package, registered in ui/pages.py's list."""
    package = tmp_path / "ui" / "linear_attention"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""The linear-attention page\'s views."""\n')
    (package / "features.py").write_text(FEATURES)
    page_file = tmp_path / "pages" / "linear_attention_page.py"
    page_file.parent.mkdir()
    page_file.write_text(PAGE_SCRIPT)
    # ui/ gains the package as if it had been written there.
    monkeypatch.setattr(ui, "__path__", [*ui.__path__, str(tmp_path / "ui")])
    record = PageRecord(
        str(page_file),
        "Linear attention",
        ":material/linear_scale:",
        "linear-attention",
        "The mechanism",
        "Attention without the n × n matrix.",
    )
    monkeypatch.setattr(pages, "PAGES", (*PAGES, record))
    yield record
    for name in [name for name in sys.modules if name.startswith("ui.linear_attention")]:
        del sys.modules[name]


def test_its_id_names_its_package(new_page):
    assert new_page.id == "linear_attention"
    assert new_page.package == "ui.linear_attention"


def test_the_server_warms_up_its_package_before_any_session(new_page):
    modules = warmup.modules(pages.page_modules())
    assert "ui.linear_attention" in modules
    assert "ui.linear_attention.features" in modules
    # Every registered page's package is warmed up, not only the new one.
    assert {f"ui.{record.id}" for record in PAGES} <= set(modules)


def test_the_router_serves_it_and_the_menu_and_why_page_link_to_it(new_page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    # The "Why attention?" page (the default page) links to every other registered page.
    links = [link.proto.label for link in at.get("page_link")]
    assert "Linear attention" in links
    at.switch_page(new_page.path).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Linear attention"
    assert at.metric[0].value == "64"  # 8 tokens: 8 × 8 scores
    at.slider(key="linear_attention.n").set_value(20).run()
    assert at.metric[0].value == "400"
    assert at.query_params["n"] == "20"  # the link follows


def test_the_benchmarks_and_tests_list_it(new_page):
    assert new_page in registered_pages()
    spec = importlib.util.spec_from_file_location(
        "bench_browser_draw", ROOT / "bench" / "bench_browser_draw.py"
    )
    draw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw)
    assert ("linear-attention", "") in draw.page_links()


def test_the_recipe_asks_for_its_tests_and_benchmark_by_name(new_page):
    # The package and the PageState are there; what a new page still lacks is named.
    assert missing_parts(new_page) == [
        "tests/test_page_linear_attention.py",
        "tests/e2e/test_linear_attention.py",
        "bench/bench_page_linear_attention.py",
    ]
