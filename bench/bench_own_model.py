"""Benchmark: a listed ~360 M-parameter checkpoint run by our code vs transformers (eager,
float32), in one process on the same files.

Without ``--model``, it builds a checkpoint of SmolLM2-360M's shape (32 layers, d_model 960,
15 query heads over 5 KV heads, d_ff 2560, vocabulary 49,152, tied head: 362 M parameters)
with random weights, saved in float32 by transformers' ``save_pretrained`` beside SmolLM2's
tokenizer, into artifacts/bench-models/ (once: 1.4 GB). ``--shape qwen2`` builds Qwen2.5-0.5B's
shape instead (24 layers, d_model 896, 14 query heads over 2 KV heads, biases on q, k, v:
494 M); ``--shape gemma3-270m`` Gemma 3 270M's (18 layers, 5 local of every 6 with a window of
512, QK-norm, d_model 640, 4 query heads over 1 KV head of 256, vocabulary 262,144: 268 M).
Prints JSON:

  load_s               ours (open_checkpoint, as the app loads a listed model) and transformers'
  prefill_ms           one pass over --context tokens: ours keeping every step (as the pages
                       do), transformers eager with output_attentions=True
  decode_step_ms       one cached step after the prefill: ours (run_llama with the prefill's
                       cache) vs transformers' per-token generate time, (generate 1 + N - generate
                       1) / N, greedy
  ratios_median        ours / transformers (at most 1.0 for both)
  peak_rss_mb          this process's peak resident memory (both models loaded)

Runs are interleaved (ours, theirs, ours, ...) so background load hits both alike. Usage:
    flock /work/bench.lock .venv/bin/python bench/bench_own_model.py [--shape qwen2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import summary, timed

ROOT = Path(__file__).resolve().parents[1]
# Each shape: transformers' config and model classes, and the config's numbers.
SHAPES = {
    "smollm2": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=960, num_hidden_layers=32, num_attention_heads=15, num_key_value_heads=5,
        intermediate_size=2560, rope_theta=100000.0)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
        intermediate_size=4864, rope_theta=1000000.0)),
    # Gemma 3 270M: a 262k vocabulary, 18 layers of which every sixth is global, windows of 512.
    "gemma3-270m": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        vocab_size=262_144, hidden_size=640, num_hidden_layers=18, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, intermediate_size=2048, sliding_window=512,
        query_pre_attn_scalar=256, rms_norm_eps=1e-6, max_position_embeddings=32_768,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
        })),
}  # fmt: skip


def build(shape: str) -> Path:
    """A random checkpoint of ``shape`` with SmolLM2's tokenizer, saved once."""
    import torch
    import transformers

    from attention_core.models.llama import files as llama_files

    folder = ROOT / "artifacts" / "bench-models" / f"{shape}-shape"
    if (folder / "model.safetensors").is_file() or (
        folder / "model.safetensors.index.json"
    ).is_file():
        return folder
    config_name, model_name, spec = SHAPES[shape]
    settings = {"vocab_size": 49152, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
                "tie_word_embeddings": True, **spec}  # fmt: skip
    if "rope_theta" in settings:
        settings["rope_parameters"] = {"rope_type": "default",
                                       "rope_theta": settings.pop("rope_theta")}  # fmt: skip
    config = getattr(transformers, config_name)(**settings)
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    gguf = llama_files.package_gguf_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a checkpoint folder (default: build one of --shape)")
    parser.add_argument("--shape", choices=list(SHAPES), default="smollm2")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=8)
    parser.add_argument(
        "--weights",
        choices=("as-saved", "bfloat16"),
        default="as-saved",
        help="how our code holds the matrices: as the file stores them, or bfloat16 (as the "
        "app holds a 16-bit checkpoint too large for ATTENTION_EXPLORER_FLOAT32_MB)",
    )
    parser.add_argument(
        "--hf-dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="transformers' dtype: float32, or bfloat16 (what from_pretrained's dtype='auto' "
        "gives a checkpoint published in bfloat16, as Gemma 3's is)",
    )
    args = parser.parse_args()

    import numpy as np
    import torch
    import transformers

    from attention_core.models.families import open_checkpoint, parameter_count_of
    from attention_core.models.llama import run_llama

    folder = Path(args.model) if args.model else build(args.shape)
    start = time.perf_counter()
    from attention_core.models.loading import BFLOAT16

    held = None if args.weights == "as-saved" else BFLOAT16
    ours = open_checkpoint(str(folder), max_parameters=600_000_000, weights_dtype=held)
    load_ours = time.perf_counter() - start
    start = time.perf_counter()
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=getattr(torch, args.hf_dtype)
    ).eval()
    load_hf = time.perf_counter() - start

    text = "Attention lets every token look back at the tokens before it. " * 40
    ids = np.asarray(ours.encode(text)[: args.context])
    ids_t = torch.from_numpy(ids)[None]
    next_id = [int(ids[-1])]
    n_new = args.decode_tokens
    times: dict[str, list[float]] = {k: [] for k in ("prefill_ours", "prefill_hf", "step_ours",
                                                     "step_hf")}  # fmt: skip

    def hf_prefill():
        with torch.no_grad():
            hf(ids_t, output_attentions=True, use_cache=True)

    def hf_generate(count):
        with torch.no_grad():
            hf.generate(ids_t, max_new_tokens=count, min_new_tokens=count, do_sample=False,
                        pad_token_id=0)  # fmt: skip

    def ours_prefill_then_step() -> None:
        holder = []
        times["prefill_ours"].append(timed(lambda: holder.append(run_llama(ours, ids))))
        cache = holder.pop().cache
        times["step_ours"].append(timed(lambda: run_llama(ours, next_id, cache)))

    hf_prefill()  # warm-up
    hf_generate(1)
    ours_prefill_then_step()
    times = {k: [] for k in times}
    for _ in range(args.repeats):
        ours_prefill_then_step()
        times["prefill_hf"].append(timed(hf_prefill))
        short, long = timed(lambda: hf_generate(1)), timed(lambda: hf_generate(1 + n_new))
        times["step_hf"].append((long - short) / n_new)

    results = {
        "machine": {"cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
                    "python": platform.python_version(), "torch_threads": torch.get_num_threads(),
                    "torch": torch.__version__, "transformers": transformers.__version__},
        "model": {"shape": None if args.model else args.shape, "family": ours.config.model_type,
                  "parameters": parameter_count_of(ours), "stored_as": ours.weights.storage,
                  "transformers_dtype": args.hf_dtype},
        "context_tokens": int(ids.size),
        "load_s": {"ours": round(load_ours, 2), "transformers": round(load_hf, 2)},
        "prefill_ms": {"ours_every_step_kept": summary(times["prefill_ours"]),
                       "transformers_eager_attentions": summary(times["prefill_hf"])},
        "decode_step_ms": {"ours_one_cached_step": summary(times["step_ours"]),
                           "transformers_per_token_in_generate": summary(times["step_hf"])},
    }  # fmt: skip
    results["ratios_median"] = {
        name: round(statistics.median(times[f"{name}_ours"])
                    / statistics.median(times[f"{name}_hf"]), 2)
        for name in ("prefill", "step")
    }  # fmt: skip
    results["machine"]["load_average_after"] = os.getloadavg()
    results["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
