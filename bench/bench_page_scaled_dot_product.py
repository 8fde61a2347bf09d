"""Rerun time of the scaled dot-product page after a change, at default settings.

Drives the page with Streamlit's AppTest (the script runs exactly as in `streamlit run`, without
the browser) and times each rerun after one change, in turn: a Q cell edit, the causal toggle,
the temperature slider and the "explain one row" query. Every edit and temperature is a new
value, so no figure comes from the page's figure cache for those steps. Prints JSON: p50/p95/max in
milliseconds, overall and per kind of change, and the load average (the machine may be shared).

    .venv/bin/python bench/bench_page_scaled_dot_product.py [--runs 40]
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

from ui.widgets.editors import editor_widget_key  # noqa: E402

KINDS = ("edit Q cell", "causal toggle", "temperature", "explain row")


def summary(times: list[float]) -> dict:
    times = sorted(times)
    return {
        "runs": len(times),
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 1),
        "max_ms": round(times[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/sdpa_steps.py")
    started = time.perf_counter()
    at.run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception:
        sys.exit(f"the page raised: {[e.value for e in at.exception]}")

    def change(i: int) -> None:
        kind = KINDS[i % len(KINDS)]
        if kind == "edit Q cell":
            key = editor_widget_key(at.session_state, "scaled_dot_product.q")
            at.session_state[key] = {
                "edited_rows": {0: {"d1": 1.0 + i / 100}},
                "added_rows": [],
                "deleted_rows": [],
            }
        elif kind == "causal toggle":
            causal = at.toggle(key="scaled_dot_product.causal")
            causal.set_value(not causal.value)
        elif kind == "temperature":
            at.slider(key="scaled_dot_product.tau").set_value(round(0.5 + i / 20, 2))
        else:
            at.selectbox(key="scaled_dot_product.row").set_value(1 + i % 3)
        return kind

    by_kind: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for i in range(args.runs):
        kind = change(i)
        started = time.perf_counter()
        at.run()
        by_kind[kind].append((time.perf_counter() - started) * 1000)
        if at.exception:
            sys.exit(f"the page raised: {[e.value for e in at.exception]}")
    everything = [t for times in by_kind.values() for t in times]
    print(
        json.dumps(
            {
                "benchmark": "scaled dot-product page rerun after a change (AppTest)",
                "settings": "default: 3-token preset, 3×3, d_k = d_v = 2; expanders closed",
                "first_load_ms": round(first_ms, 1),
                **summary(everything),
                "by_change": {kind: summary(times) for kind, times in by_kind.items() if times},
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
