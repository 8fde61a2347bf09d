"""Splitting one head's attention scores by source (attention_core.models.score_sources) on the
shipped decoder: what "why a head attends there" computes for a 64-token prompt.

For the strongest induction head of SmolLM2 on 32 random tokens repeated (64 tokens), and for a
head of the last layer (the most sources: every earlier head and MLP), the median of `--rounds`
runs of each stage, after a warm-up:

- `head_split`: the sources of the stream (each earlier head through its slice of W_O), the
  norm with its scale held, every source's part of every query and key;
- `at(query)`: one query's query part × key part terms `(C + 1, C + 1, k_pos)`;
- `key_sides` and `source_map`: every query's key side and the whole pattern's map.

The forward pass itself (run once, as the page's cache would) is timed apart. The issue's line:
at most 1 s for the split of one head at 64 tokens.

    .venv/bin/python bench/bench_score_split.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from attention_core import head_roles, score_parts  # noqa: E402
from attention_core.models.forward import run_decoder  # noqa: E402
from attention_core.models.llama import load_llama  # noqa: E402
from attention_core.models.score_sources import head_split  # noqa: E402

LENGTH = 32  # repeated once: 64 tokens


def _median_ms(function, rounds: int) -> tuple[float, object]:
    result = function()  # warm-up
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 1), result


def one_head(model, trace, layer: int, head: int, rounds: int) -> dict:
    split_ms, split = _median_ms(lambda: head_split(model, trace, layer, head), rounds)
    n = split.weights.shape[0]
    at_ms, _ = _median_ms(lambda: split.at(n - 1), rounds)
    visible = np.tril(np.ones((n, n), dtype=bool))

    def whole_pattern():
        queries = score_parts.sharpest_queries(split.weights, n // 2)
        return score_parts.source_map(split.key_sides(), split.weights, visible, queries)

    map_ms, _ = _median_ms(whole_pattern, rounds)
    return {
        "head": f"{layer}.{head}",
        "sources": len(split.names),
        "head_split_ms": split_ms,
        "one_query_terms_ms": at_ms,
        "whole_pattern_map_ms": map_ms,
        "total_ms": round(split_ms + at_ms + map_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    model = load_llama()
    ids = head_roles.repeated_tokens(range(1000, 20000), LENGTH, 0)
    forward_ms, trace = _median_ms(lambda: run_decoder(model, ids), args.rounds)
    roles = head_roles.head_roles(trace.attention_weights, LENGTH)
    (induction_layer, induction_head, _), *_ = head_roles.strongest_heads(roles.induction, 1)
    figures = {"tokens": int(ids.shape[0]), "forward_pass_ms": forward_ms}
    last = model.config.num_hidden_layers - 1
    for name, (layer, head) in {
        "induction_head": (induction_layer, induction_head),
        "last_layer_head": (last, 0),
    }.items():
        figures[name] = one_head(model, trace, layer, head, args.rounds)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
