"""server.warmup: one trim thread and one freeze per process, whatever a viewer clears."""

import gc
import threading

import streamlit as st
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT
from server.memory import TRIM_THREAD


def test_warm_up_trims_from_one_thread_and_freezes_once_even_after_the_caches_are_cleared():
    def trimmers() -> int:
        return sum(thread.name == TRIM_THREAD for thread in threading.enumerate())

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert trimmers() == 1
    frozen = gc.get_freeze_count()
    assert frozen > 0
    st.cache_resource.clear()  # what a viewer's "Clear caches" does
    at.run()
    assert not at.exception
    assert trimmers() == 1
    # Nothing of the sessions alive at that moment is frozen for good.
    assert gc.get_freeze_count() <= frozen
