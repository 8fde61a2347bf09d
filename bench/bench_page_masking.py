"""Rerun time of the masking lab after a mask change, at default settings.

Drives the page with Streamlit's AppTest (the script runs exactly as in `streamlit run`, without
the browser) and times each rerun after changing one mask control, in turn: the mask kinds
(causal / causal + padding / causal + custom grid), a tick in the custom grid, and the leak
demo's score scale. Prints JSON: p50/p95/max wall time in milliseconds, and the p50 CPU time of
the process (less sensitive to other work on a shared machine).

    .venv/bin/python bench/bench_page_masking.py [--runs 30]
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
KIND_CYCLE = (["causal"], ["causal", "padding"], ["causal", "custom"])
SCALES = ("1e3", "1e4", "6e4")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    started = time.perf_counter()
    at.switch_page("pages/masking_lab.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception:
        sys.exit(f"the page raised: {[e.value for e in at.exception]}")

    def change(i: int):
        step = i % 3
        if step == 0:
            return at.multiselect(key="masking.kinds").set_value(KIND_CYCLE[(i // 3) % 3])
        if step == 1 and "masking.grid.version" in at.session_state:
            editor = f"masking.grid.editor.v{at.session_state['masking.grid.version']}"
            if editor in at.session_state:
                at.session_state[editor] = {
                    "edited_rows": {0: {"k2": bool(i % 2)}},
                    "added_rows": [],
                    "deleted_rows": [],
                }
                return at
        return at.select_slider(key="masking.scale").set_value(SCALES[i % 3])

    times, cpu = [], []
    for i in range(1, args.runs + 1):
        target = change(i)
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
                "benchmark": "masking lab rerun after a mask change (AppTest)",
                "settings": "default: 6 tokens, d_k 4; kinds, custom-grid tick, leak scale",
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
