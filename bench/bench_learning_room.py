"""A room opens the learning page's link together and watches one training grow.

On a fresh server (torch hidden, as on Community Cloud) `--viewers` (50) open `/learning`'s
default link at once, spread over `--spread` seconds (1), over Streamlit's websocket protocol
(harness/stream.py). Each then does what its browser does while the run grows: runs the page's
growing fragment again when the server's auto-rerun interval says (every second), until its
progress bar says the run has ended. Reported: the first page p50 / p95 / slowest, each
fragment rerun's p50 / p95, the seconds until each viewer saw "Trained", how many runs the
server trained (its memory report names the board's jobs), the server's RSS at its peak and at
the end, exceptions, dropped connections. Then the same link for one viewer alone on another
fresh server: the run's own time, for the ratio.

    .venv/bin/python bench/bench_learning_room.py [--viewers 50] [--spread 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_live_audience import percentile  # noqa: E402
from harness.stream import Viewer  # noqa: E402
from server.memory import REPORT_ENV_VAR  # noqa: E402
from server.serve import Deployment  # noqa: E402

PAGE = "learning"
DONE = "Trained"
WATCH_LIMIT_S = 300


async def watch(url: str, seed: int, delay: float) -> dict:
    await asyncio.sleep(delay)
    viewer = Viewer(url, PAGE, "", None, random.Random(seed))
    started = time.monotonic()
    reruns, first, trained = [], None, None
    try:
        async with viewer.connected():
            await viewer.rerun()
            first = time.monotonic() - started
            while not viewer.progress.startswith(DONE):
                if time.monotonic() - started > WATCH_LIMIT_S or viewer.auto_rerun is None:
                    break
                fragment, interval = viewer.auto_rerun
                await asyncio.sleep(interval)
                began = time.monotonic()
                await viewer.rerun(fragment_id=fragment)
                reruns.append(time.monotonic() - began)
            if viewer.progress.startswith(DONE):
                trained = time.monotonic() - started
    except Exception as error:  # a dropped socket is a finding, not a crash of the benchmark
        viewer.log.dropped = f"{type(error).__name__}: {error}"[:200]
    return {"first": first, "reruns": reruns, "trained": trained, "log": viewer.log}


def peak_rss(deployment: Deployment, stop: threading.Event, found: list[float]) -> None:
    while not stop.is_set():
        found.append(deployment.rss_mb())
        stop.wait(0.5)


def room(viewers: int, spread: float) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        report_file = Path(folder) / "memory.jsonl"
        env = {
            "PYTHONPATH": str(ROOT / "bench" / "without_torch"),
            REPORT_ENV_VAR: str(report_file),
        }
        with Deployment(ROOT / "app.py", env=env) as deployment:
            url = f"ws://127.0.0.1:{deployment.port}/_stcore/stream"
            rss: list[float] = [deployment.rss_mb()]
            stop = threading.Event()
            sampler = threading.Thread(target=peak_rss, args=(deployment, stop, rss), daemon=True)
            sampler.start()
            rng = random.Random(1)
            started = time.monotonic()

            async def everyone():
                return await asyncio.gather(
                    *(watch(url, i, rng.uniform(0, spread)) for i in range(viewers))
                )

            seen = asyncio.run(everyone())
            elapsed = time.monotonic() - started
            stop.set()
            sampler.join()
            end_rss = deployment.rss_mb()
            time.sleep(31)  # the server's memory report comes every 30 s
            lines = report_file.read_text().splitlines() if report_file.exists() else []
        holding = [json.loads(line).get("holding", {}) for line in lines]
        runs = [held.get("learning.runs", {}).get("entries") for held in holding]
    firsts = [s["first"] for s in seen if s["first"] is not None]
    reruns = [t for s in seen for t in s["reruns"]]
    trained = [s["trained"] for s in seen if s["trained"] is not None]
    return {
        "viewers": viewers,
        "seconds": round(elapsed, 1),
        "first_page_p50_s": percentile(firsts, 0.5),
        "first_page_p95_s": percentile(firsts, 0.95),
        "first_page_max_s": round(max(firsts), 3) if firsts else None,
        "fragment_reruns": len(reruns),
        "fragment_rerun_p50_s": percentile(reruns, 0.5),
        "fragment_rerun_p95_s": percentile(reruns, 0.95),
        "saw_trained": len(trained),
        "trained_p50_s": percentile(trained, 0.5),
        "trained_max_s": round(max(trained), 2) if trained else None,
        "runs_on_the_board": max((r for r in runs if r is not None), default=None),
        "server_rss_mb": {"start": rss[0], "peak": max(rss), "end": end_rss},
        "exceptions": sorted({e for s in seen for e in s["log"].exceptions}),
        "dropped": sum(s["log"].dropped is not None for s in seen),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--spread", type=float, default=1.0)
    args = parser.parse_args()
    if not 1 <= args.viewers <= 200:
        parser.error("viewers must be between 1 and 200")
    together = room(args.viewers, args.spread)
    print("room", json.dumps(together), file=sys.stderr)
    alone = room(1, 0.0)
    print("alone", json.dumps(alone), file=sys.stderr)
    ratio = None
    if together["trained_p50_s"] and alone["trained_p50_s"]:
        ratio = round(together["trained_p50_s"] / alone["trained_p50_s"], 2)
    print(json.dumps({"torch": "hidden", "room": together, "alone": alone,
                      "trained_room_over_alone": ratio}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
