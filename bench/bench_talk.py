"""A talk: the speaker shows the decoder page, talks for a while, then the room opens a model
page's default link together.

On a fresh server (torch hidden, as on Community Cloud) the speaker opens the decoder page
(`--speaker-page`), which loads SmolLM2, and stays on it `--pause` seconds (20). With `--preload`
the server is a talk's (`ATTENTION_EXPLORER_LLM_PRELOAD=1`): the speaker's first page, whichever
it is, loads the model. Then `--viewers` (50) open `--pages`' default
links (heads, long context) at once, spread over `--spread` seconds (1), each timing its first
finished run, as `bench_live_audience.py` times a first page. Each page on a fresh server with
the default views prepared after the load (ui.models.smollm.default_view) and without
(`ATTENTION_EXPLORER_PREPARE_DEFAULT_VIEWS=0`), one after the other. Reported as JSON: the
speaker's load, the room's first page p50 / p95 / slowest, exceptions.

    .venv/bin/python bench/bench_talk.py [--pages long-context heads] [--viewers 50]
                                         [--speaker-page why --preload]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_live_audience import percentile  # noqa: E402
from harness.stream import Viewer  # noqa: E402
from server.model_host import PREPARE_ENV_VAR  # noqa: E402
from server.serve import Deployment  # noqa: E402
from ui.models.smollm import PRELOAD_ENV_VAR  # noqa: E402


async def first_page(url: str, page: str, seed: int, delay: float) -> tuple[float, list[str]]:
    await asyncio.sleep(delay)
    viewer = Viewer(url, page, "", None, random.Random(seed))
    started = time.monotonic()
    async with viewer.connected():
        await viewer.rerun()
    return time.monotonic() - started, viewer.log.exceptions


async def talk(
    url: str, page: str, viewers: int, pause: float, spread: float, speaker_page: str
) -> dict:
    speaker, speaker_saw = await first_page(url, speaker_page, 0, 0.0)
    await asyncio.sleep(pause)
    rng = random.Random(1)
    room = await asyncio.gather(
        *(first_page(url, page, 10 + i, rng.uniform(0, spread)) for i in range(viewers))
    )
    seconds = [s for s, _ in room]
    return {
        "speaker_first_page_s": round(speaker, 2),
        "first_page_p50_s": round(percentile(seconds, 0.5), 3),
        "first_page_p95_s": round(percentile(seconds, 0.95), 3),
        "first_page_max_s": round(max(seconds), 3),
        "exceptions": sorted({e for _, seen in room for e in seen} | set(speaker_saw)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="+", default=["long-context", "heads"])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--pause", type=float, default=20)
    parser.add_argument("--spread", type=float, default=1.0)
    parser.add_argument("--speaker-page", default="decoder")
    parser.add_argument("--preload", action="store_true", help="a talk's server: the LLM preloaded")
    args = parser.parse_args()
    report: dict = {
        "torch": "hidden",
        "viewers": args.viewers,
        "pause_s": args.pause,
        "speaker_page": args.speaker_page,
        "preload": args.preload,
        "pages": {},
    }
    for page in args.pages:
        for prepared in ("1", "0"):
            env = {
                "PYTHONPATH": str(ROOT / "bench" / "without_torch"),
                PREPARE_ENV_VAR: prepared,
                PRELOAD_ENV_VAR: "1" if args.preload else "0",
            }
            with Deployment(ROOT / "app.py", env=env) as deployment:
                url = f"ws://127.0.0.1:{deployment.port}/_stcore/stream"
                found = asyncio.run(
                    talk(url, page, args.viewers, args.pause, args.spread, args.speaker_page)
                )
                found["server_rss_mb"] = deployment.rss_mb()
            name = "prepared" if prepared == "1" else "not_prepared"
            report["pages"].setdefault(page, {})[name] = found
            print(page, name, json.dumps(found), file=sys.stderr)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
