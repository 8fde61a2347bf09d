"""Rerun time of the multi-head page after a control change, at default settings.

Drives the page with Streamlit's AppTest (the script runs exactly as in `streamlit run`, without
the browser) and times each rerun (wall clock, and CPU time, which does not depend on what else
the machine is doing) after changing one control: the seed, then the number of heads,
then the causal toggle, in turn (a value seen before may hit the figure cache, as it would
for a user toggling back and forth). Prints JSON: p50/p95/max in milliseconds.

    .venv/bin/python bench/bench_page_multi_head.py [--runs 30]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    started = time.perf_counter()
    at.switch_page("pages/multi_head.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception:
        sys.exit(f"the page raised: {[e.value for e in at.exception]}")

    changes = (
        lambda i: at.number_input(key="multi_head.seed").set_value(i % 50),
        lambda i: at.select_slider(key="multi_head.heads").set_value(2 if i % 2 else 4),
        lambda i: at.toggle(key="multi_head.causal").set_value(bool(i % 2)),
    )
    times, cpu_times = [], []
    for i in range(1, args.runs + 1):
        widget = changes[i % len(changes)](i)
        started, cpu_started = time.perf_counter(), time.process_time()
        widget.run()
        times.append((time.perf_counter() - started) * 1000)
        # CPU time of this process (the script runs in one of its threads): what the rerun
        # costs, independent of other work competing for the machine's cores.
        cpu_times.append((time.process_time() - cpu_started) * 1000)
        if at.exception:
            sys.exit(f"the page raised: {[e.value for e in at.exception]}")
    times.sort()
    cpu_times.sort()
    print(
        json.dumps(
            {
                "benchmark": "multi-head page rerun after a control change (AppTest)",
                "settings": "default: 6 tokens, d_model 8, 4 heads / 2 heads",
                "runs": len(times),
                "first_load_ms": round(first_ms, 1),
                "p50_ms": round(statistics.median(times), 1),
                "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 1),
                "max_ms": round(times[-1], 1),
                "cpu_p50_ms": round(statistics.median(cpu_times), 1),
                "cpu_p95_ms": round(
                    cpu_times[min(len(cpu_times) - 1, int(0.95 * len(cpu_times)))], 1
                ),
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
