"""The long-context page: its three passes over the default passage the first time, and the
rerun after a window or sinks change once they are cached.

Drives the page with Streamlit's AppTest in a fresh process. SmolLM2 is loaded first and timed
apart; then the page opens on its default passage (547 tokens: full attention, the window and
the window with sinks, each a pass over the whole text), then the sinks and window sliders move
through a few values twice: the first round computes the new passes (`cold`), the second finds
them cached (`warm`, what every later viewer gets). Last, with every cache emptied, the page's
two heavy steps are timed apart, outside Streamlit: the three passes, and the KV-cache
experiments drawn at the bottom of the page, after everything above them has reached the
browser (three reads of the text's first 256 tokens: the full cache's is the full pass's).
Prints JSON, milliseconds.

    .venv/bin/python bench/bench_page_long_context.py
"""

from __future__ import annotations

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

SINKS = (0, 1, 2, 4)
WINDOWS = (32, 64)


def main() -> None:
    only_what_viewers_ask_for()
    from attention_core.lessons.passages import ALICE
    from ui.long_context import data, kv_cache
    from ui.long_context.inputs import DEFAULT_SINKS, DEFAULT_WINDOW
    from ui.models import smollm
    from ui.widgets.byte_cache import clear_every_cache, every_cache

    started = time.perf_counter()
    model = smollm.load_decoder().model
    load_ms = (time.perf_counter() - started) * 1000

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600).run()
    started = time.perf_counter()
    at.switch_page("pages/long_context.py").run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")

    cold, warm = [], []
    for round_ in range(2):
        for window in WINDOWS:
            for sinks in SINKS:
                at.slider(key="long_context.window").set_value(window)
                widget = at.slider(key="long_context.sinks").set_value(sinks)
                wall_start = time.perf_counter()
                widget.run()
                (cold if round_ == 0 else warm).append((time.perf_counter() - wall_start) * 1000)
                if at.exception:
                    sys.exit(f"the page raised: {[e.value for e in at.exception]}")
    caches_bytes = {name: held[1] for name, held in every_cache().items()}

    ids = tuple(model.encode(ALICE))
    clear_every_cache()
    started = time.perf_counter()
    data.three_passes(model, ids, DEFAULT_WINDOW, DEFAULT_SINKS)
    passes_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    kv_cache.experiment(model, ids)  # its full cache's read is the full pass just made
    experiments_ms = (time.perf_counter() - started) * 1000
    print(
        json.dumps(
            {
                "benchmark": "long-context page: three passes first, then window/sinks changes",
                "text_tokens": len(ids),
                "model_load_ms": round(load_ms, 1),
                "first_visit_ms": round(first_ms, 1),
                "of_which_three_passes_ms": round(passes_ms, 1),
                "of_which_kv_experiments_ms": round(experiments_ms, 1),
                "change_cold": summary(cold),
                "change_warm": summary(warm),
                "caches_bytes": caches_bytes,
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
