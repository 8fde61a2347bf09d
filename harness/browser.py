"""Drive the real app: a `streamlit run` server and Debian's Chromium through Playwright.

Shared by the end-to-end tests (tests/e2e/) and the browser benchmarks (bench/). Script runs
are awaited the way Streamlit's own end-to-end tests do it: the app root carries its connection
state and script-run state as attributes, so nothing sleeps for a fixed time. An interaction
that causes a rerun is wrapped in `rerun_after(tab)`, which waits for the server to report a
run finished after the interaction (a plain "is it idle?" check could pass before the rerun
even began).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import weakref
from contextlib import contextmanager
from pathlib import Path

from server.resident import child_pids, memory_mb
from server.serve import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
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
    "--disable-dev-shm-usage",
]
APP_ROOT = "[data-testid='stApp']"
# Generous: CI machines and the 2-core dev box run other work while the browser waits.
TIMEOUT_MS = float(os.environ.get("E2E_TIMEOUT_MS", "120000"))
# Every page also holds one hidden, empty chart that loads Plotly early (ui.layout): not counted.
PLOTLY_CHART = "[data-testid='stPlotlyChart']:not(.st-key-plotly_preload *)"
# What Plotly puts in the SVG once a trace is drawn: a heatmap image group or a trace group.
TRACE_DRAWN = ".main-svg g.hm, .main-svg g.trace"
EXCEPTION = "[data-testid='stException']"
# The numbers written in a heatmap's cells: a text trace over the heatmap (ui.charts draws each
# number black or white for its cell's contrast), so SVG text points, row by row.
CELL_NUMBERS = "g.textpoint text"

# The websockets each tab opened (Streamlit keeps one per session), newest last.
_SOCKETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class StreamlitServer:
    """`streamlit run app.py` (or another `script`) on a free localhost port, stopped on `close()`.

    With `wait=False` the process is started but not awaited; call `wait_healthy()` later, so
    several servers can boot at once. `env` adds environment variables (a server's settings).
    """

    def __init__(
        self,
        extra_args: tuple[str, ...] = (),
        *,
        wait: bool = True,
        script: str = "app.py",
        env: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
        self.log = ROOT / "artifacts" / f"streamlit-{self.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log.open("w")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                script,
                "--server.headless",
                "true",
                "--server.port",
                str(self.port),
                "--server.address",
                "127.0.0.1",
                "--browser.gatherUsageStats",
                "false",
                # Other work may edit sources while a test runs; the server keeps what it loaded.
                "--server.fileWatcherType",
                "none",
                *extra_args,
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        if wait:
            self.wait_healthy()

    def wait_healthy(self, timeout: float = 120.0) -> float:
        """Block until `/_stcore/health` answers `ok`; return seconds since the process start."""
        try:
            wait_healthy(self.port, self.process, timeout)
        except (RuntimeError, TimeoutError) as failed:
            raise type(failed)(f"streamlit: {failed}; see {self.log}") from None
        return time.monotonic() - self.started

    def rss_bytes(self) -> int:
        """The server's memory now, its children's own included (server.resident.memory_mb)."""
        return round(memory_mb(self.process.pid) * 2**20)

    def cpu_seconds(self) -> float:
        """User + system CPU time the server has used so far, its living children's included
        (the model's process runs the passes a page starts), from /proc."""
        total = 0.0
        for pid in (self.process.pid, *child_pids(self.process.pid)):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                # Fields 14 and 15 of stat (utime, stime), counted after the ")" ending the name.
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log_file.close()


def launch_chromium(playwright):
    """Debian's Chromium (Playwright's own browser download is not used)."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def new_tab(browser, *, width: int = 1280, height: int = 900, **context_options):
    """A tab in its own context (its own Streamlit session) that counts finished runs.

    `context_options` go to Playwright's `new_context`: `color_scheme="dark"` (Streamlit follows
    the system's theme), `reduced_motion="reduce"`.
    """
    context = browser.new_context(
        viewport={"width": width, "height": height}, accept_downloads=True, **context_options
    )
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    sockets: list = []
    _SOCKETS[tab] = sockets
    tab.on("websocket", lambda socket: sockets.append(socket))
    return tab


def wait_for_app_run(tab, timeout: float = TIMEOUT_MS) -> None:
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


def _run_finished(payload: str | bytes) -> bool:
    """Whether a websocket frame from the server is the end of a script run that completed.

    A run cut short because a newer one started (FINISHED_EARLY_FOR_RERUN) does not count:
    the newer run is the one to wait for.
    """
    if isinstance(payload, str):
        return False
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg.FromString(payload)
    return (
        message.WhichOneof("type") == "script_finished"
        and message.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN
    )


@contextmanager
def rerun_after(tab, timeout: float = TIMEOUT_MS):
    """Wrap an interaction that reruns the script; return once that rerun has finished.

    The server's "script finished" message on the session's websocket is the signal (a fast
    run can come and go between two renders, so the page's script-state attribute may never
    show it); then the page must have drawn that run (no stale elements left).
    """
    sockets = _SOCKETS.get(tab)
    if not sockets:
        raise RuntimeError("rerun_after needs a tab from new_tab() that has opened the app")
    with sockets[-1].expect_event("framereceived", predicate=_run_finished, timeout=timeout):
        yield
    wait_for_app_run(tab, timeout)


def wait_for_link(
    tab, has: tuple[str, ...] = (), lacks: tuple[str, ...] = (), timeout: float = TIMEOUT_MS
) -> str:
    """Wait until the address bar's query string holds every part of `has` and none of
    `lacks` (the app rewrites the URL as the view changes); return the URL."""
    tab.wait_for_function(
        """([has, lacks]) => {
            const query = window.location.search;
            return has.every((part) => query.includes(part))
                && !lacks.some((part) => query.includes(part));
        }""",
        arg=[list(has), list(lacks)],
        timeout=timeout,
    )
    return tab.url


def open_app(tab, base_url: str, path: str = "", query: str = "") -> None:
    tab.goto(f"{base_url}/{path}{'?' + query if query else ''}")
    wait_for_app_run(tab)


def wait_for_charts(tab, scope: str = "", minimum: int = 1, timeout: float = TIMEOUT_MS) -> None:
    """Wait until Plotly has drawn at least `minimum` charts (under the CSS `scope`, if given).

    Plotly draws after the script run has finished, so a finished run is not yet a chart.
    """
    tab.wait_for_function(
        """([charts, drawn, minimum]) => {
            const done = [...document.querySelectorAll(charts)].filter(
                (chart) => chart.querySelector(drawn) !== null
            );
            return done.length >= minimum;
        }""",
        arg=[f"{scope} {PLOTLY_CHART}".strip(), TRACE_DRAWN, minimum],
        timeout=timeout,
    )


def wait_for_visible_charts(tab, minimum: int = 1, timeout: float = TIMEOUT_MS) -> int:
    """Wait until at least `minimum` charts are visible (not in a closed expander or tab) and
    every visible chart is drawn; return how many visible charts there are.
    """
    handle = tab.wait_for_function(
        """([charts, drawn, minimum]) => {
            const visible = [...document.querySelectorAll(charts)].filter(
                (chart) => chart.getClientRects().length > 0
            );
            const waiting = visible.filter((chart) => chart.querySelector(drawn) === null);
            return visible.length >= minimum && waiting.length === 0
                ? {count: visible.length}
                : false;
        }""",
        arg=[PLOTLY_CHART, TRACE_DRAWN, minimum],
        timeout=timeout,
    )
    return handle.json_value()["count"]


def exceptions(tab) -> list[str]:
    """The text of every exception box on the page (empty when the page ran cleanly)."""
    return tab.locator(EXCEPTION).all_inner_texts()


def active_page_title(tab) -> str:
    """The title of the page the sidebar menu marks as current (without its icon's name)."""
    link = tab.locator("[data-testid='stSidebarNavLink'][aria-current='page']")
    return link.inner_text().strip().splitlines()[-1].strip()


def choose_option(tab, select_scope: str, option: str) -> None:
    """Pick `option` from the selectbox under the CSS `select_scope`.

    A click alone does not always open the menu (a click that lands while the page is still
    settling is swallowed), so the menu is also opened from the keyboard, as a user can.
    """
    box = tab.locator(f"{select_scope} [role='combobox']")
    box.click()
    box.press("ArrowDown")
    tab.get_by_role("option", name=option).click()


def key_selector(key: str) -> str:
    """CSS for the element with widget/element key `key` (Streamlit adds class st-key-<key>)."""
    return ".st-key-" + re.sub(r"[^A-Za-z0-9_-]", "-", key)


def heatmap_cells(tab, scope: str) -> list[str]:
    """The numbers written in the cells of the first heatmap under `scope`, row by row."""
    chart = tab.locator(f"{scope} {PLOTLY_CHART}").first
    return chart.locator(CELL_NUMBERS).all_text_contents()


def edit_cell(tab, editor_scope: str, row: int, col: int, text: str) -> None:
    """Type `text` into a data-editor cell (row and col count data cells from 0) and commit it.

    The glide data grid is a canvas: click the first cell of the first data row, walk to the
    target with the arrow keys, open the cell editor with Enter, replace its content, and
    commit with Enter. The caller waits for the rerun (wrap this in `rerun_after`).
    """
    grid = tab.locator(f"{editor_scope} [data-testid='stDataFrame']").first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    if box is None:
        raise AssertionError(f"the data editor under {editor_scope} is not visible")
    # Row height and header height are 35 px in Streamlit's grid.
    grid.click(position={"x": 12, "y": 35 + 35 / 2})
    for _ in range(col):
        tab.keyboard.press("ArrowRight")
    for _ in range(row):
        tab.keyboard.press("ArrowDown")
    tab.keyboard.press("Enter")
    overlay_input = tab.locator("#portal .gdg-clip-region input, #portal .gdg-clip-region textarea")
    overlay_input.first.wait_for(state="visible")
    overlay_input.first.fill(text)
    overlay_input.first.press("Enter")


def full_page_screenshot(tab, path: Path, *, max_height: int = 12_000) -> None:
    """Screenshot the whole app, not just the viewport.

    Streamlit scrolls inside its own container, so Playwright's `full_page` sees one screen;
    the viewport is grown to the content's height for the picture and put back after.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    viewport = tab.viewport_size
    height = tab.evaluate(
        """() => {
            const main = document.querySelector("[data-testid='stMain']");
            return main ? main.scrollHeight : document.body.scrollHeight;
        }"""
    )
    tall = min(max(int(height), viewport["height"]), max_height)
    if tall > viewport["height"]:
        tab.set_viewport_size({"width": viewport["width"], "height": tall})
        # Two animation frames: the grown viewport is laid out and painted.
        tab.evaluate(
            "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
    try:
        tab.screenshot(path=str(path))
    finally:
        if tall > viewport["height"]:
            tab.set_viewport_size(viewport)
