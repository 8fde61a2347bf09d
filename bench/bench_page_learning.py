"""The learning page: how long its default link takes to train, and its rerun time after a
control change once trained.

Drives the page with Streamlit's AppTest (the script runs exactly as in `streamlit run`, without
the browser): opens the default link on a fresh process, runs the page again every second as its
fragment does until the run has ended (the time to the first induction head and to the end), then
times each rerun after changing one control of the trained view: the step slider, the head, the
heads removed and the kind of composition, in turn. Prints JSON: p50/p95/max in milliseconds.

    .venv/bin/python bench/bench_page_learning.py [--runs 30]
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
sys.path.insert(0, str(ROOT))


def progress(at: AppTest) -> str:
    bars = at.get("progress")
    return bars[0].proto.text if bars else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    started = time.perf_counter()
    at.switch_page("pages/watch_attention_learn.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    formed_s = None
    while not progress(at).startswith("Trained"):
        time.sleep(1.0)
        at.run()
        if at.exception:
            sys.exit(f"the page raised: {[e.value for e in at.exception]}")
        said = " ".join(m.value for m in at.markdown)
        if formed_s is None and "became an induction head" in said:
            formed_s = time.perf_counter() - started
    trained_s = time.perf_counter() - started

    steps = at.select_slider(key="learning.step").options
    heads = at.selectbox(key="learning.head").options
    changes = (
        lambda i: at.select_slider(key="learning.step").set_value(int(steps[i % len(steps)])),
        lambda i: at.selectbox(key="learning.head").set_value(heads[i % len(heads)]),
        lambda i: at.multiselect(key="learning.remove").set_value([heads[i % len(heads)]]),
        lambda i: at.radio(key="learning.composition").set_value("kqv"[i % 3]),
    )
    times, cpu_times = [], []
    for i in range(1, args.runs + 1):
        widget = changes[i % len(changes)](i)
        started, cpu_started = time.perf_counter(), time.process_time()
        widget.run()
        times.append((time.perf_counter() - started) * 1000)
        cpu_times.append((time.process_time() - cpu_started) * 1000)
        if at.exception:
            sys.exit(f"the page raised: {[e.value for e in at.exception]}")
    times.sort()
    cpu_times.sort()
    print(
        json.dumps(
            {
                "benchmark": "learning page: the default link trained, then reruns (AppTest)",
                "settings": "default: 2 layers × 4 heads, d_model 64, 1,000 steps of 32",
                "first_run_ms": round(first_ms, 1),
                "induction_head_named_after_s": None if formed_s is None else round(formed_s, 1),
                "trained_after_s": round(trained_s, 1),
                "runs": len(times),
                "p50_ms": round(statistics.median(times), 1),
                "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 1),
                "max_ms": round(times[-1], 1),
                "cpu_p50_ms": round(statistics.median(cpu_times), 1),
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
