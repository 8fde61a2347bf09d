"""What a language model's next-token distribution costs and how far two of them are apart.

For logits z over a vocabulary of V tokens (p = softmax(z)), all in nats:

    log_softmax(z)              log p_v = z_v − log Σ_u exp(z_u)
    next_token_losses(z, t)     −log p_t for each row's target t          (rows,)
    token_losses(z, ids)        the same along a text: row i predicts token i + 1
    kl_divergence(z_p, z_q)     KL(p ‖ q) = Σ_v p_v (log p_v − log q_v)

Each is worked in float64 from the row's maximum (``softmax.log_sum_exp``), so nothing overflows
and a probability that underflows to 0 still has its exact log. The mean of a text's losses is
its cross-entropy, and exp of that its perplexity.
"""

from __future__ import annotations

import numpy as np

from .softmax import log_sum_exp
from .validation import AttentionInputError, as_float_array

__all__ = ["kl_divergence", "log_softmax", "next_token_losses", "token_losses"]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax(x) over the last axis: exact even where softmax underflows to 0."""
    return logits - log_sum_exp(logits)[..., None]


def next_token_losses(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """−log softmax(logits)[target] `(rows,)` for logits `(rows, vocab)` and targets `(rows,)`,
    in nats, worked in float64 (a copy: the caller's logits are left as they are)."""
    logits = logits.astype(np.float64)
    # −log softmax(z)_t = log Σ exp(z − max) − (z_t − max), exact where p underflows;
    # worked in place, so that a block holds one (rows, vocab) array, not three.
    logits -= logits.max(axis=-1, keepdims=True)
    target_logits = logits[np.arange(targets.size), targets]
    return np.log(np.exp(logits, out=logits).sum(axis=-1)) - target_logits


def token_losses(logits: object, input_ids: object) -> np.ndarray:
    """`(n - 1,)`: the loss of predicting each next token, −log softmax(logits_i)[id_{i+1}].

    logits `(n, vocab)` (position i predicts token i + 1), input_ids `(n,)`. In nats; the mean
    over a span is its cross-entropy, exp of it the perplexity.
    """
    z = as_float_array(logits, "logits", min_ndim=2, max_ndim=2)
    ids = np.asarray(input_ids)
    if ids.shape != (z.shape[0],) or not np.issubdtype(ids.dtype, np.integer):
        raise AttentionInputError(
            f"input_ids must be {z.shape[0]} whole numbers, one per row of logits, got shape "
            f"{ids.shape}."
        )
    if z.shape[0] < 2:
        raise AttentionInputError("A loss needs at least two tokens: one to read, one to predict.")
    # The last position has no next token to predict.
    return next_token_losses(z[:-1], ids[1:])


def kl_divergence(logits_p: object, logits_q: object) -> float | np.ndarray:
    """KL(p ‖ q) = Σ_v p_v (log p_v - log q_v) for p = softmax(logits_p), q = softmax(logits_q),
    in nats: 0 when the two distributions agree, growing as q misses p's mass.

    Both `(V,)`, a float; or both `(rows, V)`, one KL per row `(rows,)` (a text's positions at
    once, as ``llama.compare_next_tokens`` reads them)."""
    log_p = log_softmax(np.asarray(logits_p, dtype=np.float64))
    log_q = log_softmax(np.asarray(logits_q, dtype=np.float64))
    if log_p.shape != log_q.shape or log_p.ndim not in (1, 2):
        raise AttentionInputError(
            "Both logits must be (vocab,) or (rows, vocab), of one shape, got "
            f"{log_p.shape} and {log_q.shape}."
        )
    kl = np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)
    return float(kl) if log_p.ndim == 1 else kl
