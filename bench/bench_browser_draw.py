"""How fast each page draws in a real browser, against a bare Streamlit page with as many charts.

A viewer judges a page by when its pictures appear. For every page this opens the page's deep
link in Chromium on a warm server (caches filled, and nothing left computing from the last
visit) and times navigation → first chart drawn → every visible chart drawn; right after, it
opens `bare_page.py?charts=N` (a slider, a formula, a dataframe and N Plotly heatmaps, no
caching) at the same path on its own server, with N the number of charts the page drew, and
times the same. The ratio page / bare is the figure: what our pages cost beyond Streamlit's and
Plotly's own work for that many charts. Medians of `--trials` (5) visits, each in a new tab.

    .venv/bin/python bench/bench_browser_draw.py [--trials 5] [--pages multi-head positional]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness.app_pages import registered_pages  # noqa: E402
from harness.browser import (  # noqa: E402
    StreamlitServer,
    exceptions,
    launch_chromium,
    new_tab,
    wait_for_charts,
    wait_for_visible_charts,
)


def page_links() -> list[tuple[str, str]]:
    """Every registered page (ui/pages.py's list), opened at its defaults: (url path, query)."""
    return [(page.url_path, "") for page in registered_pages()]


def draw_times(browser, url: str) -> dict:
    """Seconds from navigation to the first chart drawn and to every visible chart drawn."""
    tab = new_tab(browser)
    try:
        started = time.monotonic()
        tab.goto(url)
        wait_for_charts(tab, minimum=1)
        first = time.monotonic() - started
        charts = wait_for_visible_charts(tab)
        return {
            "first_chart_s": first,
            "all_charts_s": time.monotonic() - started,
            "charts": charts,
            "exceptions": exceptions(tab),
        }
    finally:
        tab.context.close()


def median_of(browser, server: StreamlitServer, url: str, trials: int) -> dict:
    draw_times(browser, url)  # warm: caches filled, browser has the static files
    runs = []
    for _ in range(trials):
        # A model page goes on computing what lies below its first chart after the visit has
        # timed it; a visit that began then would share two cores with that work.
        wait_until_quiet(server)
        runs.append(draw_times(browser, url))
    return {
        "first_chart_s": round(statistics.median(r["first_chart_s"] for r in runs), 3),
        "all_charts_s": round(statistics.median(r["all_charts_s"] for r in runs), 3),
        "charts": runs[-1]["charts"],
        "exceptions": sorted({e for r in runs for e in r["exceptions"]}),
    }


def wait_until_quiet(server: StreamlitServer, timeout: float = 120.0) -> None:
    """Until the server has used under QUIET_CPU of a core over QUIET_SECONDS, at most `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        used = server.cpu_seconds()
        time.sleep(QUIET_SECONDS)
        if server.cpu_seconds() - used < QUIET_CPU * QUIET_SECONDS:
            return
    raise TimeoutError(f"the server kept computing for {timeout:.0f} s after a visit")


# The trim thread's and the websocket's own work stay well under this share of a core.
QUIET_CPU, QUIET_SECONDS = 0.1, 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--pages", nargs="*", help="url paths to time (default: every page)")
    args = parser.parse_args()
    chosen = [(page, query) for page, query in page_links() if not args.pages or page in args.pages]
    report: dict = {"pages": {}}
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        app, bare = StreamlitServer(), StreamlitServer(script="bench/bare_page.py")
        try:
            # Each page right before its bare twin, so that both see the machine as it is then.
            for page, query in chosen:
                result = median_of(browser, app, f"{app.url}/{page}?{query}", args.trials)
                # At the page's own path: below the root, the frontend first looks for the
                # server there (a failed /<page>/_stcore/health), for any Streamlit page.
                baseline = median_of(
                    browser, bare, f"{bare.url}/{page}?charts={result['charts']}", args.trials
                )
                report["pages"][page] = {
                    "app": result,
                    "bare_same_charts": baseline,
                    "first_chart_ratio": round(
                        result["first_chart_s"] / baseline["first_chart_s"], 2
                    ),
                    "all_charts_ratio": round(result["all_charts_s"] / baseline["all_charts_s"], 2),
                }
                print(page, json.dumps(report["pages"][page]), file=sys.stderr)
        finally:
            app.close()
            bare.close()
        browser.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
