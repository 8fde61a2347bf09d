"""Why a head attends there: one attention score split exactly into the parts that made it.

A head of layer L reads the residual stream x_i `(d_model,)` at every position, and the stream
is a sum of what wrote it, C sources (the embeddings, each earlier head, each earlier MLP, the
biases they add): x_i = Σ_c x_{c,i}. With the norm's per-position scale r_i held at its value
in the run (TransformerLens's decompositions hold it the same way), the norm is affine in x:

    RMSNorm     n(x)_i = γ ⊙ r_i x_i                        r_i = 1/√(mean(x_i²) + ε)
    LayerNorm   n(x)_i = γ ⊙ r_i (x_i − mean(x_i)) + β      r_i = 1/√(var(x_i) + ε)

so a query is a sum of parts, one per source and one constant (the norm's β and the
projection's bias):

    q_i = R_i (W_q n(x)_i + b_q) = Σ_c R_i W_q (γ ⊙ r_i x̄_{c,i}) + R_i (W_q β + b_q)

(x̄ centred for a LayerNorm, R_i the rotation of RoPE, the identity without it), keys alike, and
the score is exactly the sum of one term per query part × key part:

    s_ij = scale · q_i · k_j = Σ_c Σ_c' scale · q_{c,i} · k_{c',j}

RoPE turns each 2-D pair of a head's dimensions by its own frequency, so the same score is also
a sum over those pairs, fastest turning first (``frequency_terms``), and the score without the
rotation is the content alone.

Everything here is a pure function of arrays; which sources a model has, and where its trace
keeps them, is ``attention_core.models.score_sources``'s job.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.positional import rotate_half_pairs
from attention_core.validation import AttentionInputError

__all__ = [
    "HeadParts",
    "above_average",
    "band_edges",
    "band_terms",
    "frequency_terms",
    "head_parts",
    "held_scales",
    "normed_parts",
    "score_terms",
    "sharpest_queries",
    "source_map",
]


def normed_parts(
    parts: np.ndarray,
    row_scales: np.ndarray,
    gamma: np.ndarray | None,
    beta: np.ndarray | None = None,
    *,
    centred: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The norm applied to each source with its scale held: `(C, n, d_model)` and the constant
    part `(d_model,)` (β; None without one).

    parts `(C, n, d_model)` the sources, summing to the stream the norm read; row_scales `(n,)`
    the r_i the norm used on that stream; ``centred`` for a LayerNorm (each part loses its own
    mean, so the parts' sum loses the stream's). γ None: a model without a norm (the parts pass
    unchanged, r_i = 1).
    """
    if centred:
        parts = parts - parts.mean(axis=-1, keepdims=True)
    scaled = parts * row_scales[:, None]
    return (scaled if gamma is None else scaled * gamma), beta


def held_scales(stream: np.ndarray, eps: float, *, centred: bool) -> np.ndarray:
    """r_i `(n,)` of an RMSNorm (or, ``centred``, a LayerNorm) on `stream` `(n, d_model)`: the
    number the norm multiplied each row by, held fixed in the split."""
    if centred:
        stream = stream - stream.mean(axis=-1, keepdims=True)
    return 1.0 / np.sqrt(np.mean(np.square(stream), axis=-1) + eps)


@dataclass(frozen=True)
class HeadParts:
    """One head's queries or keys split by source.

    parts     `(C + 1, n, d_head)`  each source's share of q (or k) at every position, the
                                     last one the constant (norm's β through W, and the bias),
                                     rotated with the positions when the model uses RoPE
    unrotated `(n, d_head)`         q (or k) before the rotation, the parts summed (equal to
                                     `total` without a rotation)
    """

    parts: np.ndarray
    unrotated: np.ndarray

    @property
    def total(self) -> np.ndarray:
        """`(n, d_head)` q (or k) itself: the parts' sum."""
        return self.parts.sum(axis=0)


def head_parts(
    normed: np.ndarray,
    constant: np.ndarray | None,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    rotation: tuple[np.ndarray, np.ndarray] | None = None,
) -> HeadParts:
    """Each source's part of one head's q (or k): `HeadParts` with C + 1 parts.

    normed `(C, n, d_model)` and constant `(d_model,)` or None from ``normed_parts``; weight
    `(d_head, d_model)` this head's rows of W_q (or W_k), bias `(d_head,)` its b; rotation the
    (cos, sin) tables `(n, d_head)` of ``positional.rotary_tables`` for these positions, applied
    to every part (a rotation is linear, so the rotated parts still sum to the rotated q).
    """
    n = normed.shape[1]
    sources = normed @ weight.T  # (C, n, d_head)
    fixed = np.zeros(weight.shape[0], dtype=sources.dtype)
    if constant is not None:
        fixed = fixed + weight @ constant
    if bias is not None:
        fixed = fixed + bias
    unrotated = np.concatenate([sources, np.broadcast_to(fixed, (1, n, fixed.shape[0]))])
    if rotation is None:
        return HeadParts(unrotated, unrotated.sum(axis=0))
    return HeadParts(rotate_half_pairs(unrotated, *rotation), unrotated.sum(axis=0))


def score_terms(query: np.ndarray, keys: np.ndarray, scale: float) -> np.ndarray:
    """`(Cq, Ck, k_pos)` scale · q_c · k_c' for every query part and key part at every key.

    query `(Cq, d_head)`: one position's parts (``HeadParts.parts[:, i]``); keys `(Ck, k_pos,
    d_head)`. Summed over both part axes this is the score of each key, s_ij."""
    if query.shape[-1] != keys.shape[-1]:
        raise AttentionInputError(
            f"The query parts have {query.shape[-1]} dimensions and the key parts "
            f"{keys.shape[-1]}: they must come from one head."
        )
    return scale * np.einsum("ad,bkd->abk", query, keys)


def frequency_terms(query: np.ndarray, keys: np.ndarray, scale: float) -> np.ndarray:
    """`(d_head / 2, k_pos)` the score of each key split over RoPE's 2-D pairs, fastest turning
    pair first: pair p is dimensions (p, p + d/2) in the rotate-half layout, turned by
    base^(-2p/d) per position, and contributes scale · (q_p k_p + q_{p+d/2} k_{p+d/2}).

    query `(d_head,)` rotated q_i; keys `(k_pos, d_head)` rotated k_j. The rows sum to the
    scores."""
    half = query.shape[-1] // 2
    products = scale * query * keys  # (k_pos, d_head)
    return (products[:, :half] + products[:, half:]).T


def band_edges(pairs: int, bands: int) -> np.ndarray:
    """`(bands + 1,)` where each band of pairs starts, fastest first, in nearly equal bands."""
    if not 1 <= bands <= pairs:
        raise AttentionInputError(
            f"{bands} bands cannot split {pairs} pairs: choose from 1 to {pairs}."
        )
    return np.linspace(0, pairs, bands + 1).round().astype(int)


def band_terms(pairs: np.ndarray, bands: int) -> np.ndarray:
    """`(bands, k_pos)` ``frequency_terms``' pairs `(d_head/2, k_pos)` summed in bands of
    neighbouring frequencies, fastest first (``band_edges``)."""
    edges = band_edges(pairs.shape[0], bands)
    return np.add.reduceat(pairs, edges[:-1], axis=0)


def above_average(side: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """`(C, k_pos)` each source's part of each visible key's score minus its mean over the
    visible keys (0 at hidden ones).

    The softmax ignores whatever adds the same to every key, so what makes one key more
    attractive than the others is a part's excess over its average: these rows sum to the
    key's score minus the visible keys' mean score. side `(C, k_pos)` (``key_side`` or
    ``query_side``), visible `(k_pos,)` bool, the keys the query may see.
    """
    visible = np.asarray(visible, dtype=bool)
    if not visible.any():
        raise AttentionInputError("This query sees no key: there is no score to split.")
    mean = side[:, visible].mean(axis=1, keepdims=True)
    return np.where(visible, side - mean, 0.0)


def source_map(
    key_sides: np.ndarray, weights: np.ndarray, visible: np.ndarray, queries: np.ndarray
) -> np.ndarray:
    """`(C, k_pos)` what each source wrote at each key, over a whole pattern: for the chosen
    queries i, Σ_i P_ij · (its part of s_ij above the visible keys' average), so the keys that
    queries really attend carry the weight.

    key_sides `(n, C, k_pos)` (``HeadSplit.key_sides``); weights `(n, k_pos)` the head's
    pattern; visible `(n, k_pos)` bool, the keys each query may see (the causal mask); queries
    the positions to sum over."""
    total = np.zeros(key_sides.shape[1:], dtype=np.float64)
    for i in np.asarray(queries, dtype=int):
        total += weights[i] * above_average(key_sides[i], visible[i])
    return total


def sharpest_queries(weights: np.ndarray, count: int) -> np.ndarray:
    """`(count,)` the positions whose attention is most concentrated (highest largest weight),
    in position order: the queries where the head does what it does."""
    count = max(1, min(int(count), weights.shape[0]))
    return np.sort(np.argsort(-weights.max(axis=1), kind="stable")[:count])
