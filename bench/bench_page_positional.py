"""Rerun time of the positional-encoding page after a control change, default and largest.

Drives the page with Streamlit's AppTest (the script runs as in `streamlit run`, without the
browser) and times each rerun after changing one control, in turn: the position of the value
table, the offset k, the number of positions compared, the training length and the encoding
added to the sentence. First at the default settings (128 positions × 64 dimensions), then at
the largest (2048 positions × 1024 dimensions), where it also times the first render of that
size (cold: the table, its 2048² similarity matrix and the block-averaged pictures are built)
and a change of d_model that rebuilds all of them (1024 -> 1022). Reports the size of the
figures sent to the browser. Prints JSON: p50/p95/max in milliseconds.

    .venv/bin/python bench/bench_page_positional.py [--runs 20]
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
PAGE = "pages/positional_encoding.py"
FAMILIES = ("none", "sinusoidal", "learned")


def check(at: AppTest) -> None:
    if at.exception:
        sys.exit(f"the page raised: {[e.value for e in at.exception]}")


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000


def summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {
        "runs": len(times),
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 1),
        "max_ms": round(times[-1], 1),
    }


def reruns(at: AppTest, runs: int, positions: int) -> list[float]:
    def change(i: int):
        step = i % 5
        if step == 0:
            return at.slider(key="positional.position").set_value((7 * i) % positions)
        if step == 1:
            return at.slider(key="positional.offset").set_value(1 + (3 * i) % (positions - 1))
        if step == 2:
            return at.slider(key="positional.compare_n").set_value(8 + i % 9)
        if step == 3:
            return at.slider(key="positional.train").set_value(16 + i % 17)
        return at.button_group(key="positional.family").set_value(FAMILIES[i % 3])

    times = []
    for i in range(1, runs + 1):
        target = change(i)
        times.append(timed(target.run))
        check(at)
    return times


def figure_bytes(at: AppTest) -> int:
    return sum(len(chart.proto.spec) for chart in at.get("plotly_chart"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.run()
    at.switch_page(PAGE)
    first_ms = timed(at.run)
    check(at)
    default = summary(reruns(at, args.runs, 128))
    default_bytes = figure_bytes(at)

    at.slider(key="positional.d_model").set_value(1024)
    largest_first_ms = timed(at.slider(key="positional.positions").set_value(2048).run)
    check(at)
    largest = summary(reruns(at, args.runs, 2048))
    largest_bytes = figure_bytes(at)
    rebuild_ms = timed(at.slider(key="positional.d_model").set_value(1022).run)
    check(at)

    print(
        json.dumps(
            {
                "benchmark": "positional-encoding page rerun after a control change (AppTest)",
                "controls": "position, offset k, positions compared, training length, encoding",
                "first_load_ms": round(first_ms, 1),
                "default_128x64": default,
                "default_figure_json_bytes": default_bytes,
                "largest_2048x1024_first_render_ms": round(largest_first_ms, 1),
                "largest_2048x1024": largest,
                "largest_figure_json_bytes": largest_bytes,
                "largest_d_model_change_rebuild_ms": round(rebuild_ms, 1),
                "load_average_1min": round(os.getloadavg()[0], 2),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
