"""Many users at once: 10 browser sessions against one server, each editing a page for a minute.

A class opening the dashboard together is many sessions on one server process. This starts
one `streamlit run` on 127.0.0.1 (loopback only), then 10 Chromium sessions, each in its own
thread with its own browser, each on a page of its own (round-robin over the pages that have a
scenario here), editing it again and again until the time is up. After every edit a session
checks that the page shows what *it* typed: the widget, the link and a number computed from the
value (a leaked value from another session, whose values all differ, would show up there).

The editing minute starts once every session has its page open. This is done in `--rounds`
rounds (default 2) of fresh sessions against the same server: if memory after the second
round is well above memory after the first, sessions leave something behind.

Reported as JSON: per session the edits made, the problems seen (exception boxes, error boxes,
script errors in the browser, lost connections, wrong values) and the time from an edit to the
finished rerun; overall the totals, and the server's resident memory before the sessions, with
all pages open, at its peak while editing, and after the sessions closed, per round (sampled
every 2 s throughout).

Bounded: a fixed duration, a timeout on every wait, at most 20 sessions and 5 rounds, and a
hard stop for the whole run; the server listens on 127.0.0.1 only and is stopped at the end
whatever happens. Not part of the test suite.

    .venv/bin/python bench/load_test.py [--sessions 10] [--seconds 60] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402

from harness.app_pages import registered_pages  # noqa: E402
from harness.browser import (  # noqa: E402
    APP_ROOT,
    EXCEPTION,
    StreamlitServer,
    edit_cell,
    heatmap_cells,
    key_selector,
    launch_chromium,
    new_tab,
    open_app,
    rerun_after,
)
from harness.references import bert_tokens  # noqa: E402

WAIT_MS = 180_000  # one rerun on a 2-core machine shared with 10 browsers can take a while
CHECK_MS = 60_000  # after the rerun finished, how long the page may take to draw its result
ERROR_BOX = "[data-testid='stAlertContentError']"


def link_params(tab) -> dict[str, str]:
    return {name: values[-1] for name, values in parse_qs(urlparse(tab.url).query).items()}


def slider_value(tab, key: str) -> int:
    return int(tab.locator(f"{key_selector(key)} input[type='range']").get_attribute("value"))


# -- scenarios: how a session edits its page and what it must then see -------------------------


@dataclass
class Scenario:
    path: str
    edit: Callable  # (tab, session, step, memory) -> expected
    check: Callable  # (tab, expected) -> list of problems


def _slider_edit(key: str, lo: int, hi: int):
    """Move a slider one step with the keyboard, bouncing between its ends."""

    def edit(tab, session, step, memory):
        value = memory.get("value", slider_value(tab, key))
        direction = memory.get("direction", 1 if session % 2 else -1)
        if not lo <= value + direction <= hi:
            direction = -direction
        memory["direction"] = direction
        with rerun_after(tab, WAIT_MS):
            tab.locator(f"{key_selector(key)} input[type='range']").press(
                "ArrowRight" if direction > 0 else "ArrowLeft"
            )
        memory["value"] = value + direction
        return memory["value"]

    return edit


def _settled(tab, predicate_js: str, arg) -> bool:
    """Whether `predicate_js(arg)` becomes true within CHECK_MS (a rerun's drawing is async)."""
    try:
        tab.wait_for_function(predicate_js, arg=arg, timeout=CHECK_MS)
        return True
    except PlaywrightTimeout:
        return False


SLIDER_SHOWS = """([selector, value]) => {
    const input = document.querySelector(selector);
    return input !== null && input.value === value;
}"""
LINK_SHOWS = """([name, value]) => {
    const linked = new URLSearchParams(window.location.search).get(name);
    return value === null ? true : linked === value;
}"""


def _slider_check(key: str, param: str, default: int, extra: Callable | None = None):
    def check(tab, expected):
        problems = []
        selector = f"{key_selector(key)} input[type='range']"
        if not _settled(tab, SLIDER_SHOWS, [selector, str(expected)]):
            problems.append(
                f"slider {key} shows {slider_value(tab, key)}, this session set {expected}"
            )
        # The link leaves out a value equal to the page's default.
        wanted = None if expected == default else str(expected)
        if wanted is not None and not _settled(tab, LINK_SHOWS, [param, wanted]):
            problems.append(
                f"link has {param}={link_params(tab).get(param)}, this session set {expected}"
            )
        if extra:
            problems += extra(tab, expected)
        return problems

    return check


def _home_metric(tab, n):
    metric = "[data-testid='stMetric']"
    ok = _settled(
        tab,
        """([metric, wanted]) => [...document.querySelectorAll(metric)].some(
            (m) => m.innerText.includes("scores computed") && m.innerText.trim().endsWith(wanted)
        )""",
        [metric, str(n * n)],
    )
    if not ok:
        shown = [m for m in tab.locator(metric).all_inner_texts() if "scores computed" in m]
        return [f"home metric {shown} is not n² = {n * n}"]
    return []


def _text_edit(key: str, param: str):
    def edit(tab, session, step, memory):
        sentence = f"session{session} typed word{step} here"
        field_ = tab.locator(f"{key_selector(key)} input")
        with rerun_after(tab, WAIT_MS):
            field_.fill(sentence)
            field_.press("Enter")
        return sentence

    def check(tab, expected):
        problems = []
        shown = tab.locator(f"{key_selector(key)} input").input_value()
        if shown != expected:
            problems.append(f"{key} shows {shown!r}, this session typed {expected!r}")
        if not _settled(tab, LINK_SHOWS, [param, expected]):
            linked = link_params(tab).get(param)
            problems.append(f"link has {param}={linked!r}, this session typed {expected!r}")
        return problems

    return edit, check


# The scaled dot-product page's worked example (see tests/e2e/test_scaled_dot_product.py).
Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
K = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])


def _sdpa_edit(tab, session, step, memory):
    value = round(session + (step % 90 + 1) / 100, 2)  # 3.01, 3.02, ... for session 3
    with rerun_after(tab, WAIT_MS):
        edit_cell(tab, key_selector("scaled_dot_product.q.v1"), row=0, col=1, text=str(value))
    return value


def _sdpa_check(tab, value):
    """Output row 1 is softmax(q₁Kᵀ/√2)V with this session's q₁ = (value, 0)."""
    q = Q.copy()
    q[0, 0] = value
    scores = q @ K.T / np.sqrt(2)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = [f"{x:.4f}" for x in (weights @ V)[0]]
    scope = key_selector("scaled_dot_product.pipeline.output.chart")
    problems = []
    shown_right = _settled(
        tab,
        """([scope, wanted]) => {
            const cells = [...document.querySelectorAll(scope + " g.textpoint text")];
            return cells.length >= 2 && cells[0].textContent === wanted[0]
                && cells[1].textContent === wanted[1];
        }""",
        [scope, expected],
    )
    if not shown_right:
        shown = heatmap_cells(tab, scope)[:2]
        problems.append(f"output row 1 shows {shown}, Q₁₁ = {value} gives {expected}")
    linked_right = _settled(
        tab,
        """(first) => (new URLSearchParams(window.location.search).get("Q") || "")
            .startsWith(first)""",
        f"{value:g},",
    )
    if not linked_right:
        linked = link_params(tab).get("Q", "")
        problems.append(f"link Q={linked!r} does not start with this session's {value:g}")
    return problems


def _bert_edit(tab, session, step, memory):
    sentence = f"Session {session} reads sentence number {step} aloud"
    field_ = tab.locator(f"{key_selector('pretrained.text')} textarea")
    with rerun_after(tab, WAIT_MS):
        field_.fill(sentence)
        field_.press("Control+Enter")
    return sentence


def _bert_check(tab, sentence):
    """The token caption lists the WordPiece tokens of this session's sentence."""
    expected = " · ".join(bert_tokens(sentence))
    caption = "[data-testid='stCaptionContainer']"
    ok = _settled(
        tab,
        """([caption, wanted]) => [...document.querySelectorAll(caption)].some(
            (c) => c.innerText.includes("(WordPiece") && c.innerText.trim().endsWith(wanted)
        )""",
        [caption, expected],
    )
    problems = []
    if not ok:
        shown = [c for c in tab.locator(caption).all_inner_texts() if "(WordPiece" in c]
        problems.append(f"tokens {shown[:1]} are not those of {sentence!r}")
    if not _settled(tab, LINK_SHOWS, ["text", sentence]):
        problems.append(f"link has text={link_params(tab).get('text')!r}, typed {sentence!r}")
    return problems


_mha_edit, _mha_check = _text_edit("multi_head.sentence", "sentence")
_pe_edit, _pe_check = _text_edit("positional.sentence", "sentence")

SCENARIOS = {
    "scaled-dot-product": Scenario("scaled-dot-product", _sdpa_edit, _sdpa_check),
    "why": Scenario(
        "", _slider_edit("why.n", 2, 10), _slider_check("why.n", "n", 6, extra=_home_metric)
    ),
    "masking": Scenario(
        "masking", _slider_edit("masking.n", 2, 8), _slider_check("masking.n", "n", 6)
    ),
    "multi-head": Scenario("multi-head", _mha_edit, _mha_check),
    "positional": Scenario("positional", _pe_edit, _pe_check),
    "pretrained": Scenario("pretrained", _bert_edit, _bert_check),
    "cost": Scenario(
        "cost", _slider_edit("cost.keys", 2, 12), _slider_check("cost.keys", "keys", 8)
    ),
}


# -- sessions ------------------------------------------------------------------------------------


@dataclass
class SessionResult:
    index: int
    page: str
    round: int
    edits: int = 0
    checks_passed: int = 0
    problems: list[str] = field(default_factory=list)
    browser_errors: list[str] = field(default_factory=list)
    rerun_ms: list[float] = field(default_factory=list)
    final_check: list[str] | None = None


class StartLine:
    """Sessions load their pages first; the timed minute starts when all are ready (or dead)."""

    def __init__(self, sessions: int):
        self.waiting_for = sessions
        self.condition = threading.Condition()
        self.deadline: float | None = None

    def arrive(self) -> None:
        with self.condition:
            self.waiting_for -= 1
            self.condition.notify_all()

    def all_arrived(self, timeout: float) -> bool:
        with self.condition:
            return self.condition.wait_for(lambda: self.waiting_for <= 0, timeout=timeout)

    def go(self, seconds: float) -> None:
        with self.condition:
            self.deadline = time.monotonic() + seconds
            self.condition.notify_all()

    def wait_for_go(self, timeout: float) -> float:
        with self.condition:
            self.condition.wait_for(lambda: self.deadline is not None, timeout=timeout)
            return self.deadline if self.deadline is not None else time.monotonic()


def run_session(index: int, page: str, url: str, start: StartLine, result: SessionResult):
    from playwright.sync_api import sync_playwright

    scenario = SCENARIOS[page]
    memory: dict = {}
    arrived = False
    try:
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                tab = new_tab(browser)
                tab.set_default_timeout(WAIT_MS)
                tab.on("pageerror", lambda error: result.browser_errors.append(str(error)[:300]))
                open_app(tab, url, scenario.path)
                start.arrive()
                arrived = True
                deadline = start.wait_for_go(timeout=WAIT_MS / 1e3 * 3)
                expected = None
                step = 0
                while time.monotonic() < deadline:
                    started = time.monotonic()
                    expected = scenario.edit(tab, index, step, memory)
                    result.rerun_ms.append((time.monotonic() - started) * 1e3)
                    result.edits += 1
                    step += 1
                    problems = scenario.check(tab, expected) + page_problems(tab)
                    if problems:
                        result.problems += [f"edit {step}: {p}" for p in problems]
                    else:
                        result.checks_passed += 1
                if expected is not None:
                    # After everyone stopped: still this session's own last value.
                    result.final_check = scenario.check(tab, expected) + page_problems(tab)
                tab.context.close()
            finally:
                browser.close()
    except Exception as error:  # a session that dies is a finding, not a crash of the run
        result.problems.append(f"session stopped: {type(error).__name__}: {error}"[:500])
        result.problems.append(traceback.format_exc(limit=3)[-800:])
    finally:
        if not arrived:
            start.arrive()


def page_problems(tab) -> list[str]:
    problems = [f"exception box: {text[:200]}" for text in tab.locator(EXCEPTION).all_inner_texts()]
    problems += [f"error box: {text[:200]}" for text in tab.locator(ERROR_BOX).all_inner_texts()]
    state = tab.locator(APP_ROOT).get_attribute("data-test-connection-state")
    if state != "CONNECTED":
        problems.append(f"connection state {state}")
    return problems


class MemorySampler(threading.Thread):
    def __init__(self, server: StreamlitServer, every: float = 2.0):
        super().__init__(daemon=True)
        self.server, self.every = server, every
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.started_at = time.monotonic()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append((time.monotonic() - self.started_at, self.server.rss_bytes()))
            except (OSError, RuntimeError):
                return
            self.stop.wait(self.every)


def mb(value: float) -> float:
    return round(value / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0, help="editing time per round")
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="rounds of fresh sessions; memory after each shows whether it keeps growing",
    )
    parser.add_argument(
        "--hard-stop", type=float, default=1200.0, help="seconds after which the run gives up"
    )
    args = parser.parse_args()
    if not 1 <= args.sessions <= 20:
        sys.exit("--sessions must be between 1 and 20: this is a bounded test")
    if not 5 <= args.seconds <= 600:
        sys.exit("--seconds must be between 5 and 600")
    if not 1 <= args.rounds <= 5:
        sys.exit("--rounds must be between 1 and 5")

    pages = [p.url_path for p in registered_pages() if p.url_path in SCENARIOS]
    not_exercised = [p.url_path for p in registered_pages() if p.url_path not in SCENARIOS]
    server = StreamlitServer()
    rounds = []
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:  # the server's special first request
            browser = launch_chromium(playwright)
            warm = new_tab(browser)
            open_app(warm, server.url)
            warm.context.close()
            browser.close()
        rss_before = server.rss_bytes()
        sampler = MemorySampler(server)
        sampler.start()
        hard_stop = time.monotonic() + args.hard_stop
        for number in range(1, args.rounds + 1):
            rounds.append(run_round(number, server, pages, args, hard_stop, sampler))
        sampler.stop.set()
        sampler.join(timeout=5)
    finally:
        server.close()

    results = [r for one in rounds for r in one.pop("results")]
    all_rerun = [t for r in results for t in r.rerun_ms]
    report = {
        "benchmark": "load test: concurrent browser sessions against one server",
        "sessions_per_round": args.sessions,
        "rounds": args.rounds,
        "seconds_of_load_per_round": args.seconds,
        "pages_exercised": sorted({r.page for r in results}),
        "pages_without_a_scenario": not_exercised,
        "total_edits": sum(r.edits for r in results),
        "edits_checked_ok": sum(r.checks_passed for r in results),
        "problems": sum(len(r.problems) + len(r.final_check or []) for r in results),
        "browser_script_errors": sum(len(r.browser_errors) for r in results),
        "edit_to_rerun_done_ms": {
            "p50": round(float(np.percentile(all_rerun, 50))) if all_rerun else None,
            "p95": round(float(np.percentile(all_rerun, 95))) if all_rerun else None,
            "max": round(max(all_rerun)) if all_rerun else None,
        },
        "server_rss_mb": {
            "before": mb(rss_before),
            "per_round": [one.pop("rss_mb") for one in rounds],
            "samples_every_2s": [mb(rss) for _, rss in sampler.samples],
        },
        "round_timings": rounds,
        "per_session": [
            {
                "round": r.round,
                "session": r.index,
                "page": r.page,
                "edits": r.edits,
                "checks_ok": r.checks_passed,
                "problems": r.problems[:10],
                "final_check_problems": r.final_check,
                "browser_errors": r.browser_errors[:5],
                "edit_to_rerun_p50_ms": round(float(np.median(r.rerun_ms))) if r.rerun_ms else None,
            }
            for r in results
        ],
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))


def run_round(number, server, pages, args, hard_stop, sampler) -> dict:
    """One round: fresh sessions open their pages, edit for `args.seconds`, then close."""
    start = StartLine(args.sessions)
    results = [
        SessionResult(index=i, page=pages[i % len(pages)], round=number)
        for i in range(args.sessions)
    ]
    threads = [
        threading.Thread(
            target=run_session,
            args=(r.index, r.page, server.url, start, r),
            name=f"round-{number}-session-{r.index}",
            daemon=True,
        )
        for r in results
    ]
    launched = time.monotonic()
    for thread in threads:
        thread.start()
    start.all_arrived(timeout=max(0.0, hard_stop - time.monotonic()))
    loaded_s = time.monotonic() - launched
    rss_all_open = server.rss_bytes()
    cpu_from = server.cpu_seconds()
    load_from = time.monotonic() - sampler.started_at
    start.go(args.seconds)
    for thread in threads:
        thread.join(timeout=max(0.0, hard_stop - time.monotonic()))
    load_to = time.monotonic() - sampler.started_at
    server_cpu = server.cpu_seconds() - cpu_from
    rss_end_of_load = server.rss_bytes()
    # Let the server notice the closed sessions before reading "after": wait until the memory
    # stops falling (3 s apart, at most 30 s).
    settle_deadline = time.monotonic() + 30
    previous = rss_end_of_load
    while time.monotonic() < settle_deadline:
        sampler.stop.wait(3)
        now = server.rss_bytes()
        if now >= previous:
            break
        previous = now
    peak = max((rss for t, rss in sampler.samples if load_from <= t <= load_to), default=0)
    return {
        "round": number,
        "seconds_to_open_all_pages": round(loaded_s, 1),
        "seconds_editing": round(load_to - load_from, 1),
        "sessions_still_running_at_hard_stop": [t.name for t in threads if t.is_alive()],
        "edits": sum(r.edits for r in results),
        "server_cpu_s_while_editing": round(server_cpu, 1),
        "server_cpu_share_of_one_core": round(server_cpu / max(load_to - load_from, 1e-9), 2),
        "server_cpu_ms_per_edit": round(1e3 * server_cpu / max(1, sum(r.edits for r in results))),
        "rss_mb": {
            "round": number,
            "all_pages_open": mb(rss_all_open),
            "peak_while_editing": mb(peak),
            "end_of_editing": mb(rss_end_of_load),
            "after_sessions_closed": mb(server.rss_bytes()),
        },
        "results": results,
    }


if __name__ == "__main__":
    main()
