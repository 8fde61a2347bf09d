"""A live audience, simulated: N viewers speaking Streamlit's websocket protocol to a fresh server.

Each viewer does what a browser tab does, minus the drawing: it opens `/_stcore/stream`, asks
for its page (a deep link) with a `BackMsg` `rerun_script`, reads `ForwardMsg`s until the run
finishes, and then, after a think time, changes one of the page's real widgets (a slider a step
or two, another option of a select, a toggle) and sends the new widget states, the way the
frontend does: inside an `st.fragment` only that fragment reruns. It keeps the frontend's
message cache (`cached_message_hashes`), so unchanged figures come back as references.

Two scenarios, each run against the app and against a bare Streamlit page (`bare_page.py`:
slider, formula, dataframe, three Plotly heatmaps) in the same run, each on its own fresh
server, one after the other; the bare page both with this project's configuration (`bare`) and
with Streamlit's defaults (`bare_stock`, `--targets app bare bare_stock workers`):

- `arrival`: `--viewers` (50) arrive together (within `--spread` s) on a fresh server, each
  acting every `--think` s (about 5, jittered) for `--seconds`; the app's viewers are spread
  over its pages.
- `tour`: `--tour-viewers` (10) act back to back (no think time) for `--tour-seconds`, the
  app's viewers on a mixed tour of its pages; the figure is page runs per second.

Past one process, the app is also served as `--workers` (2) processes behind HAProxy
(`server/serve.py`, as `make serve` does) under the same two scenarios.

Reported as JSON: page runs per second, time to the first page (p50/p95), action to finished
run (p50/p95, and per page), the slowest actions with the widget each moved, exceptions shown,
dropped connections, server resident memory (all worker processes), the app / bare ratios and
the N workers / one process ratios.

Bounded: loopback only, a fixed duration, a timeout on every wait, at most 200 viewers; every
server it starts is stopped at the end. Not a test: run by `make bench` and by hand.

    .venv/bin/python bench/bench_live_audience.py [--viewers 50] [--seconds 300] [--workers 2]
    make bench    # with every other benchmark
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.stream import MAX_VIEWERS, ViewerLog, audience  # noqa: E402
from server.serve import Deployment  # noqa: E402
from ui.pages import PAGES  # noqa: E402

# Deep links a speaker would put on a slide, one per registered page, dealt round-robin.
LINK_QUERIES = {"why": "n=6", "masking": "kind=causal"}
APP_LINKS = tuple((page.url_path, LINK_QUERIES.get(page.url_path, "")) for page in PAGES)
BARE_LINKS = (("", ""),)
# `bare` runs with this project's .streamlit/config.toml, like the app; `bare_stock` with
# Streamlit's defaults for the options that file changes: a typical author's page.
STOCK_STREAMLIT = {
    "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "auto",
    "STREAMLIT_RUNNER_POST_SCRIPT_GC": "true",
    "STREAMLIT_RUNNER_MAGIC_ENABLED": "true",
}


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 3)


def summary(logs: list[ViewerLog], elapsed: float, rss: dict) -> dict:
    actions = [t for log in logs for t in log.actions]
    firsts = [log.first_page for log in logs if log.first_page is not None]
    runs = sum(log.runs for log in logs)
    return {
        "viewers": len(logs),
        "page_runs": runs,
        "page_runs_per_s": round(runs / elapsed, 2),
        "first_page_s": {"p50": percentile(firsts, 0.5), "p95": percentile(firsts, 0.95)},
        "action_to_result_s": {
            "p50": percentile(actions, 0.5),
            "p95": percentile(actions, 0.95),
            "count": len(actions),
        },
        "exceptions": sum(len(log.exceptions) for log in logs),
        "exception_samples": sorted({e for log in logs for e in log.exceptions})[:5],
        "dropped_connections": sum(log.dropped is not None for log in logs),
        "dropped_samples": sorted({log.dropped for log in logs if log.dropped})[:3],
        "server_rss_mb": rss,
        # Which pages make the tail: the overall p95 above does not say.
        **{
            f"per_page_action_{name}_s": {
                page: percentile(
                    [t for log in logs if log.page == page for t in log.actions], share
                )
                for page in sorted({log.page for log in logs})
            }
            for name, share in (("p50", 0.5), ("p95", 0.95))
        },
        "slowest_actions": [
            f"{seconds:.3f} s {page}: {label}"
            for seconds, page, label in sorted(
                (
                    (t, log.page, label)
                    for log in logs
                    for t, label in zip(log.actions, log.acted_on, strict=False)
                ),
                reverse=True,
            )[:12]
        ],
        # Which page a slow first page was: the p95 above does not say.
        "per_page_first_page_max_s": {
            page: max(
                (log.first_page for log in logs if log.page == page and log.first_page),
                default=None,
            )
            for page in sorted({log.page for log in logs})
        },
    }


def scenario(script: str, links, workers: int, env: dict, viewers: int, seconds: float,
             think: float, spread: float, seed: int) -> dict:  # fmt: skip
    with Deployment(ROOT / script, workers=workers, env=env) as deployment:
        rss_start = deployment.rss_mb()
        started = time.monotonic()
        logs = asyncio.run(audience(deployment.port, links, viewers, seconds, think, spread, seed))
        elapsed = time.monotonic() - started
        result = summary(logs, elapsed, {"start": rss_start, "end": deployment.rss_mb()})
    result["workers"] = workers
    return result


def ratios(numerator: dict, denominator: dict) -> dict:
    def ratio(a, b):
        return round(a / b, 2) if a is not None and b else None

    return {
        "first_page_p50": ratio(
            numerator["first_page_s"]["p50"], denominator["first_page_s"]["p50"]
        ),
        "action_p50": ratio(
            numerator["action_to_result_s"]["p50"], denominator["action_to_result_s"]["p50"]
        ),
        "action_p95": ratio(
            numerator["action_to_result_s"]["p95"], denominator["action_to_result_s"]["p95"]
        ),
        "runs_per_s": ratio(numerator["page_runs_per_s"], denominator["page_runs_per_s"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=["arrival", "tour"])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--think", type=float, default=5.0)
    parser.add_argument("--spread", type=float, default=1.0)
    parser.add_argument("--tour-viewers", type=int, default=10)
    parser.add_argument("--tour-seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=2, help="the scaled-out app's processes")
    parser.add_argument("--targets", nargs="+", default=["app", "bare", "workers"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pages",
        nargs="+",
        default=[path for path, _ in APP_LINKS],
        help="the app's pages the links open (url paths; default: every page): an earlier "
        "tree's set, to compare a change with the same room",
    )
    args = parser.parse_args()
    if not 1 <= args.viewers <= MAX_VIEWERS or not 1 <= args.tour_viewers <= MAX_VIEWERS:
        parser.error(f"viewers must be between 1 and {MAX_VIEWERS}")
    app_links = tuple(link for link in APP_LINKS if link[0] in args.pages)
    if len(app_links) != len(set(args.pages)):
        parser.error(f"--pages takes url paths of {', '.join(path for path, _ in APP_LINKS)}")

    targets = {
        "app": ("app.py", app_links, 1, {}),
        "bare": ("bench/bare_page.py", BARE_LINKS, 1, {}),
        "bare_stock": ("bench/bare_page.py", BARE_LINKS, 1, STOCK_STREAMLIT),
        "workers": ("app.py", app_links, args.workers, {}),
    }
    report: dict = {"cpus": os.cpu_count(), "workers": args.workers}
    for name in args.scenarios:
        viewers, seconds, think, spread = (
            (args.viewers, args.seconds, args.think, args.spread)
            if name == "arrival"
            else (args.tour_viewers, args.tour_seconds, 0.0, 0.0)
        )
        results = {}
        for target in args.targets:
            script, links, workers, env = targets[target]
            results[target] = scenario(
                script, links, workers, env, viewers, seconds, think, spread, args.seed
            )
            print(f"{name} {target}: {json.dumps(results[target])}", file=sys.stderr)
        for bare in ("bare", "bare_stock"):
            if "app" in results and bare in results:
                results[f"app_vs_{bare}"] = ratios(results["app"], results[bare])
        if "app" in results and "workers" in results:
            results["workers_vs_one_process"] = ratios(results["workers"], results["app"])
        report[name] = results
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
