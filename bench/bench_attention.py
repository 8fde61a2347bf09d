"""Benchmark: full attention on NumPy vs torch CPU against n, and peak memory full vs chunked.

For each length n (one head, width d, float32) it times the full computation
softmax(Q Kᵀ/√d) V on NumPy and on torch CPU, alternating the two backends run by run so that
background load hits both alike, and reports the median time, the achieved GFLOP/s
(4·n²·d / time) and the ratio NumPy time / torch time from the same run. At the longest length
it measures the peak memory of one call for each method: full (n×n matrix), chunked (online
softmax over key blocks) and, on torch, the fused SDPA kernel.

Usage:  .venv/bin/python bench/bench_attention.py [--lengths 256 ... 8192] [--repeats 5]
Prints JSON. torch is optional: without it only the NumPy figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_core import max_elements
from attention_core.cost import (
    attention_flops,
    chunk_bytes,
    score_matrix_bytes,
)
from attention_core.measurement import (
    available_backends,
    backend_status,
    measure_attention,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192]
    )
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--block", type=int, default=256)
    args = parser.parse_args()

    backends = [b for b in ("numpy", "torch-cpu") if b in available_backends()]
    longest = max(args.lengths)
    timings = []
    # The full method at n = 8192 holds 67 M scores, above the interactive cap.
    with max_elements(max(score_matrix_bytes(longest, longest) // 4, 50_000_000)):
        for n in args.lengths:
            for backend in backends:  # warm-up, untimed
                measure_attention(backend, n, args.d, repeats=1, warmup=False, measure_memory=False)
            runs: dict[str, list[float]] = {backend: [] for backend in backends}
            for _ in range(args.repeats):
                for backend in backends:
                    m = measure_attention(
                        backend, n, args.d, repeats=1, warmup=False, measure_memory=False
                    )
                    runs[backend].append(m.seconds)
            flops = attention_flops(n, n, args.d)
            row = {"n": n, "flops": flops, "score_matrix_mb": score_matrix_bytes(n, n) / 1e6}
            for backend in backends:
                median = statistics.median(runs[backend])
                row[f"{backend}_ms"] = round(median * 1e3, 3)
                row[f"{backend}_gflops"] = round(flops / median / 1e9, 2)
            if len(backends) == 2:
                row["numpy_over_torch_cpu"] = round(row["numpy_ms"] / row["torch-cpu_ms"], 3)
            timings.append(row)
            print(json.dumps(row), file=sys.stderr)

        memory = []
        for backend in backends:
            methods = ["full", "chunked"] + (["fused"] if backend != "numpy" else [])
            for method in methods:
                m = measure_attention(
                    backend,
                    longest,
                    args.d,
                    method=method,
                    block_size=args.block,
                    repeats=1,
                    warmup=False,
                )
                memory.append(
                    {
                        "backend": backend,
                        "method": method,
                        "n": longest,
                        "peak_mb": None if m.peak_bytes is None else round(m.peak_bytes / 1e6, 2),
                        "time_ms": round(m.seconds * 1e3, 1),
                        "how": m.peak_note,
                    }
                )
                print(json.dumps(memory[-1]), file=sys.stderr)

    import_torch = "torch-cpu" in backends
    report = {
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "load_average_1min": round(os.getloadavg()[0], 2)
            if hasattr(os, "getloadavg")
            else None,
            "numpy": np.__version__,
            "torch": __import__("torch").__version__ if import_torch else None,
            "backends": {s.name: s.detail for s in backend_status()},
        },
        "d": args.d,
        "repeats": args.repeats,
        "timing_full_attention": timings,
        "peak_memory_at_longest": {
            "n": longest,
            "block_size": args.block,
            "score_matrix_mb": score_matrix_bytes(longest, longest) / 1e6,
            "chunk_tile_mb": chunk_bytes(longest, longest, args.block) / 1e6,
            "results": memory,
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
