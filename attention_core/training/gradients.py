"""The backward pass of this package's formulas, each written once and returning its steps.

For a loss ℓ and a forward y = f(x), a backward function takes dY = ∂ℓ/∂y and returns
dX = ∂ℓ/∂x, a vector-Jacobian product: the Jacobian itself is never built. Each one reads the
Steps its forward returned, as autograd reads what it saved (P is a pattern, S the scores the
softmax read, O the output, s the score scale, N the number of predictions counted):

    softmax_backward        dS = P ⊙ (dP − Σ_j P_j dP_j)                         softmax
    attention_backward      dV = Pᵀ dO,  dP = dO Vᵀ,  dS as above,
                            dQ = s·dS K,  dK = s·dSᵀ Q                  scaled_dot_product_attention
    multi_head_backward     dW_o = dOᵀ concat, db_o = Σ dO, dconcat = dO W_o, then attention
                            per head, dW_q = dQᵀ X, db_q = Σ dQ, dX = dQ W_q + dK W_k + dV W_v
                                                                         multi_head_attention
    cross_entropy_backward  dZ = (softmax(Z) − onehot(t)) / N, rows not counted 0
                                                                         losses.log_softmax
    unembed_backward        dW_U = Xᵀ dZ,  db_U = Σ dZ,  dX = dZ W_Uᵀ     logits = X W_U + b_U
    embedding_backward      dW_E = onehot(tokens)ᵀ dX,  dW_pos[t] = Σ_batch dX[:, t]
                                                                         X = W_E[tokens] + W_pos

Sums over a batch follow the forward's broadcasting: a parameter used by every row gets the sum
of their gradients. A masked key has weight exactly 0, so its dS is exactly 0: no gradient
reaches a key a query may not see, and a fully masked row passes none at all. Like the forwards,
these run on NumPy arrays and on torch tensors alike (`tests/test_gradients.py` holds them to
`torch.autograd`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..attention import AttentionSteps
from ..multihead import (
    MultiHeadParams,
    MultiHeadSteps,
    merge_heads_unchecked,
    split_heads_unchecked,
)
from ..softmax import row_sums
from ..validation import AttentionInputError, array_namespace, device

__all__ = [
    "AttentionGrads",
    "CrossEntropyGrads",
    "EmbeddingGrads",
    "MultiHeadGrads",
    "SoftmaxGrads",
    "UnembedGrads",
    "attention_backward",
    "cross_entropy_backward",
    "embedding_backward",
    "multi_head_backward",
    "softmax_backward",
    "unembed_backward",
]


def _check_same_shape(a: Any, b: Any, name_a: str, name_b: str) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise AttentionInputError(
            f"{name_a} has shape {tuple(a.shape)} but {name_b} has {tuple(b.shape)}: a gradient "
            "has the shape of what it is the gradient of."
        )


def _sum_to(grad: Any, shape: tuple[int, ...]) -> Any:
    """`grad` summed over the axes the forward broadcast to reach its shape from `shape`."""
    xp = array_namespace(grad)
    extra = grad.ndim - len(shape)
    if extra:
        grad = xp.sum(grad, axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = xp.sum(grad, axis=stretched, keepdims=True)
    return grad


# -- softmax and attention ----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SoftmaxGrads:
    """The softmax's backward step, `(..., n)` each (the softmax over the last axis).

    d_weights  dP        the gradient arriving at the weights
    row_dot    Σ_j P_j dP_j `(..., 1)`: the weights' own average of dP, which every entry of the
               row gives back (the weights sum to 1, so raising one lowers the others)
    d_scores   dS = P ⊙ (dP − row_dot): what reaches the softmax's input
    """

    d_weights: Any
    row_dot: Any
    d_scores: Any


def softmax_backward(weights: Any, d_weights: Any) -> SoftmaxGrads:
    """The gradient at the softmax's input from the gradient at its output P = `weights`.

    dS_i = Σ_j (∂P_j/∂S_i) dP_j = P_i (dP_i − Σ_j P_j dP_j), the Jacobian diag(P) − P Pᵀ
    (`softmax.softmax_jacobian`) applied without being built. A weight of 0 (a masked key)
    passes no gradient, and a nearly one-hot row passes almost none: a saturated softmax learns
    slowly, which is why scores are divided by √d_k.
    """
    _check_same_shape(weights, d_weights, "d_weights", "the weights")
    row_dot = row_sums(weights * d_weights)  # (..., 1)
    d_scores = d_weights - row_dot
    d_scores *= weights  # in place: one (..., n) array fewer for a pattern's size
    return SoftmaxGrads(d_weights, row_dot, d_scores)


@dataclass(frozen=True, eq=False)
class AttentionGrads:
    """Every step of scaled dot-product attention's backward pass, in the order it happens.

    d_output  `(..., q_pos, d_v)`    dO, the gradient arriving at the output
    d_v       `(..., k_pos, d_v)`    Pᵀ dO: each value row collects what its weights sent it
    d_weights `(..., q_pos, k_pos)`  dP = dO Vᵀ: how much more each key's value was wanted
    softmax   SoftmaxGrads           dP through the softmax; `d_scaled` = its d_scores
    d_scores  `(..., q_pos, k_pos)`  s·dS, at the raw scores Q Kᵀ (0 wherever the mask blocks)
    d_q       `(..., q_pos, d_k)`    d_scores K: a query moves toward keys it should weigh more
    d_k       `(..., k_pos, d_k)`    d_scoresᵀ Q
    """

    d_output: Any
    d_v: Any
    d_weights: Any
    softmax: SoftmaxGrads
    d_scores: Any
    d_q: Any
    d_k: Any

    @property
    def d_scaled(self) -> Any:
        """dS `(..., q_pos, k_pos)`, at the scaled (and masked) scores the softmax read."""
        return self.softmax.d_scores


def attention_backward(
    steps: AttentionSteps, q: Any, k: Any, v: Any, d_output: Any
) -> AttentionGrads:
    """The gradients of scaled dot-product attention (`attention.scaled_dot_product_attention`,
    whose `steps` these are) at q, k and v, from dO = `d_output`.

        dV = Pᵀ dO       dP = dO Vᵀ       dS = P ⊙ (dP − rowsum(P ⊙ dP))
        dQ = s·dS K      dK = s·dSᵀ Q     (s the scale, 1/√d_k by default)

    The mask needs no step of its own: a blocked key's weight is exactly 0, so its dS is too.
    Leading axes that q, k or v broadcast over (keys and values shared by a group of heads)
    get the sum of their gradients.
    """
    _check_same_shape(steps.output, d_output, "d_output", "the attention's output")
    weights = steps.weights  # (..., q_pos, k_pos)
    # Every value row was added into each output row with its weight.
    d_v = _sum_to(weights.mT @ d_output, tuple(v.shape))  # (..., k_pos, d_v)
    d_weights = d_output @ v.mT  # (..., q_pos, k_pos)
    softmax = softmax_backward(weights, d_weights)
    d_scores = softmax.d_scores * steps.scale  # (..., q_pos, k_pos)
    d_q = _sum_to(d_scores @ k, tuple(q.shape))  # (..., q_pos, d_k)
    d_k = _sum_to(d_scores.mT @ q, tuple(k.shape))  # (..., k_pos, d_k)
    return AttentionGrads(d_output, d_v, d_weights, softmax, d_scores, d_q, d_k)


# -- multi-head attention -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MultiHeadGrads:
    """Every step of multi-head attention's backward pass, in the order it happens, in
    `nn.MultiheadAttention`'s layout (`multihead.MultiHeadParams`).

    d_output        `(..., q_pos, d_model)`       dO, arriving at the output
    d_w_o, d_b_o    `(d_model, d_model)`, `(d_model,)`   dOᵀ concat, Σ dO
    d_concat        `(..., q_pos, d_model)`       dO W_o: what each head's columns owe
    d_head_outputs  `(..., head, q_pos, d_head)`  d_concat split into heads (times head_mask)
    attention       AttentionGrads, per head      into dQ, dK, dV of every head
    d_q, d_k, d_v   `(..., pos, d_model)`         the heads merged back
    d_w_q, d_w_k, d_w_v, d_b_q, d_b_k, d_b_v      the projections' gradients
    d_x_q           `(..., q_pos, d_model)`       dQ W_q, back to the query input
    d_x_kv          `(..., k_pos, d_model)`       dK W_k + dV W_v, back to the key/value input
    """

    d_output: Any
    d_w_o: Any
    d_b_o: Any
    d_concat: Any
    d_head_outputs: Any
    attention: AttentionGrads
    d_q: Any
    d_k: Any
    d_v: Any
    d_w_q: Any
    d_w_k: Any
    d_w_v: Any
    d_b_q: Any
    d_b_k: Any
    d_b_v: Any
    d_x_q: Any
    d_x_kv: Any

    @property
    def d_input(self) -> Any:
        """dX of self-attention, where one input gave queries, keys and values: d_x_q + d_x_kv."""
        return self.d_x_q + self.d_x_kv


def _outer_sum(a: Any, b: Any) -> Any:
    """Σ over every leading axis of aᵀ b, `(a's last, b's last)`: a weight's gradient, dYᵀ X
    for y = x Wᵀ + b (torch's layout) or Xᵀ dY for y = x W + b (TransformerLens's)."""
    return a.reshape(-1, a.shape[-1]).mT @ b.reshape(-1, b.shape[-1])


def _times(x: Any, m: Any) -> Any:
    """x m `(..., k)` for x `(..., n)` and m `(n, k)`: one product over every leading position
    at once (NumPy multiplies a stack of matrices one matrix at a time)."""
    return (x.reshape(-1, x.shape[-1]) @ m).reshape(*x.shape[:-1], m.shape[-1])


def _bias_grad(d_y: Any) -> Any:
    """Σ over every leading position of dY `(..., n)` -> `(n,)` (a bias adds to each)."""
    rows = d_y.reshape(-1, d_y.shape[-1])
    if isinstance(rows, np.ndarray):  # a product with ones: BLAS sums the rows in one pass
        return np.ones(rows.shape[0], dtype=rows.dtype) @ rows
    return array_namespace(rows).sum(rows, axis=0)


def multi_head_backward(
    steps: MultiHeadSteps,
    params: MultiHeadParams | Mapping[str, Any],
    d_output: Any,
    *,
    head_mask: Any = None,
) -> MultiHeadGrads:
    """The gradients of `multihead.multi_head_attention` (its `steps`, run with `params` and
    `head_mask` `(head,)`) at every parameter and both inputs, from dO = `d_output`. `params`
    may also be its arrays by field name (`w_q`, `w_k`, `w_v`, `w_o`, …).

        dW_o = dOᵀ concat        db_o = Σ dO          dconcat = dO W_o
        d head_h = dconcat_h · m_h, then attention_backward per head -> dQ_h, dK_h, dV_h
        dW_q = dQᵀ X_q           db_q = Σ dQ          dX_q = dQ W_q   (and likewise K, V)

    (Sums over every position and batch row: each used the same weights.)
    """
    _check_same_shape(steps.output, d_output, "d_output", "the multi-head output")
    num_heads = steps.q_heads.shape[-3]
    w = params if isinstance(params, Mapping) else vars(params)
    d_concat = _times(d_output, w["w_o"])  # (..., q_pos, d_model)
    d_head_outputs = split_heads_unchecked(d_concat, num_heads)  # (..., head, q_pos, d_head)
    if head_mask is not None:
        # Each head's output was multiplied by its m_h before the concatenation.
        xp = array_namespace(d_head_outputs)
        d_head_outputs = (
            d_head_outputs * xp.asarray(head_mask, dtype=d_head_outputs.dtype)[:, None, None]
        )
    attention = attention_backward(
        steps.attention, steps.q_heads, steps.k_heads, steps.v_heads, d_head_outputs
    )
    d_q, d_k, d_v = (
        merge_heads_unchecked(g) for g in (attention.d_q, attention.d_k, attention.d_v)
    )
    return MultiHeadGrads(
        d_output=d_output,
        d_w_o=_outer_sum(d_output, steps.concat),
        d_b_o=_bias_grad(d_output),
        d_concat=d_concat,
        d_head_outputs=d_head_outputs,
        attention=attention,
        d_q=d_q,
        d_k=d_k,
        d_v=d_v,
        d_w_q=_outer_sum(d_q, steps.x_q),
        d_w_k=_outer_sum(d_k, steps.x_kv),
        d_w_v=_outer_sum(d_v, steps.x_kv),
        d_b_q=_bias_grad(d_q),
        d_b_k=_bias_grad(d_k),
        d_b_v=_bias_grad(d_v),
        d_x_q=_times(d_q, w["w_q"]),
        # Keys and values were both made from x_kv: their paths back add up.
        d_x_kv=_times(d_k, w["w_k"]) + _times(d_v, w["w_v"]),
    )


# -- the loss, the unembedding and the embeddings -------------------------------------------------


@dataclass(frozen=True, eq=False)
class CrossEntropyGrads:
    """The mean next-token loss's backward step.

    probabilities  `(..., vocab)`  softmax(logits): what the model predicted
    d_logits       `(..., vocab)`  (P − onehot(target)) / N where counted, else 0: every logit
                                   is pushed down by its probability, the target's pulled up by 1
    count          int             N, the predictions the mean is over
    """

    probabilities: Any
    d_logits: Any
    count: int


def cross_entropy_backward(log_probs: Any, targets: Any, counted: Any = None) -> CrossEntropyGrads:
    """The gradient of ℓ = mean over counted rows of −log softmax(z)[target] at the logits z,
    from their log-softmax `log_probs` `(..., vocab)` (`losses.log_softmax`, which gives the
    loss too). targets `(...)` integer ids, counted `(...)` bool (None: every row).

    ∂ℓ/∂z_v = (p_v − [v = t]) / N: a prediction that is already right (p_t = 1) passes none.
    """
    xp = array_namespace(log_probs)
    if tuple(targets.shape) != tuple(log_probs.shape[:-1]):
        raise AttentionInputError(
            f"targets have shape {tuple(targets.shape)} but the logits "
            f"{tuple(log_probs.shape)}: one target token per row of logits."
        )
    where = device(log_probs)
    if counted is None:
        counted = xp.ones(tuple(targets.shape), dtype=xp.bool, device=where)
    count = int(xp.sum(xp.astype(counted, xp.int64)))
    if count == 0:
        raise AttentionInputError("No prediction is counted: the loss is a mean over none.")
    # A probability whose share of the gradient, p/N, would be a subnormal number (under the
    # dtype's smallest normal, 1.2e-38 in float32) counts as 0: subnormal operands make every
    # product after it 20 to 30 times slower here (a confident model's tiny probabilities), and
    # no weight could move by so little.
    floor = math.log(float(xp.finfo(log_probs.dtype).smallest_normal) * count)
    probabilities = xp.where(log_probs > floor, xp.exp(xp.maximum(log_probs, floor)), 0.0)
    vocab = log_probs.shape[-1]
    target_hot = xp.astype(targets[..., None] == xp.arange(vocab, device=where), log_probs.dtype)
    weight = xp.astype(counted, log_probs.dtype)[..., None] / count
    return CrossEntropyGrads(probabilities, (probabilities - target_hot) * weight, count)


@dataclass(frozen=True, eq=False)
class UnembedGrads:
    """logits = X W_U + b_U, backward: d_w_u `(d_model, vocab)`, d_b_u `(vocab,)`, d_x
    `(..., d_model)`, what reaches the residual stream."""

    d_w_u: Any
    d_b_u: Any
    d_x: Any


def unembed_backward(x: Any, w_u: Any, d_logits: Any) -> UnembedGrads:
    """The unembedding's gradients: dW_U = Xᵀ dZ, db_U = Σ dZ, dX = dZ W_Uᵀ (TransformerLens's
    layout, `x @ W_U + b_U`, W_U `(d_model, vocab)`)."""
    if tuple(d_logits.shape) != (*x.shape[:-1], w_u.shape[-1]):
        raise AttentionInputError(
            f"d_logits has shape {tuple(d_logits.shape)} but the logits of x "
            f"{tuple(x.shape)} and W_U {tuple(w_u.shape)} have {(*x.shape[:-1], w_u.shape[-1])}."
        )
    return UnembedGrads(
        d_w_u=_outer_sum(x, d_logits),
        d_b_u=_bias_grad(d_logits),
        d_x=_times(d_logits, w_u.mT),
    )


@dataclass(frozen=True, eq=False)
class EmbeddingGrads:
    """X = W_E[tokens] + W_pos[:pos], backward: d_w_e `(vocab, d_model)`, each token's row the
    sum of dX at every place it was read; d_w_pos `(n_ctx, d_model)`, each position's row the sum
    of dX there over the batch (rows past the sequence get 0)."""

    d_w_e: Any
    d_w_pos: Any


def embedding_backward(tokens: Any, d_x: Any, vocab: int, n_ctx: int) -> EmbeddingGrads:
    """The embeddings' gradients from dX `(batch, pos, d_model)` at the residual stream's start.

        dW_E = onehot(tokens)ᵀ dX        dW_pos[t] = Σ_batch dX[:, t]

    A token that was not in the batch gets a zero row: no gradient, only weight decay, moves it.
    """
    xp = array_namespace(d_x)
    if tuple(tokens.shape) != tuple(d_x.shape[:-1]):
        raise AttentionInputError(
            f"tokens have shape {tuple(tokens.shape)} but d_x {tuple(d_x.shape)}: one gradient "
            "row per token read."
        )
    if tokens.shape[-1] > n_ctx:
        raise AttentionInputError(f"{tokens.shape[-1]} positions do not fit n_ctx = {n_ctx}.")
    where = device(d_x)
    one_hot = xp.astype(tokens[..., None] == xp.arange(vocab, device=where), d_x.dtype)
    d_w_e = _outer_sum(one_hot, d_x)  # (vocab, d_model)
    positions, width = tokens.shape[-1], d_x.shape[-1]
    by_position = xp.sum(xp.reshape(d_x, (-1, positions, width)), axis=0)  # (pos, d_model)
    unread = xp.zeros((n_ctx - positions, width), dtype=d_x.dtype, device=where)
    d_w_pos = xp.concat([by_position, unread], axis=0)  # (n_ctx, d_model)
    return EmbeddingGrads(d_w_e, d_w_pos)
