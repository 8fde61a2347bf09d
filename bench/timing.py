"""The summary every page-rerun benchmark prints: p50, p95 and max of its timings in ms (each
taken by `timed`); and
`only_what_viewers_ask_for()` for the ones that run pages in their own process."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object]) -> float:
    """How long `fn()` takes, in ms."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "max_ms": round(ordered[-1], 1),
    }


def only_what_viewers_ask_for() -> None:
    """Time what a viewer's run computes, not the default views the server prepares behind it
    once SmolLM2 is loaded (ui.models.smollm.default_view), which would share the cores."""
    from server.model_host import PREPARE_ENV_VAR

    os.environ[PREPARE_ENV_VAR] = "0"
