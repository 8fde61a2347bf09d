"""Attention without the n×n matrix: key blocks with an online softmax.

`chunked_attention` reads the keys `block_size` at a time and keeps, per query, a running
maximum m, a running sum l and an unnormalised output o (the trick behind FlashAttention,
Dao et al. 2022, and Milakov & Gimelshein 2018). At no point does it hold more than a
`(..., q_pos, block_size)` tile of scores, yet its output equals `scaled_dot_product_attention`.

Shapes: q `(..., q_pos, d_k)`, k `(..., k_pos, d_k)`, v `(..., k_pos, d_v)`, output
`(..., q_pos, d_v)`; masks are boolean, True = may attend, broadcasting to `(..., q_pos, k_pos)`.

`chunked_attention` runs on NumPy arrays and on torch tensors (CPU or CUDA), like `attention`;
the cost page times it on both. Decoding one position at a time with a KV cache is
`decoding.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import check_dot_product, score_scale
from .validation import AttentionInputError, as_mask, check_int, check_size, device

__all__ = [
    "ChunkedAttention",
    "OnlineSoftmaxBlock",
    "chunked_attention",
    "online_softmax_weights",
]


@dataclass(frozen=True, eq=False)
class OnlineSoftmaxBlock:
    """The online-softmax state of every query after reading one block of keys.

    start, stop     the keys of this block are start <= j < stop
    scores          `(..., q_pos, block)`  scaled scores of the block, -inf where masked
    block_max       `(..., q_pos)`  largest score in the block (-inf if all of it is masked)
    running_max     `(..., q_pos)`  m_t = max(m_{t-1}, block_max): largest score read so far
    rescale         `(..., q_pos)`  exp(m_{t-1} - m_t): the factor that re-bases the old sum and
                                    output on the new maximum (1 if the maximum did not move)
    running_sum     `(..., q_pos)`  l_t = l_{t-1}·rescale + Σ_block exp(s_j - m_t)
    running_output  `(..., q_pos, d_v)`  o_t = o_{t-1}·rescale + Σ_block exp(s_j - m_t) v_j
    output          `(..., q_pos, d_v)`  o_t / l_t: the attention output if the keys ended here
    """

    start: int
    stop: int
    scores: Any
    block_max: Any
    running_max: Any
    rescale: Any
    running_sum: Any
    running_output: Any
    output: Any


@dataclass(frozen=True, eq=False)
class ChunkedAttention:
    """The result of `chunked_attention`.

    output        `(..., q_pos, d_v)`  equals scaled_dot_product_attention(...).output
    row_max       `(..., q_pos)`  m: the largest scaled score of each query (-inf if fully masked)
    row_sum       `(..., q_pos)`  l = Σ_j exp(s_j - m): the softmax denominator, re-based on m
    logsumexp     `(..., q_pos)`  m + log l = log Σ_j exp(s_j), all a backward pass needs to
                                  recompute the weights (what FlashAttention stores)
    fully_masked  `(..., q_pos)`  True for a query that may attend to nothing (zero output)
    block_size    int             keys per block
    scale         float           the factor applied to q·k (1/√d_k by default)
    blocks        tuple of `OnlineSoftmaxBlock`, one per key block, if `return_blocks=True`
    """

    output: Any
    row_max: Any
    row_sum: Any
    logsumexp: Any
    fully_masked: Any
    block_size: int
    scale: float
    blocks: tuple[OnlineSoftmaxBlock, ...] = ()


def chunked_attention(
    q: object,
    k: object,
    v: object,
    *,
    block_size: int,
    mask: object = None,
    causal: bool = False,
    scale: float | None = None,
    return_blocks: bool = False,
) -> ChunkedAttention:
    """Scaled dot-product attention computed block by block over the keys (online softmax).

    For each block B of keys, for every query (s_j = q·k_j · scale, -inf where masked):
        m_new = max(m, max_{j∈B} s_j)
        l     = l · exp(m - m_new) + Σ_{j∈B} exp(s_j - m_new)
        o     = o · exp(m - m_new) + Σ_{j∈B} exp(s_j - m_new) v_j
        m     = m_new
    and at the end output = o / l. Since exp(s_j - m) / l is exactly softmax(s)_j once all
    blocks are read, the output equals `scaled_dot_product_attention(q, k, v, mask=mask)`
    (a fully masked query gets zeros, as there). Peak extra memory is one `(..., q_pos,
    block_size)` tile instead of the `(..., q_pos, k_pos)` matrix.

    `causal=True` applies torch's `is_causal` mask (query i sees keys j <= i) block by block,
    without building it; it combines with `mask`. `return_blocks=True` keeps every block's state
    in `.blocks` for explanation (that stores all scores, so use it on small inputs only).
    """
    xp, q, k, v = check_dot_product(q, k, v)
    block_size = check_int(block_size, "block_size (keys per block)", minimum=1)
    scale = score_scale(scale, q.shape[-1])
    q_len, k_len = q.shape[-2], k.shape[-2]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    allowed = None
    if mask is not None:
        allowed = as_mask(mask, "The mask", (*batch, q_len, k_len), xp)
        batch = np.broadcast_shapes(batch, tuple(allowed.shape[:-2]))
        allowed = xp.asarray(allowed, device=device(q))  # a NumPy mask joins tensors
    check_size((*batch, q_len, min(block_size, k_len)), "A block of scores")
    check_size((*batch, q_len, v.shape[-1]), "The output")

    where = device(q)
    running_max = xp.full((*batch, q_len), -math.inf, dtype=q.dtype, device=where)
    running_sum = xp.zeros((*batch, q_len), dtype=q.dtype, device=where)
    running_output = xp.zeros((*batch, q_len, v.shape[-1]), dtype=q.dtype, device=where)
    blocks = []
    for start in range(0, k_len, block_size):
        stop = min(start + block_size, k_len)
        k_block, v_block = k[..., start:stop, :], v[..., start:stop, :]
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported just below
            scores = (q @ k_block.mT) * scale  # (..., q_pos, block)
        allowed_block = _block_mask(xp, allowed, causal, q_len, start, stop, where)
        if allowed_block is not None:
            scores = xp.where(allowed_block, scores, -math.inf)
        if bool(xp.any(xp.isnan(scores) | (scores == math.inf))):
            raise AttentionInputError(
                "Some attention scores overflowed to infinity: the inputs are too large for "
                f"{q.dtype}. Scale Q and K down (or use float64)."
            )
        block_max = xp.max(scores, axis=-1)  # (..., q_pos)
        new_max = xp.maximum(running_max, block_max)
        # A query that has seen only masked keys keeps m = -inf; shifting it by 0 instead keeps
        # every exp() at exactly 0 rather than exp(-inf + inf) = NaN.
        shift = xp.where(xp.isfinite(new_max), new_max, 0.0)
        # The old sum and output were computed relative to the old maximum; re-base them.
        rescale = xp.exp(running_max - shift)
        # Every exponent is <= 0 (s_j <= m_new), so nothing overflows whatever the scores.
        p = xp.exp(scores - shift[..., None])  # (..., q_pos, block)
        running_sum = running_sum * rescale + xp.sum(p, axis=-1)
        running_output = running_output * rescale[..., None] + p @ v_block
        running_max = new_max
        if return_blocks:
            blocks.append(
                OnlineSoftmaxBlock(
                    start,
                    stop,
                    scores,
                    block_max,
                    running_max,
                    rescale,
                    running_sum,
                    running_output,
                    _normalise(xp, running_output, running_sum),
                )
            )
    fully_masked = running_sum == 0
    with np.errstate(divide="ignore"):
        logsumexp = xp.where(
            fully_masked, -math.inf, running_max + xp.log(xp.where(fully_masked, 1.0, running_sum))
        )
    return ChunkedAttention(
        _normalise(xp, running_output, running_sum),
        running_max,
        running_sum,
        logsumexp,
        fully_masked,
        block_size,
        float(scale),
        tuple(blocks),
    )


def _block_mask(
    xp: Any, allowed: Any, causal: bool, q_len: int, start: int, stop: int, where: Any
) -> Any:
    """The (..., q_pos, block) slice of the mask, built only for this block."""
    block = None
    if allowed is not None:
        block = allowed if allowed.shape[-1] == 1 else allowed[..., start:stop]
    if causal:
        # torch's is_causal: query i may attend to keys j <= i (top-left aligned).
        keys = xp.arange(start, stop, device=where)[None, :]
        triangle = keys <= xp.arange(q_len, device=where)[:, None]
        block = triangle if block is None else block & triangle
    return block


def _normalise(xp: Any, output: Any, total: Any) -> Any:
    # o / l turns the exp-weighted sum into a convex combination; l = 0 means nothing visible.
    total = total[..., None]
    return xp.where(total > 0, output / xp.where(total > 0, total, 1.0), 0.0)


def online_softmax_weights(result: ChunkedAttention) -> np.ndarray:
    """The softmax weights the running state implies after each block.

    weights[t, ..., i, j] = exp(s_ij - m_t) / l_t for the keys j read by block t (j < stop_t),
    NaN for keys not read yet. The last slice is the full softmax: the rescaling never changes
    the ratios between keys already read, only the denominator they share.
    Shape `(n_blocks, ..., q_pos, k_pos)`; needs `chunked_attention(..., return_blocks=True)`.
    """
    if not isinstance(result, ChunkedAttention) or not result.blocks:
        raise AttentionInputError(
            "online_softmax_weights needs the per-block state: call "
            "chunked_attention(..., return_blocks=True)."
        )
    scores = np.concatenate([block.scores for block in result.blocks], axis=-1)
    check_size((len(result.blocks), *scores.shape), "The weights after every block")
    out = np.full((len(result.blocks), *scores.shape), np.nan, dtype=scores.dtype)
    for t, block in enumerate(result.blocks):
        m = np.where(np.isfinite(block.running_max), block.running_max, 0)[..., None]
        total = block.running_sum[..., None]
        seen = scores[..., : block.stop]
        out[t, ..., : block.stop] = np.divide(
            np.exp(seen - m), total, out=np.zeros_like(seen), where=total > 0
        )
    return out
