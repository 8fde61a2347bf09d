"""The decoder page: first use (model load included) and the rerun after a layer, head, top-p
or min-p change.

Drives the page with Streamlit's AppTest (the script runs exactly as in `streamlit run`, without
the browser) in a fresh process, so the first visit pays for everything a first viewer of a
freshly started server pays for: reading and unpacking SmolLM2 (``load_decoder``), the prompt's
forward pass and the figures. Then the layer slider visits layers 1..30 and the head slider
heads 1..9; at temperature 1, the top-p slider visits 0.5..0.95 and the min-p slider 0.02..0.3
(each a new kept set: the stages, their bars and top-p's line). Full reruns, wall clock and CPU
time of this process. The first round builds each view's figures (`cold`), the second finds
them cached (`warm`). Prints JSON, milliseconds.

    flock -x /tmp/cpu.lock .venv/bin/python bench/bench_page_decoder.py [--rounds 2]
Set ATTENTION_EXPLORER_LLM_DTYPE=float32 to measure the float32 weights.
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

from bench.timing import only_what_viewers_ask_for, summary  # noqa: E402


def main() -> None:
    only_what_viewers_ask_for()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from ui.models import smollm

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    started = time.perf_counter()
    at.switch_page("pages/decoder_llm.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")
    model = smollm.load_decoder().model

    results = {}
    changes = [
        ("layer", "select_slider", "decoder.layer", range(1, 31)),
        ("head", "select_slider", "decoder.head", range(1, 10)),
        ("top_p", "slider", "decoder.top_p", (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)),
        ("min_p", "slider", "decoder.min_p", (0.02, 0.05, 0.1, 0.2, 0.3)),
    ]
    for what, kind, key, values in changes:
        if what == "top_p":  # sampling, where top-p and min-p change what may be drawn
            at.slider(key="decoder.temperature").set_value(1.0).run()
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
        results[f"{what}_change"] = {
            "cold_first_visit": summary(cold),
            **({"warm_revisit": summary(warm)} if warm else {}),
            "cpu": summary(cpu),
        }

    print(
        json.dumps(
            {
                "benchmark": "decoder page: first use, rerun after a layer/head/top-p/min-p change",
                "weights": model.weights.storage,
                "first_use_ms": round(first_ms, 1),
                "model_load_s": round(model.load_seconds, 2),
                **results,
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
