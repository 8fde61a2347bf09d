"""Rerun time of the real-model page after changing the head, at default settings.

Drives the page with Streamlit's AppTest (the script runs exactly as in `streamlit run`, without
the browser) on the default sentence (16 tokens) and times each full rerun (wall clock, and CPU
time, which does not depend on what else the machine is doing) after moving the head slider,
for each of the three pictures (head view, model view, layer averages). The heads are visited
in turn, 1 to 12 and round again: the first round builds each head's figures (`cold`), later
rounds find them cached (`warm`), as for a user going back and forth. The model and the trace
are loaded before timing starts; the script checks that no rerun ran the model again.
Prints JSON: p50/p95/max in milliseconds.

    .venv/bin/python bench/bench_page_pretrained.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.timing import summary  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="times round the 12 heads")
    args = parser.parse_args()

    from ui.models import minilm

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    started = time.perf_counter()
    at.switch_page("pages/real_model.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")
    passes = minilm.forward_passes()

    results = {}
    for picture in ("head", "model", "layers"):
        at.radio(key="pretrained.view").set_value(picture).run()
        cold, warm, cpu = [], [], []
        for round_ in range(args.rounds):
            for head in range(1, 13):
                widget = at.select_slider(key="pretrained.head").set_value(head)
                wall_start, cpu_start = time.perf_counter(), time.process_time()
                widget.run()
                (cold if round_ == 0 else warm).append((time.perf_counter() - wall_start) * 1000)
                # CPU time of this process (the script runs in one of its threads).
                cpu.append((time.process_time() - cpu_start) * 1000)
                if at.exception:
                    sys.exit(f"the page raised: {[e.value for e in at.exception]}")
        results[picture] = {
            "all": summary(cold + warm),
            "cold_first_visit": summary(cold),
            **({"warm_revisit": summary(warm)} if warm else {}),
            "cpu": summary(cpu),
        }
    if minilm.forward_passes() != passes:
        sys.exit("changing the head ran the model again: the trace cache is broken")

    print(
        json.dumps(
            {
                "benchmark": "real-model page rerun after changing the head (AppTest)",
                "settings": "default sentence, 16 tokens; heads 1..12 in turn, "
                f"{args.rounds} rounds per picture",
                "first_load_ms": round(first_ms, 1),
                "forward_passes_during_head_changes": minilm.forward_passes() - passes,
                **results,
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
