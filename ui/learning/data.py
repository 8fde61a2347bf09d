"""What the learning page reads out of a trained checkpoint, cached for every viewer of the link.

Each reading is milliseconds of arithmetic on a small model, computed in the caller's thread
(`lane=None`) once per run, step and choice: the run's key and the step stand for its
parameters in the cache's key (`_params` is not hashed).

    curves(run)                         the run's scores and losses by step, as arrays
    readings(key, step, _params, settings)   ablations, composition, copying of every head
    gradients(key, step, _params, settings)  one backward pass on the held-out example
    circuits(key, step, _params, layer, head, through)   a head's QK and OV circuits
    removed(key, step, _params, settings, mask)          the losses with some heads removed
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.training.attn_only import (
    attn_only_gradients,
    next_token_loss,
    run_attn_only,
)
from attention_core.training.circuits import (
    CompositionScores,
    ablation_losses,
    composition_scores,
    copied_share,
    copying_score,
    ov_circuit,
    positional_qk,
    qk_circuit,
    random_composition,
)
from attention_core.training.formation import (
    INDUCTION_HEAD,
    PREVIOUS_TOKEN_HEAD,
    chance_scores,
    formations,
)
from attention_core.training.run import HELD_OUT_COUNT, Evaluation, TrainingSettings, evaluate
from attention_core.training.sequences import HeldOut, held_out
from ui.models.toy import TrainingRun
from ui.widgets.byte_cache import MB, bounded_by_bytes, read_only


def head_ids(n_layers: int, n_heads: int) -> list[str]:
    """Every head's name, layer.head from 0 (TransformerLens's way), layer by layer."""
    return [f"{layer}.{head}" for layer in range(n_layers) for head in range(n_heads)]


def probe_of(settings: TrainingSettings) -> HeldOut:
    config = settings.config
    return held_out(settings.seed, HELD_OUT_COUNT, config.n_ctx, config.d_vocab)


@dataclass(frozen=True, eq=False)
class Curves:
    """A run's numbers by step: steps `(chunk,)`; losses `(chunk,)`; previous and induction
    `(chunk, layer, head)`; when the first induction head formed (None: not yet); chance
    scores of attention spread evenly."""

    steps: np.ndarray
    train: np.ndarray
    first: np.ndarray
    repeated: np.ndarray
    previous: np.ndarray
    induction: np.ndarray
    formed: int | None
    chance_previous: float
    chance_induction: float

    def best_induction(self) -> tuple[int, int, float]:
        """(layer, head, score) of the head with the highest prefix matching at the last step."""
        last = self.induction[-1]
        layer, head = np.unravel_index(int(np.argmax(last)), last.shape)
        return int(layer), int(head), float(last[layer, head])


def curves(run: TrainingRun) -> Curves:
    """The run's curves so far (cheap: read off its chunks at each poll)."""
    chunks = run.chunks
    evaluations = [chunk.evaluation for chunk in chunks]
    steps = np.array([chunk.step for chunk in chunks])
    induction = np.stack([e.induction for e in evaluations])
    found = formations(steps, induction, INDUCTION_HEAD)
    config = run.settings.config
    chance_previous, chance_induction = chance_scores(config.n_ctx, config.n_ctx // 2)
    return Curves(
        steps=steps,
        train=np.array([chunk.train_loss for chunk in chunks]),
        first=np.array([e.loss_first for e in evaluations]),
        repeated=np.array([e.loss_repeated for e in evaluations]),
        previous=np.stack([e.previous for e in evaluations]),
        induction=induction,
        formed=found[0].step if found else None,
        chance_previous=chance_previous,
        chance_induction=chance_induction,
    )


def strongest_previous(curves: Curves, before_layer: int) -> tuple[int, int] | None:
    """The head of an earlier layer with the highest previous-token score at the end, if it
    passes the line."""
    last = curves.previous[-1, :before_layer]
    if last.size == 0 or last.max() < PREVIOUS_TOKEN_HEAD:
        return None
    layer, head = np.unravel_index(int(np.argmax(last)), last.shape)
    return int(layer), int(head)


@dataclass(frozen=True, eq=False)
class Readings:
    """A checkpoint's heads read as circuits.

    whole                  the held-out evaluation with every head
    first, repeated        `(layer, head)` losses with that head removed
    copying, copied        `(layer, head)` copying scores and copied shares of the OV circuits
    compositions           `CompositionScores` of every pair of layers, earlier first
    baseline               the composition score of random matrices of these sizes
    """

    whole: Evaluation
    first: np.ndarray
    repeated: np.ndarray
    copying: np.ndarray
    copied: np.ndarray
    compositions: tuple[CompositionScores, ...]
    baseline: float


@bounded_by_bytes(8 * MB, name="learning.readings", lane=None, max_entries=32)
def readings(key: str, step: int, _params: dict, settings: TrainingSettings) -> Readings:
    config = settings.config
    whole, first, repeated = ablation_losses(config, _params, probe_of(settings))
    heads = [(layer, head) for layer in range(config.n_layers) for head in range(config.n_heads)]
    shape = (config.n_layers, config.n_heads)
    copying = np.array([copying_score(_params, *h) for h in heads]).reshape(shape)
    copied = np.array([copied_share(ov_circuit(_params, *h)) for h in heads]).reshape(shape)
    pairs = [(a, b) for a in range(config.n_layers) for b in range(a + 1, config.n_layers)]
    return read_only(
        Readings(
            whole,
            first,
            repeated,
            copying,
            copied,
            tuple(composition_scores(_params, a, b) for a, b in pairs),
            random_composition(config.d_model, config.d_head),
        )
    )


@dataclass(frozen=True, eq=False)
class ExampleGradients:
    """One backward pass of the loss on the held-out example (every prediction counted).

    loss                       its mean loss (nats)
    weights, d_weights, d_scaled   `(layer, head, n, n)`: P, dP and dS of every head
    norms                      `(layer, head, 4)`: ‖dW_Q‖, ‖dW_K‖, ‖dW_V‖, ‖dW_O‖ of each head
    key_bias, query_bias       the largest |db_K| and |db_Q| of the model
    """

    loss: float
    weights: np.ndarray
    d_weights: np.ndarray
    d_scaled: np.ndarray
    norms: np.ndarray
    key_bias: float
    query_bias: float


@bounded_by_bytes(8 * MB, name="learning.gradients", lane=None, max_entries=16)
def gradients(key: str, step: int, _params: dict, settings: TrainingSettings) -> ExampleGradients:
    config = settings.config
    example = probe_of(settings).example
    forward = run_attn_only(config, _params, example)
    loss, loss_grads = next_token_loss(forward)
    backward = attn_only_gradients(config, _params, forward, loss_grads)
    blocks = backward.blocks
    heads = config.n_heads

    def per_head(d_w: np.ndarray) -> np.ndarray:  # (d_model, d_model) rows or columns by head
        return np.linalg.norm(d_w.reshape(heads, -1), axis=1)

    norms = np.stack([
        np.stack([per_head(b.d_w_q), per_head(b.d_w_k), per_head(b.d_w_v),
                  per_head(b.d_w_o.T)], axis=-1)
        for b in blocks
    ])  # fmt: skip
    grads = backward.params
    return read_only(
        ExampleGradients(
            loss=loss,
            weights=np.stack([b.attention.weights for b in forward.blocks])[:, 0],
            d_weights=np.stack([b.attention.d_weights for b in blocks])[:, 0],
            d_scaled=np.stack([b.attention.d_scaled for b in blocks])[:, 0],
            norms=norms.reshape(config.n_layers, heads, 4),
            key_bias=max(
                float(np.abs(grads[f"blocks.{i}.attn.b_K"]).max()) for i in range(config.n_layers)
            ),
            query_bias=max(
                float(np.abs(grads[f"blocks.{i}.attn.b_Q"]).max()) for i in range(config.n_layers)
            ),
        )
    )


@dataclass(frozen=True, eq=False)
class HeadCircuits:
    """A head's circuits: qk over `qk_over`, "positions" or "tokens" (direct, or through an
    earlier head: `through`), ov over tokens, and its copying score and copied share."""

    qk: np.ndarray
    qk_over: str
    through: tuple[int, int] | None
    ov: np.ndarray
    copying: float
    copied: float


@bounded_by_bytes(16 * MB, name="learning.circuits", lane=None, max_entries=16)
def circuits(
    key: str,
    step: int,
    _params: dict,
    layer: int,
    head: int,
    over: str,
    through: tuple[int, int] | None,
) -> HeadCircuits:
    """Head (layer, head)'s QK circuit read `over` "tokens" (through an earlier head's output,
    if `through` names one) or "positions", and its OV circuit."""
    with np.errstate(over="ignore", invalid="ignore"):  # a file's huge weights: inf cells, drawn
        if over == "positions":
            qk, through = positional_qk(_params, layer, head), None
        else:
            qk = qk_circuit(_params, layer, head, through=through)
        ov = ov_circuit(_params, layer, head)
    return read_only(
        HeadCircuits(qk, over, through, ov, copying_score(_params, layer, head), copied_share(ov))
    )


@bounded_by_bytes(MB, name="learning.removed", lane=None, max_entries=64)
def removed(
    key: str,
    step: int,
    _params: dict,
    settings: TrainingSettings,
    mask: tuple[tuple[float, ...], ...],
) -> Evaluation:
    """The held-out evaluation with the heads whose multiplier in `mask` is 0 removed."""
    return read_only(
        evaluate(settings.config, _params, probe_of(settings), head_mask=np.array(mask))
    )
