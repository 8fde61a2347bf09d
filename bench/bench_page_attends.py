"""The "Why a head attends there" page: first visit, and the rerun after a head, query or key
change.

Drives the page with Streamlit's AppTest in a fresh process. SmolLM2 is loaded first and timed
apart (a server that already serves the decoder page has it), then the page is opened with a
64-token prompt (the page's cap, the issue's cost line): its first visit pays for the pass, the
split of the default head, the probe that names the previous-token heads and the figures. Then
the head slider, the query box and the key box are moved, in turn, through `--changes` values
each, twice: the first round computes each view (`cold`: a pass and a split per change of head
or query), the second finds it cached (`warm`, what every later viewer of a link gets). Prints
JSON, milliseconds.

    .venv/bin/python bench/bench_page_attends.py [--changes 6]
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

# A story told twice, so that the second telling has an induction head's keys to find.
PROMPT = (
    "In 1889 the Eiffel Tower opened for the World's Fair in Paris, and for forty years it "
    "was the tallest building. In 1889 the Eiffel Tower opened for the World's Fair in Paris, "
    "and for forty years it was the tallest"
)


def main() -> None:
    only_what_viewers_ask_for()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=6)
    args = parser.parse_args()

    from ui.attends.data import MAX_PROMPT_TOKENS
    from ui.models import smollm
    from ui.widgets.byte_cache import every_cache

    started = time.perf_counter()
    model = smollm.load_decoder().model
    load_ms = (time.perf_counter() - started) * 1000
    prompt_tokens = min(len(model.encode(PROMPT)), MAX_PROMPT_TOKENS)

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    at.query_params["prompt"] = PROMPT
    started = time.perf_counter()
    at.switch_page("pages/why_a_head_attends.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")

    changes = {
        "head": lambda i: at.slider(key="attends.head").set_value(1 + i % 9),
        "query": lambda i: at.selectbox(key="attends.query").set_value(prompt_tokens - 2 * i),
        "key": lambda i: at.selectbox(key="attends.key").set_value(1 + 3 * i),
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
                "benchmark": "attends page: first visit, then reruns after a head/query/key change",
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
