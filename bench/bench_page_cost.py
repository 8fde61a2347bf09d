"""Rerun time of the cost page after a control change, at default settings.

Drives the page with Streamlit's AppTest (the script runs as in `streamlit run`, without the
browser) and times each rerun after changing one control, in turn: the online-softmax block
size, its number of keys, and the KV-cache length. No measurement runs (those need a click), so
this is the time a learner waits for the explanations to update. A last figure times one click
of **Measure** at the default sizes (NumPy and torch CPU, n = 128..1024), cold cache.
Prints JSON: p50/p95/max in milliseconds.

    .venv/bin/python bench/bench_page_cost.py [--runs 30]
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

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
PAGE = "pages/attention_cost.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    started = time.perf_counter()
    at.switch_page(PAGE).run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception:
        sys.exit(f"the page raised: {[e.value for e in at.exception]}")

    def change(i: int):
        step = i % 3
        if step == 0:
            return at.slider(key="cost.block").set_value(1 + i % 4)
        if step == 1:
            return at.slider(key="cost.keys").set_value(8 + i % 3)
        return at.slider(key="cost.decode").set_value(4 + i % 5)

    times = []
    for i in range(1, args.runs + 1):
        target = change(i)
        started = time.perf_counter()
        target.run()
        times.append((time.perf_counter() - started) * 1000)
        if at.exception:
            sys.exit(f"the page raised: {[e.value for e in at.exception]}")
    times.sort()

    # torch is imported only when the viewer asks for it: ask, then time the click.
    at.toggle(key="cost.torch").set_value(True).run()
    started = time.perf_counter()
    at.button(key="cost.measure").click().run()
    click_ms = (time.perf_counter() - started) * 1000
    print(
        json.dumps(
            {
                "benchmark": "cost page rerun after a control change (AppTest)",
                "settings": "default; online-softmax block size, keys, KV-cache length",
                "runs": len(times),
                "first_load_ms": round(first_ms, 1),
                "p50_ms": round(statistics.median(times), 1),
                "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 1),
                "max_ms": round(times[-1], 1),
                "measure_click_default_sizes_ms": round(click_ms, 1),
                "load_average_1min": round(os.getloadavg()[0], 2),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
