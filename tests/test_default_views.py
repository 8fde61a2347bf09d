"""ui.models.smollm's default views: after a load the server computes what the long-context
page's default link shows, once no viewer's run is going or in line, so that a talk's audience
opening it finds it ready; a viewer who then opens it computes nothing more. A talk's server
(PRELOAD_ENV_VAR) loads the model at the first visit of any page and keeps it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from attention_core.lessons.passages import ALICE
from harness.app_pages import open_model_page
from server.model_host import PREPARE_ENV_VAR
from tests.test_long_context import AUSTEN
from ui.long_context import data, inputs
from ui.long_context import default_view as long_context_view
from ui.models import smollm
from ui.widgets.byte_cache import every_cache

pytestmark = pytest.mark.slow
# What the default link reads from the byte caches.
CACHES = ("long_context.passes", "long_context.kv_experiment")
ROOT = Path(__file__).resolve().parents[1]


def held() -> dict[str, tuple[int, int]]:
    return {name: every_cache()[name] for name in CACHES}


def test_after_a_load_the_default_link_is_prepared_and_its_viewer_computes_nothing(monkeypatch):
    monkeypatch.setenv(PREPARE_ENV_VAR, "1")
    smollm.forget_decoder()
    # A viewer of another text loads the model; the server then prepares the default link.
    open_model_page("pages/long_context.py", {"text": AUSTEN}, timeout=600)
    (preparing,) = [t for t in threading.enumerate() if t.name == smollm.PREPARING_THREAD]
    preparing.join(timeout=600)
    assert not preparing.is_alive()
    assert long_context_view.prepare in smollm.HOST.default_views
    prepared = held()
    # The viewer's passes over AUSTEN and its experiment, then the default passage's.
    assert prepared["long_context.passes"][0] == 6
    assert prepared["long_context.kv_experiment"][0] == 2
    at = open_model_page("pages/long_context.py", None, timeout=600)
    assert held() == prepared
    # What the page shows is what was prepared.
    model = smollm.load_decoder().model
    ids, _ = inputs.text_ids(model, ALICE)
    passes = data.three_passes(model, ids, inputs.DEFAULT_WINDOW, inputs.DEFAULT_SINKS)
    shown = [float(m.value) for m in at.metric if m.label.startswith("Perplexity")]
    assert shown == [round(passes.perplexity[name], 2) for name in data.TITLES]
    smollm.forget_decoder()


def test_a_server_told_not_to_prepares_nothing(monkeypatch):
    monkeypatch.setenv(PREPARE_ENV_VAR, "0")
    smollm.forget_decoder()
    open_model_page("pages/long_context.py", {"text": AUSTEN, "sinks": "0"}, timeout=600)
    assert not [t for t in threading.enumerate() if t.name == smollm.PREPARING_THREAD]
    assert every_cache()["long_context.passes"][0] == 2  # full, and the window's (S = 0)


def test_a_talks_server_loads_the_model_at_the_first_visit_of_any_page_and_keeps_it(monkeypatch):
    monkeypatch.setenv(smollm.IDLE_ENV_VAR, "0.01")  # 0.6 s without a viewer
    monkeypatch.delenv(smollm.PRELOAD_ENV_VAR, raising=False)
    smollm.forget_decoder()
    # A server without the switch: the first page has no model, and nothing loads one.
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception and at.title[0].value == "Why attention?"
    assert not smollm.HOST.wait(1.0) and smollm.HOST.value() is None

    monkeypatch.setenv(smollm.PRELOAD_ENV_VAR, "1")
    st.cache_resource.clear()  # a fresh server: its first visit runs the warm-up
    AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert smollm.HOST.wait(120)  # a load takes a few seconds
    # Used, then left alone for longer than the idle minutes: kept. (What the idle timer does
    # when it fires, called here: a timer armed by an earlier test may be minutes away.)
    assert smollm.load_decoder().model is not None
    time.sleep(1.0)
    smollm.HOST.release_if_idle()
    assert smollm.HOST.value().model is not None and smollm.idle_minutes() == 0

    # The same use without the switch: let go once idle.
    monkeypatch.delenv(smollm.PRELOAD_ENV_VAR)
    assert smollm.load_decoder().model is not None
    time.sleep(1.0)
    smollm.HOST.release_if_idle()
    assert smollm.HOST.value() is None
    smollm.forget_decoder()
