"""What attention costs, by formula: FLOPs, bytes, and the n² curve to compare measurements with.

For n queries and n keys of width d, attention computes n² scores (2·n²·d FLOPs), and the
weighted sum of values costs as much again. A full implementation also stores the n×n matrix
(n²·4 bytes in float32); the chunked one (`attention_core.chunked`) never holds more than an
n × block tile of it. `measurement` times both and reads their peak memory.
"""

from __future__ import annotations

import numpy as np

from .validation import AttentionInputError, check_int

__all__ = [
    "attention_flops",
    "chunk_bytes",
    "decoding_score_counts",
    "max_abs_difference",
    "quadratic_reference",
    "score_matrix_bytes",
]


def attention_flops(q_len: int, k_len: int, d_k: int, d_v: int | None = None, *, heads=1) -> int:
    """Floating-point operations of the two matrix products of attention.

    FLOPs = heads · (2·q_len·k_len·d_k  [Q Kᵀ]  +  2·q_len·k_len·d_v  [weights V])

    A multiply-add counts as 2 FLOPs. The softmax (a few operations per score) is left out, as
    is usual: it is O(q_len·k_len) too but does not grow with d. With q_len = k_len = n and
    d_k = d_v = d this is 4·n²·d.
    """
    q_len = check_int(q_len, "q_len", minimum=1)
    k_len = check_int(k_len, "k_len", minimum=1)
    d_k = check_int(d_k, "d_k", minimum=1)
    d_v = d_k if d_v is None else check_int(d_v, "d_v", minimum=1)
    heads = check_int(heads, "heads", minimum=1)
    return heads * 2 * q_len * k_len * (d_k + d_v)


def score_matrix_bytes(q_len: int, k_len: int, *, heads: int = 1, itemsize: int = 4) -> int:
    """Bytes of one `(heads, q_len, k_len)` score (or weight) matrix: heads·q_len·k_len·itemsize."""
    q_len = check_int(q_len, "q_len", minimum=1)
    k_len = check_int(k_len, "k_len", minimum=1)
    heads = check_int(heads, "heads", minimum=1)
    return heads * q_len * k_len * check_int(itemsize, "itemsize", minimum=1)


def chunk_bytes(
    q_len: int, k_len: int, block_size: int, *, heads: int = 1, itemsize: int = 4
) -> int:
    """Bytes of the `(heads, q_len, block)` tile of scores chunked attention holds at a time."""
    block = min(check_int(block_size, "block_size", minimum=1), check_int(k_len, "k_len"))
    return score_matrix_bytes(q_len, block, heads=heads, itemsize=itemsize)


def quadratic_reference(sizes: object, anchor_size: int, anchor_value: float) -> np.ndarray:
    """An n² curve through one measured point: value(n) = anchor_value · (n / anchor_size)².

    Drawn next to measured times on a log-log plot, it shows whether they grow like n²
    (parallel lines) or slower (small n, where fixed overheads dominate).
    """
    n = np.asarray(sizes, dtype=np.float64)
    anchor_size = check_int(anchor_size, "anchor_size", minimum=1)
    return float(anchor_value) * (n / anchor_size) ** 2


def max_abs_difference(a: object, b: object) -> float:
    """max |a - b| over all entries: how far two computations of the same thing disagree."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise AttentionInputError(f"Cannot compare shapes {a.shape} and {b.shape}.")
    return float(np.abs(a - b).max()) if a.size else 0.0


def decoding_score_counts(n: int) -> tuple[int, int]:
    """Dot products q·k to generate n tokens one at a time, with and without a KV cache.

    with cache     step t attends from 1 new query to t cached keys: Σ_{t=1..n} t = n(n+1)/2
    without cache  step t reruns attention over the whole prefix, t queries × t keys:
                   Σ_{t=1..n} t² = n(n+1)(2n+1)/6
    """
    n = check_int(n, "n (tokens generated)", minimum=1)
    return n * (n + 1) // 2, n * (n + 1) * (2 * n + 1) // 6
