"""attention_core.training.attn_only: the model is TransformerLens's attention-only
HookedTransformer (same names, shapes, logits and named points, float64), and its gradients are
torch.autograd's through that model."""

import numpy as np
import pytest
import torch

from attention_core import AttentionInputError, multi_head_attention
from attention_core.training.attn_only import (
    AttnOnlyConfig,
    attn_only_gradients,
    init_params,
    layer_params,
    next_token_loss,
    parameter_shapes,
    run_attn_only,
)

transformer_lens = pytest.importorskip("transformer_lens")

CONFIG = AttnOnlyConfig(n_layers=2, n_heads=3, d_model=12, d_vocab=10, n_ctx=8)


@pytest.fixture(scope="module")
def params():
    """Random weights and non-zero biases, float64, so every parameter's path is exercised."""
    rng = np.random.default_rng(3)
    found = init_params(CONFIG, seed=5, dtype=np.float64)
    return {name: value + rng.normal(0, 0.2, value.shape) for name, value in found.items()}


def hooked(params, config=CONFIG):
    """TransformerLens's own model, in float64, holding `params`."""
    cfg = transformer_lens.HookedTransformerConfig(**config.transformer_lens(), dtype=torch.float64)
    model = transformer_lens.HookedTransformer(cfg)
    state = model.state_dict()
    state.update({name: torch.from_numpy(value) for name, value in params.items()})
    model.load_state_dict(state, strict=True)
    return model


@pytest.fixture(scope="module")
def tokens():
    return np.random.default_rng(11).integers(0, CONFIG.d_vocab, size=(4, CONFIG.n_ctx))


def test_parameters_are_transformer_lens_state_dict_names_and_shapes(params):
    model = hooked(params)
    theirs = {
        name: tuple(value.shape)
        for name, value in model.state_dict().items()
        if not name.endswith((".mask", ".IGNORE"))  # buffers, not parameters
    }
    assert parameter_shapes(CONFIG) == theirs
    assert list(parameter_shapes(CONFIG)) == list(init_params(CONFIG, 0))


def test_logits_and_named_points_equal_transformer_lens(params, tokens):
    model = hooked(params)
    with torch.no_grad():
        logits, cache = model.run_with_cache(torch.from_numpy(tokens))
    steps = run_attn_only(CONFIG, params, tokens)
    np.testing.assert_allclose(steps.logits, logits.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(steps.embed, cache["hook_embed"].numpy(), atol=1e-14)
    np.testing.assert_allclose(steps.pos_embed, cache["hook_pos_embed"][0].numpy(), atol=1e-14)
    for layer, block in enumerate(steps.blocks):
        np.testing.assert_allclose(
            steps.resid[layer], cache["resid_pre", layer].numpy(), atol=1e-12
        )
        # TransformerLens puts positions before heads: (batch, pos, head, d_head).
        for ours, name in ((block.q_heads, "q"), (block.k_heads, "k"), (block.v_heads, "v")):
            np.testing.assert_allclose(ours, cache[name, layer].numpy().swapaxes(1, 2), atol=1e-12)
        np.testing.assert_allclose(
            block.attention.weights, cache["pattern", layer].numpy(), atol=1e-13
        )
        np.testing.assert_allclose(
            block.attention.output, cache["z", layer].numpy().swapaxes(1, 2), atol=1e-12
        )
        np.testing.assert_allclose(block.output, cache["attn_out", layer].numpy(), atol=1e-12)
    np.testing.assert_allclose(steps.resid[-1], cache["resid_post", 1].numpy(), atol=1e-12)


def test_a_removed_head_equals_transformer_lens_with_that_head_zeroed(params, tokens):
    mask = np.ones((2, 3))
    mask[1, 2] = 0.0

    def zero_head(z, hook):
        z[:, :, 2] = 0.0
        return z

    model = hooked(params)
    with torch.no_grad():
        theirs = model.run_with_hooks(
            torch.from_numpy(tokens), fwd_hooks=[("blocks.1.attn.hook_z", zero_head)]
        )
    ours = run_attn_only(CONFIG, params, tokens, head_mask=mask)
    np.testing.assert_allclose(ours.logits, theirs.detach().numpy(), atol=1e-12)
    assert not np.allclose(ours.logits, run_attn_only(CONFIG, params, tokens).logits)


def test_every_gradient_equals_autograd_through_transformer_lens(params, tokens):
    model = hooked(params)
    counted = np.random.default_rng(0).random((4, CONFIG.n_ctx - 1)) > 0.3
    loss, loss_grads = next_token_loss(run_attn_only(CONFIG, params, tokens), counted)
    grads = attn_only_gradients(CONFIG, params, run_attn_only(CONFIG, params, tokens), loss_grads)

    logits = model(torch.from_numpy(tokens))
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, CONFIG.d_vocab), torch.from_numpy(tokens[:, 1:]).reshape(-1),
        reduction="none",
    )  # fmt: skip
    theirs = losses[torch.from_numpy(counted).reshape(-1)].mean()
    theirs.backward()
    assert loss == pytest.approx(theirs.item(), rel=1e-13)
    # The steps of each layer's backward pass, in the layers' order.
    assert len(grads.blocks) == CONFIG.n_layers
    for layer, block in enumerate(grads.blocks):
        np.testing.assert_array_equal(block.d_b_o, grads.params[f"blocks.{layer}.attn.b_O"])
    named = dict(model.named_parameters())
    scale = max(np.abs(g).max() for g in grads.params.values())
    for name, ours in grads.params.items():
        reference = named[name].grad.numpy()
        # b_K's gradient is 0 in exact arithmetic (softmax ignores a shift shared by a row):
        # both are rounding noise there, judged against the model's gradients' scale.
        largest = scale if name.endswith(".b_K") else np.abs(reference).max()
        assert np.abs(ours - reference).max() <= 1e-10 * largest, name


def test_a_layer_in_the_multi_head_pages_layout_gives_the_same_block(params, tokens):
    steps = run_attn_only(CONFIG, params, tokens)
    page = multi_head_attention(
        steps.resid[1],
        params=layer_params(params, 1),
        num_heads=3,
        mask=np.tril(np.ones((8, 8), bool)),
    )
    np.testing.assert_allclose(page.output, steps.blocks[1].output, atol=1e-13)


def test_initial_weights_follow_the_seed_and_transformer_lens_scale():
    config = AttnOnlyConfig(2, 4, 64, 64, 32)
    first, again, other = init_params(config, 0), init_params(config, 0), init_params(config, 1)
    assert all(np.array_equal(first[name], again[name]) for name in first)
    assert not np.array_equal(first["blocks.0.attn.W_Q"], other["blocks.0.attn.W_Q"])
    assert all(not first[name].any() for name in first if ".b_" in name)
    assert first["embed.W_E"].dtype == np.float32
    # N(0, 0.8/√64 = 0.1): the sample standard deviation of 4,096 draws is within 5%.
    assert first["embed.W_E"].std() == pytest.approx(0.1, rel=0.05)


def test_the_smallest_model_reads_a_single_token():
    config = AttnOnlyConfig(1, 1, 1, 1, 1)
    steps = run_attn_only(config, init_params(config, 0), np.array([[0]]))
    assert steps.logits.shape == (1, 1, 1) and steps.patterns.shape == (1, 1, 1, 1, 1)
    assert steps.patterns[0, 0, 0, 0, 0] == 1.0  # one token may attend only to itself


def test_bad_models_and_tokens_are_refused(params):
    with pytest.raises(AttentionInputError, match="do not divide"):
        AttnOnlyConfig(2, 5, 12, 10, 8)
    with pytest.raises(AttentionInputError, match="learned 8 positions"):
        run_attn_only(CONFIG, params, np.zeros((1, 9), dtype=int))
    with pytest.raises(AttentionInputError, match=r"0\.\.9"):
        run_attn_only(CONFIG, params, np.array([[1, 10]]))
    with pytest.raises(AttentionInputError, match="token ids"):
        run_attn_only(CONFIG, params, np.array([[0.5, 1.0]]))
    with pytest.raises(AttentionInputError, match="one multiplier per head"):
        run_attn_only(CONFIG, params, np.array([1, 2]), head_mask=np.ones(3))
