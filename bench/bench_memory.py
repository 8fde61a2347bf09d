"""Server memory as a room uses it, without torch (the Community Cloud set-up).

Community Cloud gives one process on a small box and installs requirements.txt only, so torch
is absent there. This serves the app with torch hidden (`bench/without_torch` first on
PYTHONPATH makes `import torch` fail as if it were not installed) and reads the server's
resident memory (VmRSS) at seven moments:

1. fresh, before any session;
2. after one viewer has opened every page once, in one session, as a sidebar tour would;
3. once the decoder's model has been let go for want of viewers (`--idle-minutes`, 0.5 here,
   10 in the app: ui/models/smollm.IDLE_ENV_VAR): what every other page holds;
4. after `--viewers` (20) more viewers have each opened a page: the cost of one more viewer;
5. every 30 s while those viewers act every `--think` s (2) for `--minutes` (10): flat or not;
6. after every cache is cleared (the BackMsg the menu's "Clear caches" sends), the viewers'
   sessions have expired (`server.disconnectedSessionTTL`, 120 s: a tab that reconnects within
   it finds its session) and the app's periodic trim has run: what no cache or session holds;
7. after one viewer has opened every page again: beside 2., what the load leaked, if anything
   (growth under load that this gives back was bounded caches filling).

What the byte caches hold comes from the server's own report (server.memory.REPORT_ENV_VAR),
a line every trim: the most each cache held, and at the report with the most RSS what they held,
what kind of pages the RSS was (anonymous, file, shared), what glibc's heaps held live and freed,
and what the model's kept process held on its own. The whole report goes to `--report` if given.

    .venv/bin/python bench/bench_memory.py [--minutes 10] [--viewers 20] [--idle-minutes 0.5]
                                           [--report FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit import config  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402

from bench.bench_live_audience import APP_LINKS  # noqa: E402
from harness.stream import RUN_TIMEOUT, Viewer  # noqa: E402
from server.memory import REPORT_ENV_VAR, TRIM_EVERY_SECONDS  # noqa: E402
from server.serve import Deployment  # noqa: E402
from ui.models.smollm import IDLE_ENV_VAR  # noqa: E402


async def tour_every_page(url: str) -> list[str]:
    viewer = Viewer(url, *APP_LINKS[0], None, random.Random(0))
    async with viewer.connected():
        for page, query in APP_LINKS:
            await viewer.visit(page, query)
    return viewer.log.exceptions


async def clear_caches(url: str) -> None:
    viewer = Viewer(url, *APP_LINKS[0], None, random.Random(0))
    async with viewer.connected():
        message = BackMsg()
        message.clear_cache = True
        await viewer.socket.send(message.SerializeToString())
        await asyncio.sleep(1)


async def room(url: str, viewers: int, minutes: float, think: float, deployment) -> dict:
    """Viewers open their pages; then act until the time is up, while memory is sampled."""
    opened = asyncio.Event()
    ready = [0]
    samples: list[tuple[float, float]] = []
    until = time.monotonic() + 10**6  # set once everyone is in

    async def one(index: int):
        page, query = APP_LINKS[index % len(APP_LINKS)]
        viewer = Viewer(url, page, query, None, random.Random(index))
        async with viewer.connected():
            await viewer.rerun()
            ready[0] += 1
            if ready[0] == viewers:
                opened.set()
            await opened.wait()
            while time.monotonic() < until:
                await asyncio.sleep(think * viewer.rng.uniform(0.6, 1.4))
                widget_id = viewer.pick_widget()
                if widget_id is not None:
                    label = viewer.widgets[widget_id].proto.label
                    try:
                        await viewer.rerun(widget_id)
                    except TimeoutError:
                        # One slow run is a figure of the room too: the others go on.
                        viewer.log.dropped = (
                            f"{viewer.page}: {label} (no answer in {RUN_TIMEOUT:g} s)"
                        )
                        break
        return viewer.log

    tasks = [asyncio.create_task(one(i)) for i in range(viewers)]
    await opened.wait()
    with_viewers = deployment.rss_mb()
    started = time.monotonic()
    until = started + 60 * minutes
    while time.monotonic() < until:
        samples.append((round(time.monotonic() - started), deployment.rss_mb()))
        await asyncio.sleep(min(30, max(0.0, until - time.monotonic())))
    logs = await asyncio.gather(*tasks)
    samples.append((round(time.monotonic() - started), deployment.rss_mb()))
    return {
        "rss_with_viewers_mb": with_viewers,
        "samples_s_mb": samples,
        "actions": sum(log.runs for log in logs),
        "exceptions": sorted({e for log in logs for e in log.exceptions})[:5],
        "timed_out": [log.dropped for log in logs if log.dropped],
    }


def what_the_caches_held(memory_report: Path) -> dict:
    lines = [json.loads(line) for line in memory_report.read_text().splitlines()]
    if not lines:
        return {"caches": "no report from the server"}
    peak = max(lines, key=lambda line: line["rss_mb"])
    most: dict[str, float] = {}
    for line in lines:
        for name, held in line["holding"].items():
            most[name] = max(most.get(name, 0.0), held["mb"])
    return {
        "caches_most_mb": dict(sorted(most.items(), key=lambda item: -item[1])),
        "caches_at_the_peak_report": {
            "rss_mb": peak["rss_mb"],
            "caches_mb": round(sum(held["mb"] for held in peak["holding"].values()), 1),
            "resident_parts_mb": peak["resident_parts_mb"],
            "heap_mb": peak["heap_mb"],
            "children_mb": peak["children_mb"],
            "holding": peak["holding"],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--think", type=float, default=2.0)
    parser.add_argument("--idle-minutes", type=float, default=0.5)
    parser.add_argument("--report", type=Path, help="keep the server's memory report here")
    args = parser.parse_args()
    memory_report = args.report or (
        Path(tempfile.mkdtemp(prefix="attention-explorer-")) / "memory.jsonl"
    )
    env = {
        "PYTHONPATH": str(ROOT / "bench" / "without_torch"),
        IDLE_ENV_VAR: str(args.idle_minutes),
        REPORT_ENV_VAR: str(memory_report),
    }
    with Deployment(ROOT / "app.py", env=env) as deployment:
        url = f"ws://127.0.0.1:{deployment.port}/_stcore/stream"
        fresh = deployment.rss_mb()
        tour_errors = asyncio.run(tour_every_page(url))
        after_tour = deployment.rss_mb()
        time.sleep(60 * args.idle_minutes + 5)
        decoder_let_go = deployment.rss_mb()
        load = asyncio.run(room(url, args.viewers, args.minutes, args.think, deployment))
        asyncio.run(clear_caches(url))
        time.sleep(config.get_option("server.disconnectedSessionTTL") + TRIM_EVERY_SECONDS + 5)
        caches_cleared = deployment.rss_mb()
        second_tour_errors = asyncio.run(tour_every_page(url))
        after_second_tour = deployment.rss_mb()
    rss = [mb for _, mb in load["samples_s_mb"]]
    report = {
        "torch": "hidden",
        "rss_fresh_mb": fresh,
        "rss_after_every_page_once_mb": after_tour,
        "rss_once_the_decoder_model_is_let_go_mb": decoder_let_go,
        "tour_exceptions": tour_errors,
        "viewers": args.viewers,
        # The viewers' pages include the decoder's, so its model is loaded again by then.
        "per_extra_viewer_mb": round((load["rss_with_viewers_mb"] - after_tour) / args.viewers, 2),
        "under_load": load,
        "rss_first_last_max_mb": [rss[0], rss[-1], max(rss)],
        "rss_caches_cleared_mb": caches_cleared,
        "rss_after_every_page_again_mb": after_second_tour,
        "left_by_the_load_mb": round(after_second_tour - after_tour, 1),
        "second_tour_exceptions": second_tour_errors,
        **what_the_caches_held(memory_report),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
