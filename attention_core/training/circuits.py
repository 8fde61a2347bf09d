"""Reading a trained attention-only model's heads as circuits (Elhage et al. 2021).

A head's attention scores and what it writes are two bilinear maps of the residual stream,
in TransformerLens's layout (row vectors, `x @ W`):

    W_QK = W_Q W_Kᵀ   `(d_model, d_model)`   score(x_q, x_k) ∝ x_q W_QK x_kᵀ   (biases aside)
    W_OV = W_V W_O    `(d_model, d_model)`   what it writes = Σ_k weight_k · x_k W_OV

Read over the vocabulary, through the embedding and the unembedding:

    qk_circuit      W_E W_QK Wᵀ_key   (vocab, vocab)  how much query token a attends to key b,
                    with the key side the token itself (W_key = W_E) or what a layer-0 head
                    wrote into it (W_key = W_E W_OV of that head: K-composition)
    positional_qk   W_pos W_QK W_posᵀ (n_ctx, n_ctx)  the same between positions
    ov_circuit      W_E W_OV W_U      (vocab, vocab)  how attending to token a moves each logit
    copying_score   Σᵢ λᵢ / Σᵢ |λᵢ| of the OV circuit's eigenvalues: 1 for a head that copies
                    the token it attends to, −1 for one that suppresses it
    copied_share    the share of tokens whose own logit an OV circuit raises most
    composition_scores   ‖W_A W_B‖_F / (‖W_A‖_F ‖W_B‖_F) between a layer-0 head's W_OV and a
                    later head's matrix: how much the later head reads what the earlier wrote,
                    into its queries (Q: W_OV W_QK), keys (K: W_OV W_QKᵀ) or values (V: W_OV W_OV)
    random_composition   the same score between random matrices of these shapes: the baseline
    ablation_losses      the held-out losses with each head removed in turn
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..validation import AttentionInputError, check_int
from .attn_only import AttnOnlyConfig
from .run import Evaluation, evaluate
from .sequences import HeldOut

__all__ = [
    "CompositionScores",
    "ablation_losses",
    "composition_scores",
    "copied_share",
    "copying_score",
    "ov_circuit",
    "positional_qk",
    "qk_circuit",
    "random_composition",
    "w_ov",
    "w_qk",
]

Params = Mapping[str, np.ndarray]


def _head(params: Params, layer: int, head: int) -> str:
    name = f"blocks.{check_int(layer, 'layer', minimum=0)}.attn"
    if f"{name}.W_Q" not in params:
        raise AttentionInputError(f"The model has no layer {layer}.")
    heads = params[f"{name}.W_Q"].shape[0]
    if not 0 <= check_int(head, "head", minimum=0) < heads:
        raise AttentionInputError(f"Layer {layer} has heads 0 to {heads - 1}, not {head}.")
    return name


def w_qk(params: Params, layer: int, head: int) -> np.ndarray:
    """W_Q W_Kᵀ `(d_model, d_model)` of head (layer, head)."""
    attn = _head(params, layer, head)
    return params[f"{attn}.W_Q"][head] @ params[f"{attn}.W_K"][head].T


def w_ov(params: Params, layer: int, head: int) -> np.ndarray:
    """W_V W_O `(d_model, d_model)` of head (layer, head)."""
    attn = _head(params, layer, head)
    return params[f"{attn}.W_V"][head] @ params[f"{attn}.W_O"][head]


def qk_circuit(
    params: Params, layer: int, head: int, *, through: tuple[int, int] | None = None
) -> np.ndarray:
    """`(vocab, vocab)`: query token a (rows) against key token b (columns), W_E W_QK Wᵀ_key,
    divided by √d_head as the scores are.

    `through=(layer, head)` of an earlier head: the key side is what that head writes when it
    attends to b, W_E W_OV (K-composition; an induction head reads its previous-token head's
    write this way, and its circuit is then bright on the diagonal: a query attends to keys
    whose previous token is the query's own token).
    """
    w_e = params["embed.W_E"]
    keys = w_e if through is None else w_e @ w_ov(params, *through)
    if through is not None and through[0] >= layer:
        raise AttentionInputError(
            f"Head {through[0]}.{through[1]} is not in an earlier layer than layer {layer}: only "
            "an earlier head's output is in the stream a head reads its keys from."
        )
    d_head = params[f"{_head(params, layer, head)}.W_Q"].shape[-1]
    return w_e @ w_qk(params, layer, head) @ keys.T / np.sqrt(d_head)


def positional_qk(params: Params, layer: int, head: int) -> np.ndarray:
    """`(n_ctx, n_ctx)`: query position (rows) against key position, W_pos W_QK W_posᵀ / √d_head.
    A previous-token head in layer 0 is bright one below the diagonal."""
    w_pos = params["pos_embed.W_pos"]
    d_head = params[f"{_head(params, layer, head)}.W_Q"].shape[-1]
    return w_pos @ w_qk(params, layer, head) @ w_pos.T / np.sqrt(d_head)


def ov_circuit(params: Params, layer: int, head: int) -> np.ndarray:
    """`(vocab, vocab)`: row a is how the logits (columns) move when the head attends with all
    its weight to token a, W_E W_OV W_U (the direct path to the logits)."""
    return params["embed.W_E"] @ w_ov(params, layer, head) @ params["unembed.W_U"]


def copying_score(params: Params, layer: int, head: int) -> float:
    """Σᵢ λᵢ / Σᵢ |λᵢ| over the eigenvalues λ of the head's OV circuit, in [−1, 1].

    W_E W_V W_O W_U has rank at most d_head, and its nonzero eigenvalues are those of
    W_O W_U W_E W_V `(d_head, d_head)` (a cyclic product has the same spectrum), which is what
    is decomposed. Σλ is real (it is the trace); positive means the head raises the logit of
    the token it attends to, as a copying head does."""
    attn = _head(params, layer, head)
    small = (
        params[f"{attn}.W_O"][head] @ params["unembed.W_U"] @ params["embed.W_E"]
        @ params[f"{attn}.W_V"][head]
    )  # fmt: skip
    eigenvalues = np.linalg.eigvals(small.astype(np.float64))
    magnitude = np.abs(eigenvalues).sum()
    return float(eigenvalues.sum().real / magnitude) if magnitude > 0 else 0.0


def copied_share(ov: np.ndarray) -> float:
    """The share of rows a of an OV circuit `(vocab, vocab)` whose largest entry is on the
    diagonal: attending to token a raises a's own logit more than any other's."""
    ov = np.asarray(ov)
    return float(np.mean(ov.argmax(axis=1) == np.arange(len(ov))))


def _score(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@dataclass(frozen=True, eq=False)
class CompositionScores:
    """How each later head reads each earlier head's output, `(earlier, later)` head pairs of
    two layers: q, k, v `(heads, heads)`, rows the earlier layer's heads."""

    earlier: int
    later: int
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray


def composition_scores(params: Params, earlier: int = 0, later: int = 1) -> CompositionScores:
    """The Q-, K- and V-composition scores between every head of layer `earlier` (writing) and
    every head of layer `later` (reading)."""
    if later <= earlier:
        raise AttentionInputError("A head composes only with heads of earlier layers.")
    heads = params[f"{_head(params, later, 0)}.W_Q"].shape[0]
    _head(params, earlier, 0)
    scores = np.zeros((3, heads, heads))
    for i in range(heads):
        written = w_ov(params, earlier, i)
        for j in range(heads):
            reads = w_qk(params, later, j)
            scores[:, i, j] = (
                _score(written, reads),  # into the query: x_q W_OV W_QK
                _score(written, reads.T),  # into the key: score = x_q W_QK (x_k W_OV)ᵀ
                _score(written, w_ov(params, later, j)),  # into the value
            )
    return CompositionScores(earlier, later, *scores)


def random_composition(d_model: int, d_head: int, samples: int = 200, seed: int = 0) -> float:
    """The mean composition score of random low-rank matrices of these sizes, `(d_model, d_head)
    @ (d_head, d_model)` each: a score near it says nothing. Seeded, so the same every time."""
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    total = 0.0
    for _ in range(check_int(samples, "samples", minimum=1)):
        a, b, c, d = (
            rng.standard_normal(shape) for shape in [(d_model, d_head), (d_head, d_model)] * 2
        )
        total += _score(a @ b, c @ d)
    return total / samples


def ablation_losses(
    config: AttnOnlyConfig, params: Params, probe: HeldOut
) -> tuple[Evaluation, np.ndarray, np.ndarray]:
    """The held-out evaluation of the whole model, and the losses `(layer, head)` on first-seen
    and on repeated tokens with each head removed alone (its output set to zero)."""
    whole = evaluate(config, params, probe)
    first = np.zeros((config.n_layers, config.n_heads))
    repeated = np.zeros_like(first)
    for layer in range(config.n_layers):
        for head in range(config.n_heads):
            mask = np.ones((config.n_layers, config.n_heads))
            mask[layer, head] = 0.0
            removed = evaluate(config, params, probe, head_mask=mask)
            first[layer, head], repeated[layer, head] = removed.loss_first, removed.loss_repeated
    return whole, first, repeated
