"""attention_core.training.adamw: steps equal torch.optim.AdamW's in float64, and a step worked by
hand."""

import math

import numpy as np
import pytest
import torch

from attention_core import AttentionInputError
from attention_core.training.adamw import AdamW, AdamWState, adamw_step, adamw_update


def test_first_step_worked_by_hand():
    # θ = 1, g = 0.5, η = 0.1, λ = 0.01, β = (0.9, 0.999), ε = 1e-8, t = 1:
    # decayed = 1·(1 − 0.1·0.01) = 0.999; m = 0.1·0.5 = 0.05, v = 0.001·0.25 = 0.00025;
    # m̂ = 0.05/0.1 = 0.5 = g, v̂ = 0.00025/0.001 = 0.25 = g²: the first step is
    # η·g/(|g| + ε) = 0.1·0.5/(0.5 + 1e-8), about η whatever the gradient's size.
    steps = adamw_step(np.array(1.0), np.array(0.5), 0.0, 0.0, 1, AdamW(0.1))
    assert steps.decayed == pytest.approx(0.999, rel=1e-15)
    assert steps.m == pytest.approx(0.05, rel=1e-15) and steps.v == pytest.approx(
        0.00025, rel=1e-14
    )
    assert steps.m_hat == pytest.approx(0.5, rel=1e-14) and steps.v_hat == pytest.approx(
        0.25, rel=1e-12
    )
    assert steps.update == pytest.approx(0.1 * 0.5 / (0.5 + 1e-8), rel=1e-12)
    assert steps.param == pytest.approx(0.999 - 0.1 * 0.5 / (0.5 + 1e-8), rel=1e-12)


@pytest.mark.parametrize(
    "settings", [AdamW(3e-3), AdamW(0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)]
)
def test_steps_equal_torch_optim_adamw(settings):
    rng = np.random.default_rng(7)
    params = {"w": rng.normal(size=(4, 3)), "b": rng.normal(size=3)}
    state = AdamWState.zeros_like(params)
    tensors = {name: torch.tensor(value, requires_grad=True) for name, value in params.items()}
    optimizer = torch.optim.AdamW(
        tensors.values(), lr=settings.lr, betas=settings.betas, eps=settings.eps,
        weight_decay=settings.weight_decay,
    )  # fmt: skip
    for _ in range(4):
        grads = {
            name: rng.normal(size=value.shape) * 10.0 ** rng.integers(-6, 2)
            for name, value in params.items()
        }
        params, state = adamw_update(params, grads, state, settings)
        optimizer.zero_grad()
        for name, tensor in tensors.items():
            tensor.grad = torch.from_numpy(grads[name])
        optimizer.step()
        for name, tensor in tensors.items():
            theirs = tensor.detach().numpy()
            assert np.abs(params[name] - theirs).max() <= 1e-10 * np.abs(theirs).max()
            torch_state = optimizer.state[tensor]
            m, v = state.unflat(state.m)[name], state.unflat(state.v)[name]
            np.testing.assert_allclose(m, torch_state["exp_avg"].numpy(), rtol=1e-10)
            np.testing.assert_allclose(v, torch_state["exp_avg_sq"].numpy(), rtol=1e-10)
    assert state.step == 4


def test_a_step_leaves_its_inputs_as_they_were():
    param, grad = np.ones(3), np.full(3, 2.0)
    adamw_step(param, grad, np.zeros(3), np.zeros(3), 1, AdamW(0.1))
    assert np.all(param == 1.0) and np.all(grad == 2.0)


@pytest.mark.parametrize("lr", [0.0, -1e-3, math.nan, math.inf])
def test_a_learning_rate_that_cannot_descend_is_refused(lr):
    with pytest.raises(AttentionInputError, match="learning rate"):
        AdamW(lr)


def test_other_settings_and_mismatches_are_refused():
    with pytest.raises(AttentionInputError, match="β"):
        AdamW(1e-3, betas=(0.9, 1.0))
    with pytest.raises(AttentionInputError, match="ε"):
        AdamW(1e-3, eps=0.0)
    with pytest.raises(AttentionInputError, match="weight decay"):
        AdamW(1e-3, weight_decay=-0.1)
    with pytest.raises(AttentionInputError, match="shape"):
        adamw_step(np.ones(3), np.ones(4), 0.0, 0.0, 1, AdamW(0.1))
    with pytest.raises(AttentionInputError, match="step"):
        adamw_step(np.ones(3), np.ones(3), 0.0, 0.0, 0, AdamW(0.1))
    params = {"w": np.ones(2)}
    with pytest.raises(AttentionInputError, match="same parameters"):
        adamw_update(params, {"v": np.ones(2)}, AdamWState.zeros_like(params), AdamW(0.1))


def test_the_state_is_one_vector_cut_back_by_name_and_shape():
    params = {"w": np.arange(6.0).reshape(2, 3), "b": np.array([7.0])}
    state = AdamWState.zeros_like(params)
    assert state.layout == (("w", (2, 3)), ("b", (1,))) and state.m.shape == (7,)
    new, state = adamw_update(params, {"b": np.ones(1), "w": np.ones((2, 3))}, state, AdamW(0.1))
    assert list(new) == ["w", "b"] and new["w"].shape == (2, 3)
    np.testing.assert_allclose(state.unflat(state.m)["b"], [0.1])


def test_settings_at_their_edges_are_allowed():
    AdamW(1e-3, betas=(0.0, 0.0))  # no running mean at all: a sign-SGD-like step
    AdamW(1e-3, weight_decay=0.0)  # plain Adam


def test_the_update_runs_on_torch_tensors_and_gives_numpys_numbers():
    rng = np.random.default_rng(1)
    params = {"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    grads = {"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    ours, _ = adamw_update(params, grads, AdamWState.zeros_like(params), AdamW(0.1))
    tensors = {name: torch.from_numpy(value) for name, value in params.items()}
    theirs, _state = adamw_update(
        tensors,
        {n: torch.from_numpy(g) for n, g in grads.items()},
        AdamWState.zeros_like(tensors),
        AdamW(0.1),
    )
    for name in params:
        assert isinstance(theirs[name], torch.Tensor) and theirs[name].shape == params[name].shape
        np.testing.assert_allclose(theirs[name].numpy(), ours[name], atol=1e-15)
