"""Rerun time of the probe page (rollout, query-key map, ablation) after each kind of change.

Drives the page with Streamlit's AppTest on the default sentence (16 tokens) and times each full
rerun (wall clock and this process's CPU time) after: moving the head slider (the map and the
ablation heatmaps follow; rollout is cached), picking another token to follow in rollout, and
picking another token to ablate (two forward passes each, the first time). Each control is
visited in turn and round again: the first round builds figures and results (`cold`), later
rounds find them cached (`warm`). AppTest reruns the whole script, so these are upper bounds
for the fragment reruns a browser makes. Prints JSON: p50/p95/max in milliseconds.

    .venv/bin/python bench/bench_page_probe.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.timing import summary  # noqa: E402

# (widget kind, key, values visited): the page's main controls.
CONTROLS = {
    "head": ("select_slider", "probe.head", list(range(1, 13))),
    "rollout_token": ("selectbox", "probe.token", list(range(1, 17))),
    "ablated_token": ("selectbox", "probe.ablate", list(range(2, 16))),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    started = time.perf_counter()
    at.switch_page("pages/probe_model.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")

    results = {}
    for name, (kind, key, values) in CONTROLS.items():
        cold, warm, cpu = [], [], []
        for round_ in range(args.rounds):
            for value in values:
                widget = getattr(at, kind)(key=key).set_value(value)
                wall_start, cpu_start = time.perf_counter(), time.process_time()
                widget.run()
                (cold if round_ == 0 else warm).append((time.perf_counter() - wall_start) * 1000)
                cpu.append((time.process_time() - cpu_start) * 1000)
                if at.exception:
                    sys.exit(f"the page raised: {[e.value for e in at.exception]}")
        results[name] = {
            "cold_first_visit": summary(cold),
            **({"warm_revisit": summary(warm)} if warm else {}),
            "cpu": summary(cpu),
        }
    print(
        json.dumps(
            {
                "page": "pages/probe_model.py",
                "first_run_ms": round(first_ms, 1),
                "rounds": args.rounds,
                "python": platform.python_version(),
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
