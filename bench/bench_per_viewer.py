"""Server memory per extra viewer, the app beside a bare Streamlit page, torch hidden.

`bench_memory.py` reads what one room costs, the first viewers included: their pages fill the
caches and load the decoder's model again. What one more viewer costs once a room is there is
the next question, and it is asked here: viewers arrive in batches (`--batch`, 20) and stay
connected; each opens its page (the room's deep links, spread as in `bench_live_audience.py`)
and changes one widget; the server's resident memory is read after each batch, once the app's
periodic trim has run. The first batch pays for the warm-up and the caches; every later batch
gives the cost of one more viewer, (RSS after − RSS before) / batch. The bare page
(bench/bare_page.py, this project's settings) is measured the same way in the same run: what a
Streamlit session costs anyway.

    .venv/bin/python bench/bench_per_viewer.py [--batch 20] [--batches 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_live_audience import APP_LINKS, BARE_LINKS  # noqa: E402
from harness.stream import Viewer  # noqa: E402
from server.memory import TRIM_EVERY_SECONDS  # noqa: E402
from server.serve import Deployment  # noqa: E402

TARGETS = {"app": ("app.py", APP_LINKS), "bare": ("bench/bare_page.py", BARE_LINKS)}


async def batches(url: str, links, batch: int, count: int, deployment) -> list[float]:
    """RSS before any viewer, then after each batch of viewers has opened a page and acted."""
    rss = [deployment.rss_mb()]
    leave = asyncio.Event()

    async def one(index: int, arrived: asyncio.Event) -> None:
        page, query = links[index % len(links)]
        viewer = Viewer(url, page, query, None, random.Random(index))
        async with viewer.connected():
            await viewer.rerun()
            widget_id = viewer.pick_widget()
            if widget_id is not None:
                await viewer.rerun(widget_id)
            arrived.set()
            await leave.wait()

    viewers = []
    for first in range(0, batch * count, batch):
        arrivals = [asyncio.Event() for _ in range(batch)]
        viewers += [asyncio.create_task(one(first + i, a)) for i, a in enumerate(arrivals)]
        for arrived in arrivals:
            await arrived.wait()
        # The app trims freed heap pages every TRIM_EVERY_SECONDS: read after one has run.
        await asyncio.sleep(TRIM_EVERY_SECONDS + 3)
        rss.append(deployment.rss_mb())
    leave.set()
    await asyncio.gather(*viewers)
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args()
    report = {"torch": "hidden", "batch": args.batch}
    for name, (script, links) in TARGETS.items():
        env = {"PYTHONPATH": str(ROOT / "bench" / "without_torch")}
        with Deployment(ROOT / script, env=env) as deployment:
            url = f"ws://127.0.0.1:{deployment.port}/_stcore/stream"
            rss = asyncio.run(batches(url, links, args.batch, args.batches, deployment))
        later = rss[-1] - rss[1]
        report[name] = {
            "rss_after_each_batch_mb": rss,
            "first_batch_per_viewer_mb": round((rss[1] - rss[0]) / args.batch, 2),
            "per_extra_viewer_mb": round(later / (args.batch * (args.batches - 1)), 2),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
