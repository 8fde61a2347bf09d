"""Probing trained models: attention rollout, a joint query-key map, the sentence vector.

Standard ways to read many heads at once, each a pure NumPy function of arrays a model already
produced, returning its steps:

    attention_rollout(weights)          Abnar & Zuidema (2020): heads averaged, the residual
                                        added as 0.5·I, layers multiplied from the first upward
    joint_query_key_projection(q, k)    AttentionViz (Yeh et al. 2023): one head's queries and
                                        keys in one 2-D PCA picture
    sentence_embedding(hidden, keep)    all-MiniLM-L6-v2's sentence vector: mean pooling, then L2

Running a model again with a token, a key or a head taken away is ``models.hiding``.

Shapes follow the package: patterns `(layer, head, q_pos, k_pos)`, q and k `(pos, d_head)`.
Attention flow (the max-flow variant of rollout in the same paper) is not computed: it solves a
max-flow problem per pair of tokens, which costs far more than the page's budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.validation import AttentionInputError

__all__ = [
    "QueryKeyProjection",
    "Rollout",
    "attention_rollout",
    "joint_query_key_projection",
    "sentence_embedding",
]


# -- attention rollout --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Rollout:
    """Attention rollout's steps, in order. `n` = number of tokens, `L` = number of layers.

    head_mean      `(L, n, n)`  Ā_l, each layer's weights averaged over its heads
    with_residual  `(L, n, n)`  A'_l = renormalised rows of (1 - r)·Ā_l + r·I
    cumulative     `(L, n, n)`  R_l = A'_l · A'_{l-1} ⋯ A'_1, the rollout up to layer l
    rollout        `(n, n)`     R_L: row i says how much of position i's top-layer vector can be
                                traced back, through attention and residuals, to input token j
    """

    head_mean: np.ndarray
    with_residual: np.ndarray
    cumulative: np.ndarray

    @property
    def rollout(self) -> np.ndarray:
        return self.cumulative[-1]


def attention_rollout(weights: object, residual: float = 0.5) -> Rollout:
    """Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

        Ā_l  = mean over heads of A_{l,h}                                    (n, n) per layer
        A'_l = rownorm((1 - r)·Ā_l + r·I)            r = ``residual``, 0.5 in the paper
        R_1  = A'_1,    R_l = A'_l · R_{l-1}         so R_L = A'_L ⋯ A'_2 A'_1

    ``weights`` `(layer, head, q_pos, k_pos)`, softmax rows (a square pattern per head: self-
    attention). Layers are ordered from the input upward, as ``BertTrace.attention_weights``.
    ``residual`` in [0, 1]: the share a token keeps of itself through the skip connection.
    """
    a = np.asarray(weights, dtype=np.float64)
    if a.ndim != 4 or a.shape[-1] != a.shape[-2] or a.shape[-1] == 0:
        raise AttentionInputError(
            f"Rollout needs self-attention weights shaped (layer, head, n, n), got {a.shape}."
        )
    if not 0.0 <= residual <= 1.0:
        raise AttentionInputError(f"residual must be between 0 and 1, got {residual}.")
    n = a.shape[-1]
    # Heads of one layer act in parallel on the same input, so the paper simply averages them.
    head_mean = a.mean(axis=1)  # (layer, n, n)
    # The skip connection passes each token's own vector up unchanged: the identity, mixed in.
    mixed = (1.0 - residual) * head_mean + residual * np.eye(n)
    with_residual = mixed / mixed.sum(axis=-1, keepdims=True)
    # Layer l reads the mixture that layers 1..l-1 already made, so the maps compose by
    # multiplication, newest on the left.
    cumulative = np.empty_like(with_residual)
    cumulative[0] = with_residual[0]
    for layer in range(1, a.shape[0]):
        cumulative[layer] = with_residual[layer] @ cumulative[layer - 1]
    return Rollout(head_mean=head_mean, with_residual=with_residual, cumulative=cumulative)


# -- the joint query-key map --------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class QueryKeyProjection:
    """One head's queries and keys in one 2-D PCA picture. `n` = tokens, `d` = d_head.

    scale              s: queries were multiplied by s and keys divided by s
    shift              `(d,)`  added to every (scaled) key so the key mean is the query mean
    queries, keys      `(n, d)` the rows that were projected (scaled and shifted)
    mean               `(d,)`  mean of the stacked 2n rows, subtracted before the PCA
    components         `(2, d)` the first two principal directions (rows, unit length)
    query_xy, key_xy   `(n, 2)` coordinates in the picture
    explained          `(2,)`   share of the stacked rows' variance along each direction
    """

    scale: float
    shift: np.ndarray
    queries: np.ndarray
    keys: np.ndarray
    mean: np.ndarray
    components: np.ndarray
    query_xy: np.ndarray
    key_xy: np.ndarray
    explained: np.ndarray


def joint_query_key_projection(q: object, k: object) -> QueryKeyProjection:
    """Queries and keys of one head projected together to 2-D, the way AttentionViz does.

    Two changes first, neither of which moves any attention weight:

        s   = sqrt(mean‖k_j‖ / mean‖q_i‖);  q ← s·q,  k ← k / s     q·k is unchanged
        k   ← k + (mean(q) - mean(k))                               q·(k + c) = q·k + q·c: the
                                                                    same for every key of a
                                                                    row, so softmax ignores it
    Then PCA of the stacked rows X = [q; k] `(2n, d)`, with our own SVD:

        X - mean(X) = U S Vᵀ,   coordinates = (X - mean(X)) V[:, :2],
        explained variance share = S² / Σ S²

    Without the changes queries and keys often sit in two far-apart clouds and the picture only
    shows that gap; with them, a query lies near the keys it attends to. (AttentionViz scales to
    equal mean norms and translates keys; here the norms are balanced first, then the keys are
    moved, so the two means coincide exactly.) Each direction's sign is fixed so that its
    largest entry is positive (as scikit-learn's ``svd_flip``), so the picture does not flip
    between runs. ``q`` and ``k`` `(n, d)` for the same n tokens.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if q.ndim != 2 or k.ndim != 2 or q.shape[1] != k.shape[1] or q.shape[0] == 0:
        raise AttentionInputError(
            f"q and k must be (tokens, d_head) matrices of the same width, got {q.shape} and "
            f"{k.shape}."
        )
    if q.shape[1] < 2 or q.shape[0] + k.shape[0] < 3:
        raise AttentionInputError("A 2-D map needs d_head ≥ 2 and at least 3 rows in all.")
    q_norm = np.linalg.norm(q, axis=1).mean()
    k_norm = np.linalg.norm(k, axis=1).mean()
    scale = float(np.sqrt(k_norm / q_norm)) if q_norm > 0 and k_norm > 0 else 1.0
    queries = q * scale
    keys = k / scale
    shift = queries.mean(axis=0) - keys.mean(axis=0)  # (d,)
    keys = keys + shift
    stacked = np.concatenate([queries, keys])  # (2n, d)
    mean = stacked.mean(axis=0)
    _, s, vt = np.linalg.svd(stacked - mean, full_matrices=False)
    components = vt[:2]  # (2, d)
    biggest = np.argmax(np.abs(components), axis=1)
    components = components * np.sign(components[np.arange(2), biggest])[:, None]
    xy = (stacked - mean) @ components.T  # (2n, 2)
    variance = s**2
    explained = variance[:2] / variance.sum() if variance.sum() > 0 else np.zeros(2)
    n = q.shape[0]
    return QueryKeyProjection(
        scale=scale,
        shift=shift,
        queries=queries,
        keys=keys,
        mean=mean,
        components=components,
        query_xy=xy[:n],
        key_xy=xy[n:],
        explained=explained,
    )


def sentence_embedding(hidden: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """The sentence vector of sentence-transformers' all-MiniLM-L6-v2: mean pooling, then L2.

        e = Σ_i keep_i · h_i / Σ_i keep_i,    embedding = e / ‖e‖

    ``hidden`` `(n, d_model)` the last layer's output, ``keep`` `(n,)` boolean (the tokens the
    attention mask lets in; all of them when None). Returns `(d_model,)`.
    """
    hidden = np.asarray(hidden, dtype=np.float64)
    keep = np.ones(hidden.shape[0], dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    pooled = hidden[keep].mean(axis=0)
    return pooled / np.linalg.norm(pooled)
