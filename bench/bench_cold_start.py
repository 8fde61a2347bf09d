"""Cold start: `streamlit run app.py` until /_stcore/health says ok, and until Chromium shows
the first page fully rendered (script run finished and every visible chart drawn).

Chromium is launched before the clock starts (a visitor's browser is already running). Each
trial starts a new server process, so Python's imports and Streamlit's start-up are all in the
figure; the first page is the home page, then (same server, a second visit) the scaled
dot-product page. Prints JSON with each trial and the medians, in seconds.

    .venv/bin/python bench/bench_cold_start.py [--trials 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.browser import (  # noqa: E402
    StreamlitServer,
    exceptions,
    launch_chromium,
    new_tab,
    open_app,
    wait_for_visible_charts,
)


def rendered(browser, url: str, path: str = "") -> tuple[float, int, list[str]]:
    """Seconds from navigation to a fully drawn page, the number of charts, any exceptions."""
    tab = new_tab(browser)
    try:
        started = time.monotonic()
        open_app(tab, url, path)
        charts = wait_for_visible_charts(tab)
        return time.monotonic() - started, charts, exceptions(tab)
    finally:
        tab.context.close()


def trial(browser) -> dict:
    server = StreamlitServer(wait=False)
    try:
        health_s = server.wait_healthy()
        first_page_s, home_charts, home_errors = rendered(browser, server.url)
        total_s = time.monotonic() - server.started
        sdpa_s, sdpa_charts, sdpa_errors = rendered(browser, server.url, "scaled-dot-product")
        return {
            "to_health_ok_s": round(health_s, 2),
            "to_first_page_rendered_s": round(total_s, 2),
            "first_page_after_health_s": round(first_page_s, 2),
            "home_charts": home_charts,
            "then_scaled_dot_product_page_s": round(sdpa_s, 2),
            "scaled_dot_product_charts": sdpa_charts,
            "exceptions": home_errors + sdpa_errors,
            "server_rss_mb": round(server.rss_bytes() / 2**20, 1),
        }
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            trials = [trial(browser) for _ in range(args.trials)]
        finally:
            browser.close()

    def median(name: str) -> float:
        return round(statistics.median(t[name] for t in trials), 2)

    print(
        json.dumps(
            {
                "benchmark": "cold start: streamlit run -> health ok -> first page in Chromium",
                "median_to_health_ok_s": median("to_health_ok_s"),
                "median_to_first_page_rendered_s": median("to_first_page_rendered_s"),
                "median_then_scaled_dot_product_page_s": median("then_scaled_dot_product_page_s"),
                "trials": trials,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
