"""AdamW (Loshchilov & Hutter 2019), one parameter at a time, returning every step of the update.

For a parameter θ with gradient g at step t (from 1), learning rate η, decay λ, β₁, β₂, ε:

    θ ← θ − η λ θ                          weight decay, decoupled from the gradient
    m ← β₁ m + (1 − β₁) g                  a running mean of the gradient
    v ← β₂ v + (1 − β₂) g²                 a running mean of its square
    m̂ = m / (1 − β₁ᵗ),  v̂ = v / (1 − β₂ᵗ)  both started at 0, so divided up early on
    θ ← θ − η m̂ / (√v̂ + ε)                 a step of about η in every coordinate at first

as `torch.optim.AdamW` computes it (its defaults: β = (0.9, 0.999), ε = 1e-8, λ = 0.01). The
division by √v̂ gives every coordinate a step of similar size however large its gradient: a
head whose gradients are tiny (a softmax that saturated) still moves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..validation import AttentionInputError, array_namespace, check_int, check_real

__all__ = ["AdamW", "AdamWState", "AdamWSteps", "adamw_step", "adamw_update"]


@dataclass(frozen=True)
class AdamW:
    """The optimiser's settings, torch's defaults but the learning rate."""

    lr: float
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        lr = check_real(self.lr, "The learning rate")
        if lr <= 0:
            raise AttentionInputError(
                f"The learning rate must be greater than 0, got {lr:g}: it is the size of each "
                "step downhill (3e-3 is a good start here)."
            )
        for beta in self.betas:
            if not 0 <= check_real(beta, "β") < 1:
                raise AttentionInputError(f"β₁ and β₂ must be in [0, 1), got {self.betas}.")
        check_real(self.eps, "ε", positive=True)
        if check_real(self.weight_decay, "The weight decay") < 0:
            raise AttentionInputError("The weight decay must be 0 or more.")


@dataclass(frozen=True, eq=False)
class AdamWSteps:
    """One parameter's update, in order; every array has the parameter's shape.

    decayed   θ (1 − η λ)
    m, v      the new running means of g and g² (the optimiser's state after this step)
    m_hat     m / (1 − β₁ᵗ)
    v_hat     v / (1 − β₂ᵗ)
    update    η m̂ / (√v̂ + ε), what is taken away
    param     decayed − update: the parameter after the step
    """

    decayed: Any
    m: Any
    v: Any
    m_hat: Any
    v_hat: Any
    update: Any
    param: Any


def adamw_step(param: Any, grad: Any, m: Any, v: Any, step: int, settings: AdamW) -> AdamWSteps:
    """One AdamW step of `param` with gradient `grad`, from the running means `m` and `v` (zeros
    before the first step), `step` counting from 1. New arrays; nothing is changed in place."""
    step = check_int(step, "step", minimum=1)
    if tuple(grad.shape) != tuple(param.shape):
        raise AttentionInputError(
            f"The gradient has shape {tuple(grad.shape)} but the parameter {tuple(param.shape)}."
        )
    xp = array_namespace(param, grad)
    beta1, beta2 = settings.betas
    decayed = param * (1 - settings.lr * settings.weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    update = settings.lr * m_hat / (xp.sqrt(v_hat) + settings.eps)
    return AdamWSteps(decayed, m, v, m_hat, v_hat, update, decayed - update)


@dataclass(frozen=True, eq=False)
class AdamWState:
    """What AdamW carries from step to step: the steps taken, and m and v of every parameter,
    each one flat array over all of them in `layout`'s order (the update is elementwise, so to
    AdamW the parameters are one vector: one step of 45,000 numbers costs a twentieth of twenty
    steps of a few thousand each).

    layout  ((name, shape), ...) of the parameters, in their order
    """

    step: int
    m: Any
    v: Any
    layout: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def zeros_like(cls, params: Mapping[str, Any]) -> AdamWState:
        flat = _flat(params, tuple(params))
        return cls(0, flat * 0, flat * 0, tuple((n, tuple(p.shape)) for n, p in params.items()))

    def unflat(self, flat: Any) -> dict[str, Any]:
        """`flat` cut back into arrays by name and shape (views of it)."""
        out, start = {}, 0
        for name, shape in self.layout:
            size = math.prod(shape)
            out[name] = flat[start : start + size].reshape(shape)
            start += size
        return out


def _flat(arrays: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    xp = array_namespace(*(arrays[name] for name in names))
    return xp.concat([xp.reshape(arrays[name], (-1,)) for name in names])


def adamw_update(
    params: Mapping[str, Any],
    grads: Mapping[str, Any],
    state: AdamWState,
    settings: AdamW,
) -> tuple[dict[str, Any], AdamWState]:
    """`adamw_step` on every parameter at once: the new parameters and the optimiser's state."""
    names = tuple(name for name, _ in state.layout)
    if set(grads) != set(names) or set(params) != set(names):
        raise AttentionInputError(
            "The gradients must name the same parameters as the model: "
            f"{sorted(set(params) ^ set(grads))} are in one and not the other."
        )
    steps = adamw_step(
        _flat(params, names), _flat(grads, names), state.m, state.v, state.step + 1, settings
    )
    return state.unflat(steps.param), AdamWState(state.step + 1, steps.m, steps.v, state.layout)
