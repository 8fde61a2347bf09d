"""Rerun time of every registered page at its default settings, measured with AppTest.

For each page in app.py's router: a new AppTest session (caches cleared first) runs app.py and
switches to the page (the cold first run), then reruns it `--reruns` times with nothing changed
(what a click that changes nothing on this page costs, with the page's caches warm). AppTest
runs the script exactly as `streamlit run` does, without a browser or a websocket, so these are
server-side script times. Prints JSON: per page the first run and the reruns' p50/p95/max (ms).

    .venv/bin/python bench/bench_reruns.py [--reruns 20] [--pages scaled-dot-product cost]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from bench.timing import only_what_viewers_ask_for  # noqa: E402
from harness.app_pages import registered_pages  # noqa: E402


def percentiles(times_ms: list[float]) -> dict:
    data = np.asarray(times_ms)
    return {
        "runs": len(times_ms),
        "p50_ms": round(float(np.percentile(data, 50)), 1),
        "p95_ms": round(float(np.percentile(data, 95)), 1),
        "max_ms": round(float(data.max()), 1),
    }


def time_page(path: str, default: bool, reruns: int) -> dict:
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    if not default:
        at.run()  # the router lands on the default page first
        at.switch_page(path)
    started = time.perf_counter()
    at.run()
    first_ms = (time.perf_counter() - started) * 1e3
    problems = [str(e.value)[:300] for e in at.exception]
    times = []
    for _ in range(reruns):
        started = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - started) * 1e3)
        problems += [str(e.value)[:300] for e in at.exception]
    return {
        "first_run_ms": round(first_ms, 1),
        **percentiles(times),
        "elements": len(list(at.main)),
        "exceptions": sorted(set(problems)),
    }


def main() -> None:
    only_what_viewers_ask_for()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reruns", type=int, default=20)
    parser.add_argument("--pages", nargs="*", help="url paths to time (default: all)")
    args = parser.parse_args()

    pages = [p for p in registered_pages() if not args.pages or p.url_path in args.pages]
    results = {}
    for page in pages:
        timing = time_page(page.path, page.default, args.reruns)
        results[page.url_path] = {"title": page.title, **timing}
    print(
        json.dumps(
            {
                "benchmark": "page rerun time at default settings (AppTest, nothing changed)",
                "reruns_per_page": args.reruns,
                "pages": results,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
