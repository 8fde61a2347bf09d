"""Shared test set-up: clean Streamlit caches, and no silent skips in CI."""

import os

import pytest

_skipped_in_ci: list[str] = []


@pytest.fixture(autouse=True)
def _clear_streamlit_caches():
    """Each test sees cold caches, so one test's cached result never hides another's bug."""
    import streamlit as st

    from ui.widgets.byte_cache import clear_every_cache

    st.cache_data.clear()
    st.cache_resource.clear()
    clear_every_cache()
    yield


@pytest.fixture(autouse=True)
def _no_default_views_prepared_behind_a_test(monkeypatch):
    """A model loaded in one test would prepare the pages' default views in a thread of its own
    and fill the next tests' caches: the tests that want it turn it on. (A server a test starts
    inherits this; the browser tests' shared server, started before any test, prepares them.)"""
    from server.model_host import PREPARE_ENV_VAR

    monkeypatch.setenv(PREPARE_ENV_VAR, "0")


@pytest.fixture
def without_llm(monkeypatch, tmp_path):
    """SmolLM2 nowhere: no package file, no Hub, nothing loaded; what a model page must explain."""
    from attention_core.models.llama import files as llama_files
    from ui.models import smollm

    monkeypatch.setenv(llama_files.LLM_PATH_ENV_VAR, str(tmp_path / "nowhere.gguf"))
    monkeypatch.setattr(smollm, "hub_reachable", lambda: False)
    smollm.forget_decoder()
    yield
    smollm.forget_decoder()  # the next test finds the model again


def pytest_runtest_logreport(report):
    # In CI every optional path is installed, so only GPU tests may skip (there is no GPU).
    if os.environ.get("CI") and report.skipped and "gpu" not in report.keywords:
        _skipped_in_ci.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if _skipped_in_ci and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _skipped_in_ci:
        terminalreporter.write_line(
            "FAILED: tests were skipped in CI, where every optional path must run: "
            + ", ".join(_skipped_in_ci),
            red=True,
        )


@pytest.fixture(scope="session")
def redis_url():
    """A real redis-server for this test run (tests/room_servers.py)."""
    from tests.room_servers import redis_server

    with redis_server() as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def _saved_loads_in_a_folder_of_the_run(tmp_path_factory):
    """Loads saved by this run (server.saved_loads) go to its own folder, never the user's
    cache: the first load of each model reads its checkpoint, the later ones copy the save."""
    from server.saved_loads import SAVED_LOADS_ENV_VAR

    before = os.environ.get(SAVED_LOADS_ENV_VAR)
    os.environ[SAVED_LOADS_ENV_VAR] = str(tmp_path_factory.mktemp("saved-loads"))
    yield
    if before is None:
        os.environ.pop(SAVED_LOADS_ENV_VAR)
    else:
        os.environ[SAVED_LOADS_ENV_VAR] = before


@pytest.fixture(autouse=True)
def _rooms_in_a_file_of_the_test(monkeypatch, tmp_path):
    """A room a test starts lives in that test's own SQLite file, never in the user's data."""
    from server.room_store import STORE_ENV_VAR

    monkeypatch.setenv(STORE_ENV_VAR, f"sqlite://{tmp_path}/rooms.db")
