"""The "What heads do" page: first visit, and the rerun after a layer, head or token change.

Drives the page with Streamlit's AppTest in a fresh process. SmolLM2 is loaded first and timed
apart (a server that already serves the decoder page has it), then the page is opened with a
32-token prompt: its first visit pays for the prompt's pass, the lens, the attribution, the probe
and the figures. Then the layer slider, the head slider and the token box are moved, in turn,
through `--changes` values each, twice: the first round builds each view (`cold`), the second
finds it cached (`warm`, what every later viewer of a link gets). Prints JSON, milliseconds.

    .venv/bin/python bench/bench_page_heads.py [--changes 10]
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

# 32 tokens of SmolLM2's tokenizer.
PROMPT = (
    "In 1889 the Eiffel Tower opened for the World's Fair in Paris, and for forty years it was "
    "the tallest building made by people anywhere in the"
)
TOKENS = (" world", " Paris", " city", " country", " Europe", " France", " history", " time")


def main() -> None:
    only_what_viewers_ask_for()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=10)
    args = parser.parse_args()

    from ui.models import smollm
    from ui.widgets.byte_cache import every_cache

    started = time.perf_counter()
    model = smollm.load_decoder().model
    load_ms = (time.perf_counter() - started) * 1000
    prompt_tokens = len(model.encode(PROMPT))

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    at.query_params["prompt"] = PROMPT
    started = time.perf_counter()
    at.switch_page("pages/what_heads_do.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")

    changes = {
        "layer": lambda i: at.slider(key="heads.layer").set_value(1 + (i * 7) % 30),
        "head": lambda i: at.slider(key="heads.head").set_value(1 + i % 9),
        "token": lambda i: at.text_input(key="heads.token").set_value(TOKENS[i % len(TOKENS)]),
    }
    results = {}
    for what, change in changes.items():
        cold, warm = [], []
        for round_ in range(2):
            for i in range(args.changes):
                widget = change(i)
                wall_start = time.perf_counter()
                widget.run()
                (cold if round_ == 0 else warm).append((time.perf_counter() - wall_start) * 1000)
                if at.exception:
                    sys.exit(f"the page raised: {[e.value for e in at.exception]}")
        results[f"{what}_change"] = {"cold": summary(cold), "warm": summary(warm)}

    print(
        json.dumps(
            {
                "benchmark": "heads page: first visit, then reruns after a layer/head/token change",
                "prompt_tokens": prompt_tokens,
                "model_load_ms": round(load_ms, 1),
                "first_visit_ms": round(first_ms, 1),
                **results,
                "caches_bytes": {name: held[1] for name, held in every_cache().items()},
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
