"""A model page's first visit on a busy server: the model loads while other viewers keep acting.

On a fresh server (torch hidden, as on Community Cloud), `--busy` viewers (9) act back to back
on the pages that do not use SmolLM2, for `--seconds` (60). `--after` seconds in (8), one
viewer opens the model page (`--pages`, the decoder by default): its first visit pays for the
model's load, the prompt's pass and the figures while the others keep the interpreter busy.
Then a second viewer opens the same link (the load and the pass shared) and a third another
prompt (a new pass). Each page on a fresh server, and again with no busy viewer (`--busy 0 9`)
for the quiet figure beside it. Reported as JSON: seconds to each of the three finished runs,
the busy viewers' page runs, exceptions.

    .venv/bin/python bench/bench_busy_first_visit.py [--pages decoder heads] [--busy 0 9]
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

from harness.stream import Viewer  # noqa: E402
from server.serve import Deployment  # noqa: E402
from ui.pages import PAGES  # noqa: E402

ANOTHER_PROMPT = "prompt=The+cat+sat+on+the"


def uses_the_llm(path: str) -> bool:
    # A page that names SmolLM2, or reaches a decoder through the shared gate (any listed model).
    text = (ROOT / path).read_text()
    return "smollm" in text or "decoder_or_stop" in text


BUSY_PAGES = [page.url_path for page in PAGES if not uses_the_llm(page.path)]


async def first_visits(url: str, page: str, busy: int, seconds: float, after: float) -> dict:
    until = time.monotonic() + seconds
    others = [
        Viewer(url, BUSY_PAGES[i % len(BUSY_PAGES)], "", None, random.Random(i)).run(until, 0.0)
        for i in range(busy)
    ]

    async def visit(query: str, seed: int) -> tuple[float, list[str]]:
        viewer = Viewer(url, page, query, None, random.Random(seed))
        started = time.monotonic()
        async with viewer.connected():
            await viewer.rerun()
        return time.monotonic() - started, viewer.log.exceptions

    async def late_viewers() -> list[tuple[float, list[str]]]:
        await asyncio.sleep(after)
        return [await visit("", 100), await visit("", 101), await visit(ANOTHER_PROMPT, 102)]

    visits, *logs = await asyncio.gather(late_viewers(), *others)
    return {
        "first_visit_s": round(visits[0][0], 2),
        "same_link_again_s": round(visits[1][0], 2),
        "another_prompt_s": round(visits[2][0], 2),
        "busy_page_runs": sum(len(log.actions) + 1 for log in logs),
        "exceptions": sorted(
            {e for _, seen in visits for e in seen} | {e for log in logs for e in log.exceptions}
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="+", default=["decoder"])
    parser.add_argument("--busy", nargs="+", type=int, default=[0, 9])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--after", type=float, default=8)
    args = parser.parse_args()
    report: dict = {"torch": "hidden", "busy_pages": BUSY_PAGES, "pages": {}}
    env = {"PYTHONPATH": str(ROOT / "bench" / "without_torch")}
    for page in args.pages:
        for busy in args.busy:
            with Deployment(ROOT / "app.py", env=env) as deployment:
                url = f"ws://127.0.0.1:{deployment.port}/_stcore/stream"
                found = asyncio.run(first_visits(url, page, busy, args.seconds, args.after))
                found["server_rss_mb"] = deployment.rss_mb()
            report["pages"].setdefault(page, {})[f"busy_{busy}"] = found
            print(page, busy, json.dumps(found), file=sys.stderr)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
