"""Bytes the server sends for heatmaps: each figure alone, and each page as the browser gets it.

1. Figures: `ui.charts.heatmap` of an n×n attention pattern for growing n, serialised exactly
   as `st.plotly_chart` does (`plotly.io.to_json(fig, validate=False)`): its size in bytes,
   the side actually drawn (large matrices are block-averaged down to ui.charts.MAX_SIDE) and
   the time to build and serialise it.
2. Pages: a real server and Chromium; the websocket bytes the browser receives while it opens
   each page at its defaults, and the pages with the largest heatmaps their links allow (the
   biggest positional-encoding table, the largest hand-editable example). Static files (the
   JavaScript bundle, fonts) are cached by the browser and are not counted.

Prints JSON. `--no-browser` measures only the figures.

    .venv/bin/python bench/bench_payload.py [--no-browser]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import plotly.io  # noqa: E402

from harness.app_pages import registered_pages  # noqa: E402
from ui.widgets import heatmaps  # noqa: E402

SIDES = (8, 12, 32, 64, 128, 256, 512, 1024, 2048)
# The largest heatmaps each page's link can ask for (validated and capped by ui.state).
# 999 one-token words fill the real model's 512 positions (the rest is cut off).
LONG_TEXT = "+".join(["a"] * 999)
LARGEST = [
    ("positional", "positions=2048&d_model=1024"),
    ("scaled-dot-product", "preset=random&n_q=8&n_k=8&d_k=8&d_v=8"),
    ("multi-head", "source=count&n=12&d_model=64&heads=8"),
    ("pretrained", f"text={LONG_TEXT}"),
    ("pretrained", f"view=model&text={LONG_TEXT}"),
]


def figure_payload(side: int, rng: np.random.Generator) -> dict:
    scores = rng.normal(size=(side, side))
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    labels = [f"tok{i}" for i in range(side)]
    started = time.perf_counter()
    fig = heatmaps.heatmap(weights, row_labels=labels, col_labels=labels, kind="weights")
    spec = plotly.io.to_json(fig, validate=False)
    elapsed_ms = (time.perf_counter() - started) * 1e3
    drawn = np.asarray(fig.data[0].z)
    return {
        "n": side,
        "cells": side * side,
        "drawn_side": int(drawn.shape[0]),
        "bytes": len(spec.encode()),
        "bytes_per_drawn_cell": round(len(spec.encode()) / drawn.size, 1),
        "annotated": fig.data[0].texttemplate is not None,
        "hover_text": fig.data[0].hovertext is not None,
        "build_and_serialise_ms": round(elapsed_ms, 1),
    }


def page_payloads() -> dict:
    from playwright.sync_api import sync_playwright

    from harness.browser import (
        StreamlitServer,
        exceptions,
        launch_chromium,
        new_tab,
        open_app,
        wait_for_visible_charts,
    )

    visits = [(p.url_path, "") for p in registered_pages()]
    visits += LARGEST
    server = StreamlitServer()
    results = {}
    try:
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            warm = new_tab(browser)
            open_app(warm, server.url)  # the server's first request is special; not measured
            warm.context.close()
            for path, query in visits:
                tab = new_tab(browser)
                received = {"bytes": 0, "frames": 0}

                def count(payload, received=received):
                    received["bytes"] += len(payload)
                    received["frames"] += 1

                tab.on("websocket", lambda ws, count=count: ws.on("framereceived", count))
                started = time.monotonic()
                open_app(tab, server.url, path, query)
                charts_drawn = wait_for_visible_charts(tab)
                shown_query = query.replace(LONG_TEXT, "a+a+…(999 words)")
                results[f"{path}?{shown_query}" if query else path] = {
                    "websocket_bytes": received["bytes"],
                    "websocket_frames": received["frames"],
                    "visible_charts": charts_drawn,
                    "seconds_to_drawn": round(time.monotonic() - started, 2),
                    "exceptions": exceptions(tab),
                }
                tab.context.close()
            browser.close()
    finally:
        server.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    report = {
        "benchmark": "bytes sent for heatmaps (figure JSON; websocket bytes per page visit)",
        "max_side_drawn": heatmaps.MAX_SIDE,
        "figures": [figure_payload(side, rng) for side in SIDES],
    }
    if not args.no_browser:
        report["pages"] = page_payloads()
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    report["python"] = platform.python_version()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
