"""Training the learning page's model: the default run's time, our NumPy step against torch's CPU
autograd step on the same model, and memory.

Three figures, each measured in processes of its own so that neither side's threads or caches
weigh on the other's:

- the default run (`TrainingSettings()`: 2 layers × 4 heads, d_model 64, 1,000 steps of 32):
  seconds to the first induction head (prefix matching past 0.4) and to the end, the peak
  resident memory of the process, and the bytes its chunks hold (what the page keeps);
- one training step, ours (forward, loss, backward, AdamW: attention_core.training) against
  torch's (the same model as a torch module, `loss.backward()`, `torch.optim.AdamW`), its
  attention either torch's fused kernel (`F.scaled_dot_product_attention(is_causal=True)`) or
  the formula step by step as ours computes it (softmax of the masked scores, then times V), on
  the same batches: the three in turn, each its median step after a warm-up in a process of
  its own, and the ratios round by round.

    .venv/bin/python bench/bench_training.py [--pairs 5] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from attention_core.training.formation import INDUCTION_HEAD  # noqa: E402
from attention_core.training.run import TrainingSettings, train  # noqa: E402
from attention_core.training.sequences import training_batch  # noqa: E402


def default_run() -> dict:
    from ui.widgets.byte_cache import nbytes

    started = time.perf_counter()
    chunks, formed = [], None
    for chunk in train(TrainingSettings()):
        chunks.append(chunk)
        if formed is None and chunk.evaluation.induction.max() >= INDUCTION_HEAD:
            formed = (chunk.step, time.perf_counter() - started)
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "induction_head_at_step": None if formed is None else formed[0],
        "induction_head_after_s": None if formed is None else round(formed[1], 2),
        "final_prefix_matching": round(float(chunks[-1].evaluation.induction.max()), 3),
        "final_loss_repeated": round(chunks[-1].evaluation.loss_repeated, 4),
        "final_loss_first_seen": round(chunks[-1].evaluation.loss_first, 4),
        "chunks_mb": round(nbytes(tuple(chunks)) / 2**20, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def batches(count: int) -> list[np.ndarray]:
    settings = TrainingSettings()
    rng = np.random.default_rng(0)
    return [
        training_batch(rng, settings.batch, settings.n_ctx, settings.d_vocab)[0]
        for _ in range(count)
    ]


def our_steps(steps: int) -> list[float]:
    from attention_core.training.adamw import AdamWState, adamw_update
    from attention_core.training.attn_only import (
        attn_only_gradients,
        init_params,
        next_token_loss,
        run_attn_only,
    )

    settings = TrainingSettings()
    config, optimizer = settings.config, settings.optimizer
    params = init_params(config, 0)
    state = AdamWState.zeros_like(params)
    times = []
    for tokens in batches(steps):
        started = time.perf_counter()
        forward = run_attn_only(config, params, tokens)
        _, loss_grads = next_token_loss(forward)
        grads = attn_only_gradients(config, params, forward, loss_grads)
        params, state = adamw_update(params, grads.params, state, optimizer)
        times.append(time.perf_counter() - started)
    return times


def torch_steps(steps: int, fused: bool = True) -> list[float]:
    import torch
    import torch.nn.functional as F

    settings = TrainingSettings()
    c = settings.config
    torch.manual_seed(0)
    std = 0.8 / c.d_model**0.5

    def weight(*shape):
        return torch.nn.Parameter(torch.randn(*shape) * std)

    def bias(*shape):
        return torch.nn.Parameter(torch.zeros(*shape))

    p = {"W_E": weight(c.d_vocab, c.d_model), "W_pos": weight(c.n_ctx, c.d_model),
         "W_U": weight(c.d_model, c.d_vocab), "b_U": bias(c.d_vocab)}  # fmt: skip
    for layer in range(c.n_layers):
        for x in "QKV":
            p[f"{layer}W_{x}"] = weight(c.n_heads, c.d_model, c.d_head)
            p[f"{layer}b_{x}"] = bias(c.n_heads, c.d_head)
        p[f"{layer}W_O"], p[f"{layer}b_O"] = weight(c.n_heads, c.d_head, c.d_model), bias(c.d_model)
    optimizer = torch.optim.AdamW(p.values(), lr=settings.lr)
    causal = torch.ones(c.n_ctx, c.n_ctx, dtype=torch.bool).tril()
    times = []
    for tokens in batches(steps):
        started = time.perf_counter()
        ids = torch.from_numpy(tokens)
        x = p["W_E"][ids] + p["W_pos"][: c.n_ctx]
        for layer in range(c.n_layers):
            q, k, v = (
                torch.einsum("bpm,hmd->bhpd", x, p[f"{layer}W_{n}"]) + p[f"{layer}b_{n}"][:, None]
                for n in "QKV"
            )
            if fused:
                z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # the formula, as ours computes it: every step of it kept in memory
                scores = (q @ k.transpose(-1, -2)) / c.d_head**0.5
                z = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
            x = x + torch.einsum("bhpd,hdm->bpm", z, p[f"{layer}W_O"]) + p[f"{layer}b_O"]
        logits = x @ p["W_U"] + p["b_U"]
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, c.d_vocab), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - started)
    return times


def side(name: str, steps: int) -> None:
    """One side's median step (ms) after a warm-up of a fifth of the steps, as JSON."""
    if name == "numpy":
        times = our_steps(steps)
    else:
        times = torch_steps(steps, fused=name == "torch")
    steady = times[steps // 5 :]
    print(json.dumps({"median_ms": statistics.median(steady) * 1000, "min_ms": min(steady) * 1000}))


# Ours; torch with its fused attention kernel; torch computing the formula step by step as ours.
SIDES = ("numpy", "torch", "torch-formula")


def run_side(name: str, steps: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--side", name, "--steps", str(steps)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--default-run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args.side, args.steps)
        return
    if args.default_run:
        print(json.dumps(default_run()))
        return

    run = subprocess.run(
        [sys.executable, __file__, "--default-run"], capture_output=True, text=True, check=True
    )
    rounds = [
        {name: run_side(name, args.steps)["median_ms"] for name in SIDES} for _ in range(args.pairs)
    ]

    def ratio(other: str) -> dict:
        ratios = sorted(r["numpy"] / r[other] for r in rounds)
        return {"min": round(ratios[0], 3), "median": round(statistics.median(ratios), 3),
                "max": round(ratios[-1], 3)}  # fmt: skip

    print(
        json.dumps(
            {
                "benchmark": "training the learning page's model",
                "default_run": json.loads(run.stdout.strip().splitlines()[-1]),
                **{f"step_ms_{name}": [round(r[name], 2) for r in rounds] for name in SIDES},
                "ratio_numpy_over_torch_fused": ratio("torch"),
                "ratio_numpy_over_torch_formula": ratio("torch-formula"),
                "steps_per_side": args.steps,
                "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                "load_average_1min": round(os.getloadavg()[0], 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
