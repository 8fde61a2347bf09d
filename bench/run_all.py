"""Run every benchmark in bench/ and print one JSON document with all their figures.

Each script runs in its own process (so one's imports, caches and threads cannot colour
another's timings) with a time limit, one after the other. A script's JSON (what it prints on
stdout) goes under its name; a script that fails or times out is reported with the end of its
error output instead, and the others still run. The machine the figures were taken on is
described at the top, since timings mean little without it.

What runs: bench/bench_*.py and bench/torch_parity.py, in name order. Not run: this file and
bench/load_test.py (the many-users load test is run by hand; see bench/README.md).

    .venv/bin/python bench/run_all.py [--only bench_reruns bench_payload] [--timeout 1200]
    make bench
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NOT_RUN = {"run_all.py", "load_test.py"}


def scripts() -> list[Path]:
    found = [*BENCH.glob("bench_*.py"), BENCH / "torch_parity.py"]
    return sorted(
        (path for path in found if path.exists() and path.name not in NOT_RUN),
        key=lambda path: path.name,
    )


def last_json_document(text: str):
    """The JSON a script printed: its whole stdout, or the last `{...}`/`[...]` block in it."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char in "{[" and (i == 0 or text[i - 1] == "\n")]
    for start in reversed(starts):
        try:
            document, _ = decoder.raw_decode(text[start:])
            return document
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON document on stdout")


def run(script: Path, timeout: float) -> dict:
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
        )
    except subprocess.TimeoutExpired as expired:
        stderr = expired.stderr.decode(errors="replace") if expired.stderr else ""
        return {
            "ok": False,
            "seconds": round(time.monotonic() - started, 1),
            "error": f"timed out after {timeout:g} s",
            "stderr_tail": stderr[-1500:],
        }
    outcome = {"ok": done.returncode == 0, "seconds": round(time.monotonic() - started, 1)}
    try:
        outcome["result"] = last_json_document(done.stdout)
    except ValueError as error:
        outcome["ok"] = False
        outcome["error"] = str(error)
        outcome["stdout_tail"] = done.stdout[-1500:]
    if done.returncode != 0:
        outcome["error"] = f"exit status {done.returncode}"
        outcome["stderr_tail"] = done.stderr[-1500:]
    return outcome


def machine() -> dict:
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_gb = None
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        total_kb = int(meminfo.read_text().split("MemTotal:")[1].split()[0])
        memory_gb = round(total_kb / 2**20, 1)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": platform.platform(),
        "python": platform.python_version(),
        "git_commit": commit,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="script names to run, with or without .py")
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds allowed per script (default 1800)"
    )
    args = parser.parse_args()

    chosen = scripts()
    if args.only:
        wanted = {name.removesuffix(".py") for name in args.only}
        chosen = [path for path in chosen if path.stem in wanted]
        missing = wanted - {path.stem for path in chosen}
        if missing:
            sys.exit(f"no such benchmark: {', '.join(sorted(missing))}")

    report = {"taken_at": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine()}
    results = {}
    for script in chosen:
        print(f"running {script.name} ...", file=sys.stderr, flush=True)
        results[script.stem] = run(script, args.timeout)
        status = "ok" if results[script.stem]["ok"] else "FAILED"
        print(f"  {status} in {results[script.stem]['seconds']} s", file=sys.stderr, flush=True)
    report["benchmarks"] = results
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if not all(outcome["ok"] for outcome in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
