"""Benchmark: our NumPy BERT forward pass vs Hugging Face transformers on torch CPU.

Runs all-MiniLM-L6-v2 on random token ids of 16, 128 and 512 tokens in one process and prints
JSON: the median wall time (ms) of each implementation over `--repeats` runs (after warm-up),
and the ratio ours / torch (plus the minima and their ratio, less sensitive to background
load). Two torch figures are reported:

  torch_eager_ms  BertModel(attn_implementation="eager") with output_attentions and
                  output_hidden_states, i.e. the same work our trace does (the fair comparison)
  torch_sdpa_ms   BertModel with its default attention and no extra outputs (torch's best case)

Runs are interleaved (ours, eager, sdpa, ours, ...) so background load hits all three alike.
Usage:  .venv/bin/python bench/bench_bert.py [--repeats 15] [--lengths 16 128 512] [--threads N]
The load average is printed too: on a busy machine the absolute times mean little, the ratio
(same process, interleaved) a little more.
Needs torch and transformers (test/bench dependencies) and the model (see attention_core.models).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _time_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 128, 512])
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for both OpenBLAS (NumPy) and torch; default: each library's own choice",
    )
    args = parser.parse_args()
    if args.threads is not None:
        # OpenBLAS reads this when NumPy is first imported, so it must be set before that.
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import numpy as np
    import torch
    import transformers
    from transformers import BertModel as HFBertModel

    from attention_core.models import load_bert, run_bert_ids

    if args.threads is not None:
        torch.set_num_threads(args.threads)

    model = load_bert()
    model_dir = str(model.location.path) if model.location else None
    eager = HFBertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    sdpa = HFBertModel.from_pretrained(model_dir).eval()

    rng = np.random.default_rng(0)
    results = []
    for n in args.lengths:
        # [CLS] random word pieces [SEP]: the cost depends on the length only, not the words.
        body = rng.integers(1996, model.config.vocab_size, size=n - 2)
        ids = np.concatenate([[101], body, [102]]).astype(np.int64)
        ids_t = torch.from_numpy(ids.copy())[None]

        def ours(ids=ids):
            return run_bert_ids(model, ids)

        def torch_eager(ids_t=ids_t):
            with torch.inference_mode():
                return eager(ids_t, output_attentions=True, output_hidden_states=True)

        def torch_sdpa(ids_t=ids_t):
            with torch.inference_mode():
                return sdpa(ids_t)

        runners = {"ours_ms": ours, "torch_eager_ms": torch_eager, "torch_sdpa_ms": torch_sdpa}
        times: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(args.warmup):
            for fn in runners.values():
                fn()
        for _ in range(args.repeats):
            for name, fn in runners.items():
                times[name].append(_time_ms(fn))
        medians = {name: round(statistics.median(ts), 3) for name, ts in times.items()}
        minima = {name: min(ts) for name, ts in times.items()}

        # The timing is only meaningful if both compute the same thing.
        ref = torch_eager()
        trace = ours()
        max_attn_diff = float(
            np.abs(np.stack([a[0].numpy() for a in ref.attentions]) - trace.attention_weights).max()
        )
        max_hidden_diff = float(
            np.abs(np.stack([h[0].numpy() for h in ref.hidden_states]) - trace.hidden_states).max()
        )
        results.append(
            {
                "tokens": n,
                **medians,
                "ratio_vs_eager": round(medians["ours_ms"] / medians["torch_eager_ms"], 3),
                "ratio_vs_sdpa": round(medians["ours_ms"] / medians["torch_sdpa_ms"], 3),
                # Minima are the least disturbed by other processes on a shared machine.
                "min_ms": {name: round(t, 3) for name, t in minima.items()},
                "min_ratio_vs_eager": round(minima["ours_ms"] / minima["torch_eager_ms"], 3),
                "min_ratio_vs_sdpa": round(minima["ours_ms"] / minima["torch_sdpa_ms"], 3),
                "max_abs_diff_attention": max_attn_diff,
                "max_abs_diff_hidden": max_hidden_diff,
            }
        )

    print(
        json.dumps(
            {
                "benchmark": "bert_forward",
                "model": model_dir,
                "repeats": args.repeats,
                "numpy": np.__version__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "torch_threads": torch.get_num_threads(),
                "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                "cpu_count": os.cpu_count(),
                "load_average_1min": round(os.getloadavg()[0], 2),
                "machine": platform.machine(),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
