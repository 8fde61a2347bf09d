"""Largest deviation of attention_core from torch (and transformers), per function, as JSON.

Each case draws random inputs from several seeds and shapes and records the maximum absolute
difference between our result and the reference. Run: .venv/bin/python bench/torch_parity.py
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attention_core as ac
from attention_core import torch_backend as tb

SEEDS = range(20)
DTYPES = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}


def max_dev(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def case_softmax(rng: np.random.Generator, np_dt: type, t_dt: torch.dtype) -> float:
    x = (rng.normal(size=(4, 8, 33)) * rng.uniform(1, 30)).astype(np_dt)
    return max_dev(ac.softmax(x), torch.softmax(torch.from_numpy(x), -1).numpy())


def _qkv(rng: np.random.Generator, np_dt: type, q_pos: int, k_pos: int, lead=(2, 4)):
    d_k, d_v = int(rng.integers(1, 65)), int(rng.integers(1, 33))
    q = rng.normal(size=(*lead, q_pos, d_k)).astype(np_dt)
    k = rng.normal(size=(*lead, k_pos, d_k)).astype(np_dt)
    v = rng.normal(size=(*lead, k_pos, d_v)).astype(np_dt)
    return q, k, v


def case_sdpa(rng, np_dt, t_dt, kind: str) -> float:
    q_pos = int(rng.integers(1, 40))
    k_pos = q_pos if kind in ("self", "causal") else int(rng.integers(1, 40))
    q, k, v = _qkv(rng, np_dt, q_pos, k_pos)
    kwargs, mask = {}, None
    if kind in ("causal", "causal_cross"):
        kwargs["is_causal"] = True
        mask = ac.causal_mask(q_pos, k_pos)
    elif kind == "bool_mask":
        mask = rng.random((2, 1, q_pos, k_pos)) < 0.7
        kwargs["attn_mask"] = torch.from_numpy(mask)
    ours = ac.scaled_dot_product_attention(q, k, v, mask=mask).output
    ref = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), **kwargs)
    return max_dev(ours, ref.numpy())


def case_mha(rng, np_dt, t_dt, part: str) -> float:
    d_head, h = int(rng.integers(1, 17)), int(rng.integers(1, 9))
    d_model = d_head * h
    params = ac.init_multi_head_params(d_model, h, seed=int(rng.integers(1000)))
    cast = {f: getattr(params, f).astype(np_dt) for f in params.__dataclass_fields__}
    params = ac.MultiHeadParams(**cast)
    q_pos, k_pos = int(rng.integers(1, 30)), int(rng.integers(1, 30))
    x_q = rng.normal(size=(3, q_pos, d_model)).astype(np_dt)
    x_kv = rng.normal(size=(3, k_pos, d_model)).astype(np_dt)
    mask = ac.causal_mask(q_pos, k_pos)
    ours = ac.multi_head_attention(x_q, x_kv, params=params, num_heads=h, mask=mask)
    mha = torch.nn.MultiheadAttention(d_model, h, batch_first=True, dtype=t_dt)
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.from_numpy(np.concatenate([params.w_q, params.w_k, params.w_v]))
        )
        mha.in_proj_bias.copy_(
            torch.from_numpy(np.concatenate([params.b_q, params.b_k, params.b_v]))
        )
        mha.out_proj.weight.copy_(torch.from_numpy(params.w_o))
        mha.out_proj.bias.copy_(torch.from_numpy(params.b_o))
        kv = torch.from_numpy(x_kv)
        out, w = mha(
            torch.from_numpy(x_q), kv, kv, attn_mask=torch.from_numpy(~mask),
            average_attn_weights=False,
        )  # fmt: skip
    if part == "output":
        return max_dev(ours.output, out.numpy())
    return max_dev(ours.attention.weights, w.numpy())


def case_rotary(rng, np_dt, t_dt) -> float:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    d = 2 * int(rng.integers(1, 65))
    pos_n = int(rng.integers(1, 200))
    q = rng.normal(size=(1, 2, pos_n, d)).astype(np_dt)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    emb = torch.cat([torch.outer(torch.arange(pos_n, dtype=torch.float64), inv_freq)] * 2, -1)
    cos, sin = emb.cos()[None].to(t_dt), emb.sin()[None].to(t_dt)
    ref, _ = apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(q), cos, sin)
    return max_dev(ac.apply_rotary(q), ref.numpy())


def case_alibi(rng, np_dt, t_dt) -> float:
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    h = int(rng.integers(1, 33))
    hf = build_alibi_tensor(torch.ones(1, 2), h, torch.float64).numpy()[:, 0, 1]
    return max_dev(ac.alibi_slopes(h), hf)


def case_backend(rng, np_dt, t_dt, fn: str) -> float:
    q, k, v = _qkv(rng, np_dt, int(rng.integers(1, 30)), int(rng.integers(1, 30)))
    mask = ac.causal_mask(q.shape[-2], k.shape[-2])
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    if fn == "softmax":
        return max_dev(tb.softmax(tq).numpy(), ac.softmax(q))
    if fn == "scaled_dot_product_attention":
        got = tb.scaled_dot_product_attention(tq, tk, tv, mask=torch.from_numpy(mask))
        return max_dev(
            got.output.numpy(), ac.scaled_dot_product_attention(q, k, v, mask=mask).output
        )
    d_head, h = int(rng.integers(1, 9)), int(rng.integers(1, 5))
    params = ac.init_multi_head_params(d_head * h, h, seed=1)
    x = rng.normal(size=(2, 7, d_head * h)).astype(np_dt)
    got = tb.multi_head_attention(torch.from_numpy(x), params=params, num_heads=h)
    return max_dev(
        got.output.numpy(), ac.multi_head_attention(x, params=params, num_heads=h).output
    )


CASES = {
    "softmax vs torch.softmax": case_softmax,
    "scaled_dot_product_attention vs F.sdpa (self)": lambda *a: case_sdpa(*a, "self"),
    "scaled_dot_product_attention vs F.sdpa (cross)": lambda *a: case_sdpa(*a, "cross"),
    "scaled_dot_product_attention vs F.sdpa (bool mask)": lambda *a: case_sdpa(*a, "bool_mask"),
    "scaled_dot_product_attention vs F.sdpa (is_causal)": lambda *a: case_sdpa(*a, "causal"),
    "scaled_dot_product_attention vs F.sdpa (is_causal, cross)": lambda *a: case_sdpa(
        *a, "causal_cross"
    ),
    "multi_head_attention output vs nn.MultiheadAttention": lambda *a: case_mha(*a, "output"),
    "multi_head_attention weights vs nn.MultiheadAttention": lambda *a: case_mha(*a, "weights"),
    "apply_rotary vs transformers apply_rotary_pos_emb": case_rotary,
    "alibi_slopes vs transformers build_alibi_tensor (float32 inside)": case_alibi,
    "torch_backend.softmax vs numpy": lambda *a: case_backend(*a, "softmax"),
    "torch_backend.scaled_dot_product_attention vs numpy": lambda *a: case_backend(
        *a, "scaled_dot_product_attention"
    ),
    "torch_backend.multi_head_attention vs numpy": lambda *a: case_backend(*a, "mha"),
}


def main() -> None:
    start = time.perf_counter()
    results: dict[str, dict[str, float]] = {}
    for name, case in CASES.items():
        results[name] = {}
        for dt_name, (np_dt, t_dt) in DTYPES.items():
            worst = 0.0
            for seed in SEEDS:
                worst = max(worst, case(np.random.default_rng(seed), np_dt, t_dt))
            results[name][dt_name] = worst
    print(
        json.dumps(
            {
                "max_abs_deviation": results,
                "seeds_per_case": len(SEEDS),
                "torch": torch.__version__,
                "numpy": np.__version__,
                "machine": platform.machine(),
                "seconds": round(time.perf_counter() - start, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
