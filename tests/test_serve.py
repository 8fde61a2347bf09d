"""Serving a room: a burst of viewers on a fresh server, and N workers behind HAProxy.

These start real servers on loopback and speak Streamlit's websocket protocol
(harness/stream.py), as browsers do. They assert on what viewers get (pages, widget
changes, no exceptions) and on where HAProxy sends them, never on timings: speed is measured by
bench/bench_live_audience.py.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import websockets

from harness.stream import VISIT, Viewer, audience, run_to_end, worker_cookie
from server.memory import TRIM_EVERY_SECONDS
from server.serve import ROOT, Deployment, haproxy_config
from ui.models.smollm import IDLE_ENV_VAR
from ui.pages import PAGES

pytestmark = pytest.mark.serving

# Every registered page, as a speaker's link would open it.
PAGE_LINKS = tuple((page.url_path, "") for page in PAGES)


@pytest.fixture
def error_details(monkeypatch):
    """Exceptions reach the viewer with their type and message, so a failure says what broke."""
    monkeypatch.setenv("STREAMLIT_CLIENT_SHOW_ERROR_DETAILS", "full")


def test_a_burst_on_a_fresh_server_sees_every_page_without_an_exception(error_details):
    # Three viewers per page arrive at the same instant on a server that has run nothing yet:
    # the first-import races (a half-imported pandas or torch) showed up exactly here.
    with Deployment(ROOT / "app.py") as server:
        logs = run_to_end(
            audience(server.port, PAGE_LINKS, 3 * len(PAGE_LINKS), 0, 0.2, 0.0, min_actions=3)
        )
    assert [log.exceptions for log in logs if log.exceptions] == []
    assert [log.dropped for log in logs if log.dropped] == []
    assert all(log.first_page is not None for log in logs)
    # Every viewer's page answered real widget changes, not only the first load.
    assert [len(log.actions) for log in logs] == [3] * len(logs)


def test_the_decoders_model_is_let_go_once_its_last_viewer_has_left_for_good():
    # Streamlit keeps a closed tab's session for a reconnect (2 s here, 120 s by default) and
    # forgets it only when another session is stored: with nobody leaving after this viewer,
    # its page, and the model with it, stayed until the trim thread learnt to drop it.
    env = {"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": "2", IDLE_ENV_VAR: "0.05"}
    with Deployment(ROOT / "app.py", env=env) as server:
        url = f"ws://127.0.0.1:{server.port}/_stcore/stream"
        viewer = Viewer(url, "decoder", "", None, random.Random(0))

        async def visit():
            async with viewer.connected():
                await viewer.rerun()

        run_to_end(visit())
        assert viewer.log.exceptions == []
        with_model = server.rss_mb()
        deadline = time.monotonic() + 2 * TRIM_EVERY_SECONDS + 10
        while server.rss_mb() > with_model - 150 and time.monotonic() < deadline:
            time.sleep(1)
        # The model alone is ~270 MB (bfloat16 weights).
        assert server.rss_mb() < with_model - 150


# A page whose one computation waits two seconds in the long lane, keyed on the link's `x`.
SLOW_PAGE = """
import os
import time

import numpy as np
import streamlit as st

from server.lane import LONG_RUNS
from ui.widgets.byte_cache import MB, bounded_by_bytes


@bounded_by_bytes(MB, name="test.serve.slow", lane=LONG_RUNS)
def slow(x: str) -> np.ndarray:
    with open(os.environ["RUNS_LOG"], "a") as log:
        log.write(x + "\\n")
    time.sleep(2)
    return np.zeros(1)


x = st.query_params.get("x", "")
slow(x)
st.write(f"shown {x}")
"""


def test_a_run_in_line_whose_viewer_has_moved_on_leaves_the_line(tmp_path, error_details):
    # A browser sends a new run when its viewer moves a widget again; Streamlit stops the old
    # one only at its next drawing call. Waiting in line draws a notice every WAIT_CHECK_S, so
    # the old run leaves the line and never takes the model for a result nobody will see.
    page, runs = tmp_path / "slow_page.py", tmp_path / "runs.log"
    page.write_text(SLOW_PAGE)
    with Deployment(page, env={"RUNS_LOG": str(runs)}) as server:
        url = f"ws://127.0.0.1:{server.port}/_stcore/stream"
        first = Viewer(url, "", "x=first", None, random.Random(0))
        moving = Viewer(url, "", "x=abandoned", None, random.Random(1))

        async def two_viewers():
            async with first.connected(), moving.connected():
                running = asyncio.create_task(first.rerun())
                await asyncio.sleep(0.5)  # the first viewer's run has the lane
                in_line = asyncio.create_task(moving.rerun())
                await asyncio.sleep(0.8)  # the second's is in line, its notice drawn
                in_line.cancel()  # the tab stops reading this run's messages
                await asyncio.gather(in_line, return_exceptions=True)
                moving.query = "x=wanted"  # the viewer moves on before its turn
                await moving.rerun()
                await running

        run_to_end(two_viewers())
    assert runs.read_text().split() == ["first", "wanted"]
    assert [first.log.exceptions, moving.log.exceptions] == [[], []]


def test_an_uncaught_error_is_redacted_on_the_page_and_its_traceback_is_in_the_log(tmp_path, capfd):
    # With the committed config (the server runs in the project's directory): the viewer sees
    # Streamlit's redacted message, the server's standard error the whole traceback.
    page = tmp_path / "failing_page.py"
    page.write_text('raise ValueError("what the log must say")\n')
    with Deployment(page) as server:
        viewer = Viewer(f"ws://127.0.0.1:{server.port}/_stcore/stream", "", "", None,
                        random.Random(0))  # fmt: skip

        async def visit():
            async with viewer.connected():
                await viewer.rerun()

        run_to_end(visit())
    (shown,) = viewer.log.exceptions
    assert "redacted" in shown and "what the log must say" not in shown
    log = capfd.readouterr().err
    assert "Traceback (most recent call last)" in log
    assert 'raise ValueError("what the log must say")' in log
    assert "ValueError: what the log must say" in log


# Two pages with a slider each, registered as the app registers its pages.
TWO_PAGES = """
import streamlit as st


def page(name):
    def draw():
        st.slider(f"{name} slider", 0, 10, 5)

    return st.Page(draw, title=name, url_path=name)


st.navigation([page("one"), page("two")]).run()
"""


def test_a_touring_viewer_moves_its_widgets_then_visits_the_next_page_round_and_round(tmp_path):
    page = tmp_path / "two_pages.py"
    page.write_text(TWO_PAGES)
    with Deployment(page) as server:
        viewer = Viewer(f"ws://127.0.0.1:{server.port}/_stcore/stream", "two", "", None,
                        random.Random(0))  # fmt: skip
        links = [("one", ""), ("two", "")]
        # Long enough for a lap on a busy CI machine: each step is a run of a one-slider page.
        log = run_to_end(viewer.tour(links, time.monotonic() + 6, actions_per_page=2))
    assert [log.page, log.exceptions, log.dropped] == ["two", [], None]
    # From its own page to the link after it, then back to the first: after the last link.
    lap = [
        ("two", "two slider"), ("two", "two slider"), ("one", VISIT),
        ("one", "one slider"), ("one", "one slider"), ("two", VISIT),
    ]  # fmt: skip
    steps = list(zip(log.on_page, log.acted_on, strict=False))
    assert len(steps) >= len(lap)
    assert steps == [lap[i % len(lap)] for i in range(len(steps))]
    assert len(log.on_page) == len(log.actions)


def test_haproxy_config_names_every_worker_and_sticks_by_cookie():
    config = haproxy_config("0.0.0.0", 8501, [9001, 9002, 9003])
    assert "bind 0.0.0.0:8501" in config
    assert "cookie AE_WORKER insert indirect nocache" in config
    for index, port in enumerate((9001, 9002, 9003), start=1):
        assert f"server w{index} 127.0.0.1:{port} check inter 2s cookie w{index}" in config
    assert "timeout tunnel 1h" in config  # a websocket lives as long as its tab


def test_two_workers_behind_haproxy_keep_each_tab_on_its_worker(error_details):
    with Deployment(ROOT / "app.py", workers=2) as deployment:
        http_url = f"http://127.0.0.1:{deployment.port}"
        # New tabs are dealt round-robin, and each is told which worker it has.
        cookies = [worker_cookie(http_url) for _ in range(4)]
        assert sorted(set(cookies)) == ["AE_WORKER=w1", "AE_WORKER=w2"]
        for cookie in ("AE_WORKER=w1", "AE_WORKER=w2"):
            for _ in range(3):
                request = urllib.request.Request(http_url + "/", headers={"Cookie": cookie})
                with urllib.request.urlopen(request, timeout=30) as response:
                    assert response.headers["X-AE-Worker"] == cookie.split("=")[1]
                    assert response.headers.get("Set-Cookie") is None

        async def tab(cookie: str) -> tuple[str, list[str], int]:
            url = f"ws://127.0.0.1:{deployment.port}/_stcore/stream"
            async with websockets.connect(
                url, subprotocols=["streamlit"], additional_headers={"Cookie": cookie}
            ) as socket:
                worker = socket.response.headers["X-AE-Worker"]
            viewer = Viewer(url, "scaled-dot-product", "", cookie, random.Random(0))
            log = await viewer.run(until=time.monotonic() + 3, think=0.2)
            return worker, log.exceptions, len(log.actions)

        for cookie in ("AE_WORKER=w1", "AE_WORKER=w2"):
            worker, exceptions, actions = run_to_end(tab(cookie))
            # The websocket upgrade carries the cookie too, so the tab's session and its page
            # runs stay on the worker that served its page.
            assert worker == cookie.split("=")[1]
            assert exceptions == []
            assert actions >= 1


def test_the_dockerfile_passes_hadolint_and_serves_with_deploy_serve():
    # No Docker engine runs on the project machines: the image is linted here, built elsewhere.
    hadolint = Path(sys.executable).parent / "hadolint"
    dockerfile = ROOT / "Dockerfile"
    result = subprocess.run(
        [str(hadolint), str(dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = dockerfile.read_text()
    assert "RUN make .venv/.app-installed" in text  # the same install as `make run`
    assert '"server/serve.py", "--address", "0.0.0.0"' in text
