"""Attention is not explanation: four answers to "which tokens does token i's new vector come
from?", and how far they agree.

For one query position i of one layer, over the keys j:

    attention    ā_ij = (1/H) Σ_h α_h,ij                       the raw pattern, heads averaged
    rollout      R_l[i, j]                                     attention_rollout (probing): the
                                                               residual added, layers multiplied
    norm         ‖Σ_h α_h,ij · v_h,j W_O,hᵀ‖                    what token j really adds to the
                                                               layer's output (Kobayashi et al.
                                                               2020): a large weight on a small
                                                               or cancelled value adds little
    ablation     how much a readout at i moves when token j is hidden from every query
                 (the model run again: models.hiding)

They are compared by rank: Spearman's ρ, the Pearson correlation of the ranks (average ranks
for ties): 1 when two measures order the keys the same way, 0 when their orders are unrelated.
"""

from __future__ import annotations

import numpy as np

from .validation import AttentionInputError, as_float_array, check_int

__all__ = ["norm_contributions", "rank_correlation", "ranks"]


def norm_contributions(weights: object, values: object, w_o: object, query: int) -> np.ndarray:
    """`(k_pos,)`: ‖Σ_h α_h,ij · v_h,j W_O,hᵀ‖ for query `query` (from 0) over every key j.

    weights `(head, q_pos, k_pos)` softmax weights of one layer, values `(head, k_pos, d_head)`
    the value vectors each head read (a grouped-query model repeats its KV heads first),
    w_o `(d_model, head·d_head)` (nn.Linear layout). The output bias, if any, is left out: it
    is added whatever the weights are, so it comes from no token.
    """
    w = as_float_array(weights, "weights", min_ndim=3, max_ndim=3)
    v = as_float_array(values, "values", min_ndim=3, max_ndim=3)
    o = as_float_array(w_o, "w_o", min_ndim=2, max_ndim=2)
    heads, q_pos, k_pos = w.shape
    if v.shape[:2] != (heads, k_pos) or o.shape[1] != heads * v.shape[2]:
        raise AttentionInputError(
            f"The shapes do not fit: weights {w.shape} (head, query, key), values {v.shape} "
            f"(head, key, d_head), W_O {o.shape} (d_model, head·d_head)."
        )
    query = check_int(query, "the query position", minimum=0)
    if query >= q_pos:
        raise AttentionInputError(f"Query {query + 1} does not exist: there are {q_pos}.")
    # f_h(v_j) = v_h,j W_O,hᵀ: each key's value as it lands in the residual stream.
    w_per_head = o.reshape(o.shape[0], heads, v.shape[2])  # (d_model, head, d_head)
    landed = np.einsum("hkd,mhd->hkm", v, w_per_head)  # (head, k_pos, d_model)
    added = np.einsum("hk,hkm->km", w[:, query], landed)  # (k_pos, d_model), summed over heads
    return np.linalg.norm(added, axis=-1)


def ranks(values: object) -> np.ndarray:
    """`(n,)` ranks from 1 (the smallest), ties given the mean of the ranks they span."""
    x = as_float_array(values, "values", min_ndim=1, max_ndim=1)
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    # Each run of equal values shares the average of the positions it covers (1-based).
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], x.size]
    average = (starts + ends + 1) / 2.0
    out = np.empty(x.size)
    out[order] = np.repeat(average, ends - starts)
    return out


def rank_correlation(a: object, b: object) -> float:
    """Spearman's ρ of two `(n,)` measures: the Pearson correlation of their ranks, in [-1, 1].

    NaN when either measure gives every key the same value (no order to compare).
    """
    ra, rb = ranks(a), ranks(b)
    if ra.shape != rb.shape:
        raise AttentionInputError(f"Two measures of different lengths: {ra.size} and {rb.size}.")
    if ra.size < 2:
        raise AttentionInputError("A rank correlation needs at least two keys.")
    da, db = ra - ra.mean(), rb - rb.mean()
    spread = np.sqrt((da @ da) * (db @ db))
    return float(da @ db / spread) if spread > 0 else float("nan")
