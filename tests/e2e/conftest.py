"""A real `streamlit run` server and Debian's Chromium driven by Playwright.

Script runs are awaited the way Streamlit's own end-to-end tests do it: the app root carries
its connection state and script-run state as attributes, so no test sleeps for a fixed time.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling out of this closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
APP_ROOT = "[data-testid='stApp']"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StreamlitServer:
    """`streamlit run app.py` on a free localhost port, stopped on `close()`."""

    def __init__(self, extra_args: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        self.log = ROOT / "artifacts" / f"streamlit-{self.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log.open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.headless",
                "true",
                "--server.port",
                str(self.port),
                "--server.address",
                "127.0.0.1",
                "--browser.gatherUsageStats",
                "false",
                *extra_args,
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        self.wait_healthy()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"streamlit exited early; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as reply:
                    if reply.read().decode() == "ok":
                        return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"streamlit did not become healthy in {timeout}s; see {self.log}")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log_file.close()


@pytest.fixture(scope="session")
def server() -> Iterator[StreamlitServer]:
    """One server shared by the tests that do not need a fresh one."""
    running = StreamlitServer()
    yield running
    running.close()


@pytest.fixture
def fresh_server() -> Iterator[StreamlitServer]:
    """A server that has answered nobody yet: its first request decides legacy-mode traps."""
    running = StreamlitServer()
    yield running
    running.close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request):
    """A fresh browser tab at 1280×900; a screenshot of it is kept under artifacts/."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    yield tab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    try:
        tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    finally:
        context.close()


def wait_for_app_run(tab, timeout: float = 30_000) -> None:
    """Block until the app is connected and no script run is pending or running."""
    tab.wait_for_selector(f"{APP_ROOT}[data-test-connection-state='CONNECTED']", timeout=timeout)
    tab.wait_for_function(
        """() => {
            const app = document.querySelector("[data-testid='stApp']");
            return app && app.getAttribute('data-test-script-state') === 'notRunning';
        }""",
        timeout=timeout,
    )
    # Elements from the previous run fade out as "stale" until the new run replaces them.
    tab.wait_for_function(
        "() => document.querySelectorAll('[data-stale=\"true\"]').length === 0",
        timeout=timeout,
    )


def open_app(tab, base_url: str, path: str = "", query: str = "") -> None:
    tab.goto(f"{base_url}/{path}{'?' + query if query else ''}")
    wait_for_app_run(tab)
