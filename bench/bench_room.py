"""A talk's room, measured as browsers make it (harness/room.py speaks Streamlit's websocket
protocol): how soon an answer reaches the speaker's screen, and what a room costs a page's rerun.

- `latency`: `--workers` (2) workers behind HAProxy, the answers in one SQLite file (or Redis,
  `--store redis://...`). The speaker's screen reruns its count fragment every second, as its
  browser does; `--viewers` (50) audience tabs arrive within `--spread` (5) s, each on the
  worker HAProxy gives it, and lock in an answer. An answer's latency runs from the moment its
  lock-in finished (it is in the store) to the first speaker refresh that counts it: p50, p95
  and max, the speaker's refresh time, the lock-in's own time, and whether the final count
  equals the answers given.
- `rerun`: one worker; one tab on the SDPA page moves its widgets `--reruns` (40) times, then
  reloads the page as many times, in a room and without one, alternated, so that both meet the
  same machine. Medians and p90 of each, and their ratio.

Not a test: run by `make bench` and by hand. Loopback only, every server stopped at the end.

    .venv/bin/python bench/bench_room.py [--viewers 50] [--workers 2] [--reruns 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.room import RoomViewer  # noqa: E402
from harness.stream import run_to_end, worker_cookie  # noqa: E402
from server import room_store, rooms  # noqa: E402
from server.serve import Deployment  # noqa: E402

PAGE, QUESTION = "scaled-dot-product", "sdpa.winner"
REFRESH_S = 1.0  # the speaker's count fragment (ui.widgets.room.SPEAKER_REFRESH_S)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def tab(port: int, query: str, seed: int = 0) -> RoomViewer:
    cookie = worker_cookie(f"http://127.0.0.1:{port}")
    return RoomViewer(f"ws://127.0.0.1:{port}/_stcore/stream", PAGE, query, cookie, seed)


async def latency(port: int, url: str, viewers: int, spread: float) -> dict:
    host = rooms.start_room(room_store.open_store(url), room_store.now())
    speaker = await asyncio.to_thread(tab, port, f"room={host.code}&host={host.secret}&present=1")
    stored: list[float] = []  # when each lock-in finished, monotonic
    lock_ins: list[float] = []
    seen: list[tuple[float, int]] = []
    refreshes: list[float] = []
    done = asyncio.Event()

    async def watch() -> None:
        async with speaker.connected():
            await speaker.rerun()
            while not done.is_set() or (seen and seen[-1][1] < viewers):
                started = time.monotonic()
                count = await speaker.count(QUESTION)
                refreshes.append(time.monotonic() - started)
                seen.append((time.monotonic(), count or 0))
                if done.is_set() and time.monotonic() - stored[-1] > 10:
                    break
                await asyncio.sleep(max(0.0, REFRESH_S - (time.monotonic() - started)))

    async def one(index: int, rng: random.Random) -> None:
        await asyncio.sleep(rng.uniform(0, spread))
        viewer = await asyncio.to_thread(tab, port, f"room={host.code}", index)
        async with viewer.connected():
            await viewer.rerun()
            started = time.monotonic()
            await viewer.answer(QUESTION, index % 3)
            stored.append(time.monotonic())
            lock_ins.append(stored[-1] - started)

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(2)  # the speaker's page is up before the room arrives
    rng = random.Random(0)
    await asyncio.gather(*(one(i, rng) for i in range(viewers)))
    done.set()
    await watcher
    arrivals = sorted(stored)
    waits = []
    for k, at in enumerate(arrivals, start=1):
        shown = next((t for t, count in seen if count >= k and t >= at), None)
        if shown is not None:
            waits.append(shown - at)
    return {
        "viewers": viewers,
        "answers_counted": seen[-1][1] if seen else 0,
        "answer_to_speaker_s": spread_of(waits),
        "speaker_refresh_s": spread_of(refreshes),
        "answers_within_s": round(arrivals[-1] - arrivals[0], 2),
        "choose_and_lock_in_s": spread_of(lock_ins),
    }


def spread_of(values: list[float]) -> dict:
    return {
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "max": round(max(values), 3),
    }


async def reruns(port: int, url: str, count: int) -> dict:
    host = rooms.start_room(room_store.open_store(url), room_store.now())
    timings: dict[str, dict[str, list[float]]] = {}
    for label, query in (("without_room", ""), ("in_room", f"room={host.code}")) * 2:
        viewer = await asyncio.to_thread(tab, port, query, 7)
        runs = timings.setdefault(label, {"widget": [], "page": []})
        async with viewer.connected():
            await viewer.rerun()
            for _ in range(count // 2):
                widget = viewer.pick_widget()
                started = time.monotonic()
                await viewer.rerun(widget)
                runs["widget"].append(time.monotonic() - started)
            for _ in range(count // 2):
                started = time.monotonic()
                await viewer.rerun()
                runs["page"].append(time.monotonic() - started)
    report = {
        label: {
            kind: {"p50": percentile(v, 0.5), "p90": percentile(v, 0.9), "runs": len(v)}
            for kind, v in runs.items()
        }
        for label, runs in timings.items()
    }
    report["in_room_over_without"] = {
        kind: round(
            statistics.median(timings["in_room"][kind])
            / statistics.median(timings["without_room"][kind]),
            2,
        )
        for kind in ("widget", "page")
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--spread", type=float, default=5.0)
    parser.add_argument("--reruns", type=int, default=40)
    parser.add_argument("--store", default="", help="a room store URL (default: a new SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ae-bench-room-") as folder:
        url = args.store or f"sqlite://{folder}/rooms.db"
        env = {room_store.STORE_ENV_VAR: url}
        report = {"store": url.split(":")[0]}
        with Deployment(ROOT / "app.py", workers=args.workers, env=env) as server:
            report["latency"] = run_to_end(latency(server.port, url, args.viewers, args.spread))
        with Deployment(ROOT / "app.py", workers=1, env=env) as server:
            report["rerun"] = run_to_end(reruns(server.port, url, args.reruns))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
