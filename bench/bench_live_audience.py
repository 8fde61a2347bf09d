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
- `tour`: `--tour-viewers` (10) tour every page back to back (no think time) for
  `--tour-seconds`: each starts on its own page (dealt as above), moves `--tour-actions` (3)
  widgets, goes to the next page in the sidebar's order (after the last, the first), and so on.
  The bare page's tour visits its one page again, so both do the same kind of work. The tour
  runs `--tour-rounds` (2) times on the same server, the rounds after the first on a warm one,
  each reported on its own (`round_1`, `round_2` ...). The figure is page runs per second.

Past one process, the app is also served as `--workers` (2) processes behind HAProxy
(`server/serve.py`, as `make serve` does) under the same two scenarios.

Reported as JSON: page runs per second, time to the first page (p50/p95), action to finished
run (p50/p95, and per page), a visit to another page (p50/p95, and the median per page), the
slowest actions with the widget each moved, exceptions shown, dropped connections, server
resident memory (all worker processes), the app / bare ratios and the N workers / one process
ratios (for the tour, each round's).

Bounded: loopback only, a fixed duration, a timeout on every wait, at most 200 viewers; every
server it starts is stopped at the end. Not a test: run by `make bench` and by hand.

    .venv/bin/python bench/bench_live_audience.py [--viewers 50] [--seconds 300] [--workers 2]
    .venv/bin/python bench/bench_live_audience.py --scenarios tour --tour-seconds 30
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

from harness.stream import MAX_VIEWERS, VISIT, ViewerLog, audience  # noqa: E402
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
    # (seconds, page, widget label or VISIT) per step; a step cut short by a dropped connection
    # has a label but no time, and zip leaves it out.
    steps = [
        step for log in logs for step in zip(log.actions, log.on_page, log.acted_on, strict=False)
    ]
    actions = [(t, page, label) for t, page, label in steps if label != VISIT]
    visits = [(t, page) for t, page, label in steps if label == VISIT]
    firsts = [log.first_page for log in logs if log.first_page is not None]
    runs = sum(log.runs for log in logs)
    return {
        "viewers": len(logs),
        "page_runs": runs,
        "page_runs_per_s": round(runs / elapsed, 2),
        "first_page_s": {"p50": percentile(firsts, 0.5), "p95": percentile(firsts, 0.95)},
        "action_to_result_s": {
            "p50": percentile([t for t, _, _ in actions], 0.5),
            "p95": percentile([t for t, _, _ in actions], 0.95),
            "count": len(actions),
        },
        # A touring viewer's arrival on its next page, with the page's defaults.
        "visit_to_page_s": {
            "p50": percentile([t for t, _ in visits], 0.5),
            "p95": percentile([t for t, _ in visits], 0.95),
            "count": len(visits),
        },
        "exceptions": sum(len(log.exceptions) for log in logs),
        "exception_samples": sorted({e for log in logs for e in log.exceptions})[:5],
        "dropped_connections": sum(log.dropped is not None for log in logs),
        "dropped_samples": sorted({log.dropped for log in logs if log.dropped})[:3],
        "server_rss_mb": rss,
        # Which pages make the tail: the overall p95 above does not say.
        **{
            f"per_page_action_{name}_s": {
                page: percentile([t for t, on, _ in actions if on == page], share)
                for page in sorted({page for _, page, _ in actions})
            }
            for name, share in (("p50", 0.5), ("p95", 0.95))
        },
        # Which pages hold a tour up: their first runs, not their widgets.
        "per_page_visit_p50_s": {
            page: percentile([t for t, on in visits if on == page], 0.5)
            for page in sorted({page for _, page in visits})
        },
        "slowest_actions": [
            f"{seconds:.3f} s {page}: {label}"
            for seconds, page, label in sorted(actions, reverse=True)[:12]
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


def scenario(script: str, links, workers: int, env: dict, room: dict, rounds: int) -> list[dict]:
    """Each round's summary, the rounds one after the other on the same server; `room` is
    `audience`'s arguments after the links."""
    results = []
    with Deployment(ROOT / script, workers=workers, env=env) as deployment:
        for index in range(rounds):
            rss_start = deployment.rss_mb()
            started = time.monotonic()
            # Another seed a round: a warm round's viewers move other widgets than the first's.
            seed = room["seed"] + index
            logs = asyncio.run(audience(deployment.port, links, **{**room, "seed": seed}))
            elapsed = time.monotonic() - started
            rss = {"start": rss_start, "end": deployment.rss_mb()}
            results.append({**summary(logs, elapsed, rss), "workers": workers})
    return results


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
        "visit_p50": ratio(
            numerator["visit_to_page_s"]["p50"], denominator["visit_to_page_s"]["p50"]
        ),
        "runs_per_s": ratio(numerator["page_runs_per_s"], denominator["page_runs_per_s"]),
    }


def with_ratios(results: dict) -> dict:
    """A round's results by target, and the app / bare and workers / one process ratios."""
    pairs = {f"app_vs_{bare}": ("app", bare) for bare in ("bare", "bare_stock")}
    pairs["workers_vs_one_process"] = ("workers", "app")
    return {
        **results,
        **{
            name: ratios(results[numerator], results[denominator])
            for name, (numerator, denominator) in pairs.items()
            if numerator in results and denominator in results
        },
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
    parser.add_argument(
        "--tour-actions", type=int, default=3, help="widgets moved on a page before the next"
    )
    parser.add_argument(
        "--tour-rounds", type=int, default=2, help="tours on the same server; after the first, warm"
    )
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
    if args.tour_actions < 0 or args.tour_rounds < 1:
        parser.error("--tour-actions must be 0 or more and --tour-rounds 1 or more")
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
        touring = name == "tour"
        room = {
            "viewers": args.tour_viewers if touring else args.viewers,
            "seconds": args.tour_seconds if touring else args.seconds,
            "think": 0.0 if touring else args.think,
            "spread": 0.0 if touring else args.spread,
            "seed": args.seed,
            "actions_per_page": args.tour_actions if touring else None,
        }
        rounds = args.tour_rounds if touring else 1
        by_round: list[dict] = [{} for _ in range(rounds)]
        for target in args.targets:
            script, links, workers, env = targets[target]
            for index, result in enumerate(scenario(script, links, workers, env, room, rounds)):
                by_round[index][target] = result
                where = f"{name} round {index + 1}" if touring else name
                print(f"{where} {target}: {json.dumps(result)}", file=sys.stderr)
        by_round = [with_ratios(results) for results in by_round]
        report[name] = (
            {f"round_{index + 1}": results for index, results in enumerate(by_round)}
            if touring
            else by_round[0]
        )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
