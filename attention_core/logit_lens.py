"""Reading the residual stream in the vocabulary: the logit lens and direct logit attribution.

A decoder's residual stream at one position is a sum of what wrote to it: the token's
embedding, then each layer's attention heads and MLP,

    r_L = e + Σ_l (Σ_h a_{l,h} + m_l)                                    (d_model,)

and its next-token logits read the final stream through one RMSNorm and the unembedding E:

    logits = (γ ⊙ r_L / ρ(r_L)) Eᵀ,      ρ(r) = √(mean(r²) + ε)                  (vocab,)

The logit lens (nostalgebraist 2020) reads every earlier stream r_l the same way, as if the
model stopped after layer l: when does the answer appear? Direct logit attribution splits one
logit (or the difference of two) into what each writer added. With the norm's scale 1/ρ(r_L)
frozen at its value on this input, the logit is linear in the stream, so each part gets

    dla(c) = (γ ⊙ E_t) · c / ρ(r_L)          and   Σ over all parts = logit_t

exactly (the parts sum to r_L). Frozen is the honest word: removing a part would also change
ρ, which this split does not follow.

A model whose last norm is a LayerNorm (GPT-2) reads γ ⊙ (r − mean(r)) / σ(r) + β instead,
σ(r) = √(var(r) + ε). Centring is linear too, so with 1/σ(r_L) frozen each part gets
((γ ⊙ E_t) − mean(γ ⊙ E_t)) · c / σ(r_L), and β · E_t is one more, fixed, part. ``FinalNorm``
is either norm, as a model gives it (``model.final_norm``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .softmax import log_sum_exp
from .validation import AttentionInputError, as_float_array, check_int

__all__ = [
    "FinalNorm",
    "LogitAttribution",
    "LogitLens",
    "direct_logit_attribution",
    "head_writes",
    "logit_lens",
    "norm_scale",
]


def norm_scale(residual: object, eps: float, *, centred: bool = False) -> np.ndarray:
    """1/ρ(r) = 1/√(mean(r²) + ε) over the last axis, `(...,)`: what RMSNorm multiplies by;
    ``centred``, 1/σ(r) = 1/√(var(r) + ε), LayerNorm's."""
    r = as_float_array(residual, "residual", min_ndim=1)
    if centred:
        r = r - r.mean(axis=-1, keepdims=True)
    return 1.0 / np.sqrt(np.mean(np.square(r), axis=-1) + eps)


@dataclass(frozen=True, eq=False)
class FinalNorm:
    """A model's last norm, the one its head reads the stream through:

        RMSNorm    N(r) = γ ⊙ r · s(r),                  s(r) = 1/√(mean(r²) + ε)
        LayerNorm  N(r) = γ ⊙ (r − mean(r)) · s(r) + β,  s(r) = 1/√(var(r) + ε)

    kind "RMSNorm" (Llama, Qwen2) or "LayerNorm" (GPT-2); gain γ and bias β `(d_model,)`
    (β None for RMSNorm)."""

    kind: str
    gain: np.ndarray
    eps: float
    bias: np.ndarray | None = None

    @property
    def centred(self) -> bool:
        return self.kind == "LayerNorm"

    def scale(self, residual: object) -> np.ndarray:
        """s(r) `(...,)`, what the norm multiplies by."""
        return norm_scale(residual, self.eps, centred=self.centred)

    def __call__(self, residual: np.ndarray) -> np.ndarray:
        """N(r) `(..., d_model)`, every row by its own scale."""
        r = residual - residual.mean(axis=-1, keepdims=True) if self.centred else residual
        normed = r * self.scale(residual)[..., None] * self.gain
        return normed if self.bias is None else normed + self.bias

    def readout(self, direction: np.ndarray, scale: float) -> np.ndarray:
        """w `(d_model,)` with N(c) · u = c · w (+ β · u) for s frozen at ``scale``: the
        direction u seen through the frozen norm (centring moves to w: (c − c̄) · v = c · (v −
        v̄))."""
        w = scale * self.gain * direction
        return w - w.mean() if self.centred else w

    def check(self, width: int) -> None:
        for name, value in (("gain", self.gain), ("bias", self.bias)):
            if value is not None and np.shape(value) != (width,):
                raise AttentionInputError(
                    f"The norm's {name} has shape {np.shape(value)} but the stream is {width} wide."
                )


@dataclass(frozen=True, eq=False)
class LogitLens:
    """The residual stream after each stage read as a next-token prediction.

    residuals       `(stage, d_model)`   stage 0 the embedding, stage l the stream after layer l
    logits          `(stage, vocab)`     (γ ⊙ r_l / ρ(r_l)) Eᵀ
    log_normalizer  `(stage,)`           log Σ_v exp(logits_v): log p_t = logits_t − this
    """

    residuals: np.ndarray
    logits: np.ndarray
    log_normalizer: np.ndarray

    def log_probs(self) -> np.ndarray:
        """`(stage, vocab)` log softmax of each stage's logits."""
        return self.logits.astype(np.float64) - self.log_normalizer[:, None]

    def probability(self, token: int) -> np.ndarray:
        """`(stage,)` the probability of `token` after each stage."""
        return self.probabilities([[self._token(token)]])[:, 0]

    def probabilities(self, tokens: object) -> np.ndarray:
        """`(stage, k)` the probability of each of `tokens` after its stage: `(stage, k)` a row
        of ids per stage, as `top` gives them, or `(1, k)` the same ids at every stage. A few
        exponentials, not the vocabulary's."""
        ids = np.asarray(tokens)
        chosen = np.take_along_axis(self.logits, ids, axis=-1).astype(np.float64)
        return np.exp(chosen - self.log_normalizer[:, None])

    def rank(self, token: int) -> np.ndarray:
        """`(stage,)` where `token` stands after each stage: 1 = the most likely."""
        z = self.logits[:, self._token(token)]
        return 1 + (self.logits > z[:, None]).sum(axis=-1)

    def top(self, count: int) -> np.ndarray:
        """`(stage, count)` the most likely token ids after each stage, best first; of two equal
        logits the lower token id first, as a stable sort of the vocabulary would give."""
        count = min(check_int(count, "count", minimum=1), self.logits.shape[-1])
        # Only the logits at or above each stage's count-th largest are sorted, not the vocabulary.
        kth = count - 1
        floor = -np.partition(-self.logits, kth, axis=-1)[:, kth]
        rows = []
        for stage, logits in enumerate(self.logits):
            candidates = np.flatnonzero(logits >= floor[stage])
            rows.append(candidates[np.argsort(-logits[candidates], kind="stable")[:count]])
        return np.stack(rows)

    def _token(self, token: int) -> int:
        token = check_int(token, "the token id", minimum=0)
        if token >= self.logits.shape[-1]:
            raise AttentionInputError(
                f"Token id {token} is past the vocabulary's {self.logits.shape[-1]} tokens."
            )
        return token


def logit_lens(
    residuals: object,
    gain: object,
    unembed: Callable[[np.ndarray], np.ndarray],
    eps: float | None = None,
) -> LogitLens:
    """Read `residuals` `(stage, d_model)` through the final norm and `unembed` (x ↦ x Eᵀ,
    `(stage, d_model)` -> `(stage, vocab)`: the model's head). ``gain`` is the model's
    ``FinalNorm``, or the final RMSNorm's γ `(d_model,)` with its ``eps``."""
    r = as_float_array(residuals, "residuals", min_ndim=2, max_ndim=2)
    norm = _final_norm(gain, eps, r.shape[1])
    # Each stage is normalised by its own scale: the lens asks "what if the model stopped here".
    normed = norm(r)
    logits = np.asarray(unembed(normed.astype(np.float32)), dtype=np.float32)
    # The softmax's denominator, once: each probability read later is then one exponential.
    log_normalizer = log_sum_exp(logits.astype(np.float64))
    return LogitLens(residuals=r, logits=logits, log_normalizer=log_normalizer)


def head_writes(head_outputs: object, w_o: object) -> np.ndarray:
    """What each head adds to the residual stream: a_h = z_h W_O,hᵀ, `(head, n, d_model)`.

    head_outputs `(head, n, d_head)` (each head's weighted sum of values), w_o
    `(d_model, head·d_head)` (nn.Linear layout). Their sum over heads is concat(z) W_Oᵀ.
    """
    z = as_float_array(head_outputs, "head_outputs", min_ndim=3, max_ndim=3)
    w = as_float_array(w_o, "w_o", min_ndim=2, max_ndim=2)
    heads, _, d_head = z.shape
    if w.shape[1] != heads * d_head:
        raise AttentionInputError(
            f"W_O has {w.shape[1]} input columns but {heads} heads of width {d_head} need "
            f"{heads * d_head}."
        )
    # W_O's columns h·d_head .. (h+1)·d_head - 1 read head h's output.
    w_per_head = w.reshape(w.shape[0], heads, d_head)  # (d_model, head, d_head)
    return np.einsum("hnd,mhd->hnm", z, w_per_head)


@dataclass(frozen=True, eq=False)
class LogitAttribution:
    """One logit (or a difference of two) split into what each writer of the stream added.

    embedding   float                 the token's own embedding
    heads       `(layer, head)`       each attention head
    mlps        `(layer,)`            each MLP
    scale       float                 1/ρ(r_L) (1/σ(r_L) for a LayerNorm), frozen at its value
                                      on this input
    logit       float                 the logit (difference) the parts add up to
    fixed       float                 what no token moves: the biases every pass adds (GPT-2's
                                      attention output bias b_O of every layer, its final β)
    """

    embedding: float
    heads: np.ndarray
    mlps: np.ndarray
    scale: float
    logit: float
    fixed: float = 0.0

    @property
    def total(self) -> float:
        """Σ of every part: equal to `logit` (up to rounding), since the parts sum to r_L."""
        return float(self.embedding + self.heads.sum() + self.mlps.sum() + self.fixed)


def direct_logit_attribution(
    embedding: object,
    heads: object,
    mlps: object,
    gain: object,
    direction: object,
    eps: float | None = None,
    *,
    biases: object = None,
) -> LogitAttribution:
    """Split the logit along `direction` (E_t, or E_t − E_u for a difference) over the parts of
    the final residual stream: `embedding` `(d_model,)`, `heads` `(layer, head, d_model)`,
    `mlps` `(layer, d_model)` and `biases` `(layer, d_model)` (what each layer's attention adds
    besides its heads, GPT-2's b_O; none by default), which sum to r_L. `gain` is the model's
    ``FinalNorm``, or the final RMSNorm's γ with its ``eps``."""
    e = as_float_array(embedding, "embedding", min_ndim=1, max_ndim=1)
    a = as_float_array(heads, "heads", min_ndim=3, max_ndim=3)
    m = as_float_array(mlps, "mlps", min_ndim=2, max_ndim=2)
    u = as_float_array(direction, "direction", min_ndim=1, max_ndim=1)
    b = np.zeros_like(m) if biases is None else as_float_array(biases, "biases", min_ndim=2,
                                                                max_ndim=2)  # fmt: skip
    width = e.shape[0]
    if {a.shape[-1], m.shape[-1], b.shape[-1], u.shape[0]} != {width} or {
        a.shape[0],
        b.shape[0],
    } != {m.shape[0]}:
        raise AttentionInputError(
            f"The parts do not fit together: embedding {e.shape}, heads {a.shape}, MLPs "
            f"{m.shape}, direction {u.shape}."
        )
    norm = _final_norm(gain, eps, width)
    final = e + a.sum(axis=(0, 1)) + m.sum(axis=0) + b.sum(axis=0)  # r_L, what the logits read
    scale = float(norm.scale(final))
    # The norm is frozen: each part's logit is a dot product with one readout vector.
    readout = norm.readout(u, scale)  # (d_model,)
    shift = 0.0 if norm.bias is None else float(norm.bias @ u)  # β · u: LayerNorm's bias
    return LogitAttribution(
        embedding=float(e @ readout),
        heads=a @ readout,
        mlps=m @ readout,
        scale=scale,
        logit=float(final @ readout) + shift,
        fixed=float(b.sum(axis=0) @ readout) + shift,
    )


def _final_norm(gain: object, eps: float | None, width: int) -> FinalNorm:
    """``gain`` as a ``FinalNorm`` (an RMSNorm γ with ``eps``), checked against the width."""
    if not isinstance(gain, FinalNorm):
        g = as_float_array(gain, "gain", min_ndim=1, max_ndim=1)
        if g.shape[0] != width:
            raise AttentionInputError(
                f"The gain has {g.shape[0]} entries but the residuals are {width} wide."
            )
        if eps is None:
            raise AttentionInputError("An RMSNorm's gain needs its eps.")
        return FinalNorm("RMSNorm", g, eps)
    gain.check(width)
    return gain
