"""Rerun time of the "Why attention?" page after its token slider moves.

Drives the page with Streamlit's AppTest (the script runs exactly as in `streamlit run`, without
the browser) and times each rerun after moving the slider to the next length of the sentence
(2 to 10 tokens, round and round), so each of the 9 diagrams is drawn once and then comes from
the figure cache. Prints JSON: p50/p95/max wall time in milliseconds, and the p50 CPU time of
the process (less sensitive to other work on a shared machine).

    .venv/bin/python bench/bench_page_why.py [--runs 30]
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
LENGTHS = tuple(range(2, 11))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    started = time.perf_counter()
    at.run()  # the app opens on this page
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception:
        sys.exit(f"the page raised: {[e.value for e in at.exception]}")

    times, cpu = [], []
    for i in range(1, args.runs + 1):
        target = at.slider(key="why.n").set_value(LENGTHS[i % len(LENGTHS)])
        started, cpu_started = time.perf_counter(), time.process_time()
        target.run()
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        if at.exception:
            sys.exit(f"the page raised: {[e.value for e in at.exception]}")
    times.sort()
    print(
        json.dumps(
            {
                "benchmark": "why-attention page rerun after the token slider moves (AppTest)",
                "settings": "default: 6 tokens; the slider cycles through 2..10 tokens",
                "runs": len(times),
                "first_load_ms": round(first_ms, 1),
                "p50_ms": round(statistics.median(times), 1),
                "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 1),
                "max_ms": round(times[-1], 1),
                "p50_cpu_ms": round(statistics.median(cpu), 1),
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
