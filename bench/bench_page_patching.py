"""The "What carries the answer" page: the default link's first visit, then the rerun after a
head change and after a new pair.

Drives the page with Streamlit's AppTest in a fresh process. SmolLM2 is loaded first and timed
apart (a server that already serves another model page has it), then the default link is
opened: its first visit pays for the two passes, the residual map and both head maps (without
the preparation a server runs after a load: this is what a viewer waits for when nothing was
prepared). Then the head slider moves through `--changes` values twice (`cold`: each view built;
`warm`: found cached), and the answer pair changes to `--pairs` other names (each a new set of
maps). Prints JSON, milliseconds. Run it alone: `flock /work/bench.lock`.

    .venv/bin/python bench/bench_page_patching.py [--changes 9] [--pairs 2]
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

# Other names for the default sentence, each one token for SmolLM2.
PAIRS = (("Tom", "Anna"), ("David", "Sarah"), ("Paul", "Emma"))


def main() -> None:
    only_what_viewers_ask_for()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=9)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()

    from ui.models import smollm
    from ui.patching import inputs
    from ui.widgets.byte_cache import every_cache

    started = time.perf_counter()
    model = smollm.load_decoder().model
    load_ms = (time.perf_counter() - started) * 1000
    tokens = len(model.encode(inputs.DEFAULT_CLEAN))

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    started = time.perf_counter()
    at.switch_page("pages/carries_the_answer.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")

    cold, warm = [], []
    for round_ in range(2):
        for i in range(args.changes):
            widget = at.slider(key="patching.head").set_value(1 + i % 9)
            start = time.perf_counter()
            widget.run()
            (cold if round_ == 0 else warm).append((time.perf_counter() - start) * 1000)
    pairs = []
    for a, b in PAIRS[: args.pairs]:
        at.text_area(key="patching.clean").set_value(f"When {a} and {b} went to the store, {b} "
                                                     "gave a drink to")  # fmt: skip
        at.text_area(key="patching.corrupt").set_value(f"When {a} and {b} went to the store, {a} "
                                                       "gave a drink to")  # fmt: skip
        at.text_input(key="patching.answer").set_value(f" {a}")
        widget = at.text_input(key="patching.wrong").set_value(f" {b}")
        start = time.perf_counter()
        widget.run()
        pairs.append((time.perf_counter() - start) * 1000)
        if at.exception or at.error:
            sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")

    print(
        json.dumps(
            {
                "benchmark": "patching page: default first visit, head change, new pair",
                "prompt_tokens": tokens,
                "model_load_ms": round(load_ms, 1),
                "first_visit_ms": round(first_ms, 1),
                "head_change": {"cold": summary(cold), "warm": summary(warm)},
                "new_pair_ms": [round(ms, 1) for ms in pairs],
                "caches_bytes": {
                    name: held[1]
                    for name, held in every_cache().items()
                    if name.startswith("patching.")
                },
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
