"""attention_core.training.gradients: every backward step against torch.autograd, in float64 on
random inputs (relative error ≤ 1e-10), through torch's own forwards where torch has one
(softmax, SDPA, nn.MultiheadAttention, cross-entropy, embedding), and a hand-worked softmax."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core import (
    AttentionInputError,
    causal_mask,
    init_multi_head_params,
    multi_head_attention,
    scaled_dot_product_attention,
    softmax,
)
from attention_core.losses import log_softmax
from attention_core.training.gradients import (
    attention_backward,
    cross_entropy_backward,
    embedding_backward,
    multi_head_backward,
    softmax_backward,
    unembed_backward,
)
from tests.test_multihead import torch_mha

TOLERANCE = 1e-10


def assert_gradient(ours, theirs, scale=None):
    """|ours − theirs| ≤ 1e-10 of the reference's largest entry (or of `scale`, for a gradient
    that is zero in exact arithmetic and rounding noise in both)."""
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    assert np.shape(ours) == np.shape(theirs)
    reference = np.abs(theirs).max() if scale is None else scale
    assert reference > 0
    assert np.abs(np.asarray(ours) - theirs).max() <= TOLERANCE * reference


def leaf(array):
    return torch.tensor(array, dtype=torch.float64, requires_grad=True)


@pytest.fixture
def rng():
    return np.random.default_rng(20251128)


# -- softmax -------------------------------------------------------------------------------------


def test_softmax_backward_worked_by_hand():
    # P = (0.5, 0.25, 0.25), dP = (1, 0, 0): Σ P·dP = 0.5, so dS = P ⊙ (dP − 0.5)
    # = (0.5·0.5, 0.25·−0.5, 0.25·−0.5) = (0.25, −0.125, −0.125): raising the first score's
    # weight is paid for by the others, and the row of dS sums to 0.
    grads = softmax_backward(np.array([0.5, 0.25, 0.25]), np.array([1.0, 0.0, 0.0]))
    np.testing.assert_allclose(grads.row_dot, [0.5], rtol=0, atol=0)
    np.testing.assert_allclose(grads.d_scores, [0.25, -0.125, -0.125], rtol=0, atol=0)


def test_softmax_backward_equals_autograd_with_masked_and_fully_masked_rows(rng):
    scores = rng.normal(size=(3, 5, 6))
    allowed = rng.random((3, 5, 6)) > 0.3
    allowed[0, 2] = False  # a row that may attend to nothing
    masked = np.where(allowed, scores, -np.inf)
    d_weights = rng.normal(size=masked.shape)
    weights = softmax(masked)
    grads = softmax_backward(weights, d_weights)

    x = leaf(scores)
    # torch.softmax gives NaN for an all -inf row; its weights there are 0 in ours, as recent
    # torch SDPA gives, so the reference treats that row as all zero.
    theirs = torch.where(
        torch.from_numpy(allowed).any(-1, keepdim=True),
        torch.softmax(x.masked_fill(~torch.from_numpy(allowed), -math.inf), -1),
        0.0,
    ).nan_to_num(0.0)
    (theirs * torch.from_numpy(d_weights)).sum().backward()
    assert_gradient(grads.d_scores, x.grad)
    assert np.all(grads.d_scores[~allowed] == 0)  # no gradient reaches a blocked key
    assert np.all(grads.d_scores[0, 2] == 0)


def test_softmax_backward_is_the_jacobian_transposed_times_the_gradient(rng):
    from attention_core import softmax_jacobian

    weights = softmax(rng.normal(size=(4, 7)))
    d_weights = rng.normal(size=(4, 7))
    by_jacobian = np.einsum("rij,ri->rj", softmax_jacobian(weights), d_weights)
    np.testing.assert_allclose(
        softmax_backward(weights, d_weights).d_scores, by_jacobian, atol=1e-15
    )


def test_softmax_backward_refuses_a_gradient_of_another_shape():
    with pytest.raises(AttentionInputError, match="shape"):
        softmax_backward(np.full(3, 1 / 3), np.zeros(4))


# -- scaled dot-product attention ------------------------------------------------------------------


@pytest.mark.parametrize("mask_kind", ["none", "causal", "random", "cross"])
def test_attention_backward_equals_autograd_through_torch_sdpa(rng, mask_kind):
    q_pos, k_pos = (4, 6) if mask_kind == "cross" else (5, 5)
    q = rng.normal(size=(2, 3, q_pos, 8))
    k = rng.normal(size=(2, 3, k_pos, 8))
    v = rng.normal(size=(2, 3, k_pos, 4))
    d_output = rng.normal(size=(2, 3, q_pos, 4))
    mask = {
        "none": None,
        "causal": causal_mask(q_pos),
        "random": rng.random((2, 3, q_pos, k_pos)) > 0.4,
        "cross": rng.random((q_pos, k_pos)) > 0.2,
    }[mask_kind]
    if mask is not None:
        mask[..., 0] = True  # every query sees something: torch gives NaN otherwise
    steps = scaled_dot_product_attention(q, k, v, mask=mask, scale=0.3)
    grads = attention_backward(steps, q, k, v, d_output)

    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    out = F.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if mask is None else torch.from_numpy(mask), scale=0.3
    )
    np.testing.assert_allclose(steps.output, out.detach().numpy(), atol=1e-13)
    (out * torch.from_numpy(d_output)).sum().backward()
    assert_gradient(grads.d_q, tq.grad)
    assert_gradient(grads.d_k, tk.grad)
    assert_gradient(grads.d_v, tv.grad)
    # The steps in between are what they say: dP = dO Vᵀ, and d_scores = scale · dS.
    np.testing.assert_allclose(grads.d_weights, d_output @ v.swapaxes(-1, -2), atol=1e-14)
    np.testing.assert_allclose(grads.d_scores, 0.3 * grads.d_scaled, atol=1e-15)


def test_attention_backward_sums_over_keys_and_values_shared_by_heads(rng):
    # Grouped-query attention: one KV head `(1, k_pos, d)` read by three query heads.
    q = rng.normal(size=(3, 4, 8))
    k = rng.normal(size=(1, 4, 8))
    v = rng.normal(size=(1, 4, 5))
    d_output = rng.normal(size=(3, 4, 5))
    steps = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    grads = attention_backward(steps, q, k, v, d_output)
    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    out = F.scaled_dot_product_attention(tq, tk.expand(3, 4, 8), tv.expand(3, 4, 5), is_causal=True)
    (out * torch.from_numpy(d_output)).sum().backward()
    assert grads.d_k.shape == (1, 4, 8) and grads.d_v.shape == (1, 4, 5)
    assert_gradient(grads.d_q, tq.grad)
    assert_gradient(grads.d_k, tk.grad)
    assert_gradient(grads.d_v, tv.grad)


def test_attention_backward_runs_on_torch_tensors_too(rng):
    q, k, v = (torch.from_numpy(rng.normal(size=(2, 4, 6))) for _ in range(3))
    d_output = torch.from_numpy(rng.normal(size=(2, 4, 6)))
    steps = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    grads = attention_backward(steps, q, k, v, d_output)
    ours = attention_backward(
        scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask=causal_mask(4)),
        q.numpy(), k.numpy(), v.numpy(), d_output.numpy(),
    )  # fmt: skip
    assert isinstance(grads.d_q, torch.Tensor)
    np.testing.assert_allclose(grads.d_q.numpy(), ours.d_q, atol=1e-15)
    np.testing.assert_allclose(grads.d_k.numpy(), ours.d_k, atol=1e-15)


def test_attention_backward_refuses_a_gradient_of_another_shape(rng):
    q = rng.normal(size=(3, 4))
    steps = scaled_dot_product_attention(q, q, q)
    with pytest.raises(AttentionInputError, match="d_output"):
        attention_backward(steps, q, q, q, np.zeros((3, 5)))


# -- multi-head attention ------------------------------------------------------------------------


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_backward_equals_autograd_through_nn_multihead_attention(rng, cross):
    d_model, heads = 12, 3
    params = init_multi_head_params(d_model, heads, seed=4)
    x_q = rng.normal(size=(2, 5, d_model))
    x_kv = rng.normal(size=(2, 7, d_model)) if cross else None
    k_pos = 7 if cross else 5
    mask = causal_mask(5, k_pos)
    steps = multi_head_attention(x_q, x_kv, params=params, num_heads=heads, mask=mask)
    d_output = rng.normal(size=steps.output.shape)
    grads = multi_head_backward(steps, params, d_output)

    mha = torch_mha(params, heads)
    tq = leaf(x_q)
    tkv = leaf(x_kv) if cross else tq
    # nn.MultiheadAttention's boolean mask is the other way round: True = may NOT attend.
    out, _ = mha(tq, tkv, tkv, attn_mask=torch.from_numpy(~mask), need_weights=False)
    np.testing.assert_allclose(steps.output, out.detach().numpy(), atol=1e-13)
    (out * torch.from_numpy(d_output)).sum().backward()
    in_proj = mha.in_proj_weight.grad.numpy()
    in_bias = mha.in_proj_bias.grad.numpy()
    for i, name in enumerate("qkv"):
        rows = slice(i * d_model, (i + 1) * d_model)
        assert_gradient(getattr(grads, f"d_w_{name}"), in_proj[rows])
        assert_gradient(getattr(grads, f"d_b_{name}"), in_bias[rows], scale=np.abs(in_bias).max())
    assert_gradient(grads.d_w_o, mha.out_proj.weight.grad)
    assert_gradient(grads.d_b_o, mha.out_proj.bias.grad)
    if cross:
        assert_gradient(grads.d_x_q, tq.grad)
        assert_gradient(grads.d_x_kv, tkv.grad)
    else:
        assert_gradient(grads.d_input, tq.grad)


def test_the_key_bias_gets_no_gradient(rng):
    # softmax(s + c) = softmax(s) for a c shared by a row: q·b_k is the same for every key, so
    # b_k cannot change any weight, and its gradient is 0 (in exact arithmetic).
    params = init_multi_head_params(8, 2, seed=1)
    x = rng.normal(size=(3, 6, 8))
    steps = multi_head_attention(x, params=params, num_heads=2, mask=causal_mask(6))
    grads = multi_head_backward(steps, params, rng.normal(size=steps.output.shape))
    assert np.abs(grads.d_b_k).max() <= 1e-13 * np.abs(grads.d_b_q).max()


def test_multi_head_backward_with_a_head_removed_equals_autograd_through_our_forward(rng):
    params = init_multi_head_params(8, 2, seed=2)
    x = rng.normal(size=(5, 8))
    head_mask = np.array([0.0, 1.0])
    steps = multi_head_attention(x, params=params, num_heads=2, head_mask=head_mask)
    d_output = rng.normal(size=steps.output.shape)
    grads = multi_head_backward(steps, params, d_output, head_mask=head_mask)

    tx = leaf(x)
    tensors = {name: leaf(getattr(params, name)) for name in ("w_q", "w_k", "w_v", "w_o")}
    from attention_core import MultiHeadParams

    torch_params = MultiHeadParams(
        **tensors, **{b: torch.from_numpy(getattr(params, b)) for b in ("b_q", "b_k", "b_v", "b_o")}
    )
    out = multi_head_attention(tx, params=torch_params, num_heads=2, head_mask=head_mask).output
    (out * torch.from_numpy(d_output)).sum().backward()
    assert_gradient(grads.d_input, tx.grad)
    for name, tensor in tensors.items():
        assert_gradient(getattr(grads, f"d_{name}"), tensor.grad)
    # A removed head's own rows of W_q learn nothing: its output was multiplied by 0.
    assert np.all(grads.d_w_q[:4] == 0)


# -- the loss, the unembedding, the embeddings ---------------------------------------------------


def test_cross_entropy_backward_equals_autograd_of_the_mean_loss_over_counted_rows(rng):
    logits = rng.normal(size=(3, 5, 11)) * 3
    targets = rng.integers(0, 11, size=(3, 5))
    counted = rng.random((3, 5)) > 0.3
    grads = cross_entropy_backward(log_softmax(logits), targets, counted)
    z = leaf(logits)
    losses = F.cross_entropy(
        z.reshape(-1, 11), torch.from_numpy(targets).reshape(-1), reduction="none"
    )
    losses[torch.from_numpy(counted).reshape(-1)].mean().backward()
    assert grads.count == counted.sum()
    assert_gradient(grads.d_logits, z.grad)
    assert np.all(grads.d_logits[~counted] == 0)
    np.testing.assert_allclose(grads.probabilities.sum(-1), 1.0, atol=1e-14)


def test_cross_entropy_backward_refuses_what_it_cannot_average(rng):
    log_probs = log_softmax(rng.normal(size=(4, 3)))
    with pytest.raises(AttentionInputError, match="one target token per row"):
        cross_entropy_backward(log_probs, np.zeros(5, dtype=int))
    with pytest.raises(AttentionInputError, match="mean over none"):
        cross_entropy_backward(log_probs, np.zeros(4, dtype=int), np.zeros(4, dtype=bool))


def test_unembed_backward_equals_autograd(rng):
    x = rng.normal(size=(2, 4, 6))
    w_u = rng.normal(size=(6, 9))
    d_logits = rng.normal(size=(2, 4, 9))
    grads = unembed_backward(x, w_u, d_logits)
    tx, tw, tb = leaf(x), leaf(w_u), leaf(np.zeros(9))
    ((tx @ tw + tb) * torch.from_numpy(d_logits)).sum().backward()
    assert_gradient(grads.d_w_u, tw.grad)
    assert_gradient(grads.d_b_u, tb.grad)
    assert_gradient(grads.d_x, tx.grad)
    with pytest.raises(AttentionInputError, match="d_logits"):
        unembed_backward(x, w_u, d_logits[..., :5])


def test_embedding_backward_equals_autograd_with_repeated_and_unused_tokens(rng):
    vocab, n_ctx, d_model = 7, 6, 5
    tokens = np.array([[1, 3, 1, 1], [6, 3, 0, 1]])  # token 1 four times; 2, 4, 5 never
    d_x = rng.normal(size=(2, 4, d_model))
    grads = embedding_backward(tokens, d_x, vocab, n_ctx)
    w_e, w_pos = leaf(rng.normal(size=(vocab, d_model))), leaf(rng.normal(size=(n_ctx, d_model)))
    x = F.embedding(torch.from_numpy(tokens), w_e) + w_pos[:4]
    (x * torch.from_numpy(d_x)).sum().backward()
    assert_gradient(grads.d_w_e, w_e.grad)
    assert_gradient(grads.d_w_pos, w_pos.grad)
    assert np.all(grads.d_w_e[[2, 4, 5]] == 0) and np.all(grads.d_w_pos[4:] == 0)


def test_embedding_backward_refuses_more_positions_than_the_model_has(rng):
    with pytest.raises(AttentionInputError, match="n_ctx"):
        embedding_backward(np.zeros((1, 5), dtype=int), rng.normal(size=(1, 5, 3)), 4, 4)
    with pytest.raises(AttentionInputError, match="one gradient row per token"):
        embedding_backward(np.zeros((1, 5), dtype=int), rng.normal(size=(1, 4, 3)), 4, 8)


@pytest.mark.parametrize("query_heads", [2, 3])
def test_keys_and_values_one_head_shares_get_the_sum_of_their_gradients(rng, query_heads):
    q = rng.normal(size=(query_heads, 4, 8))
    k, v = rng.normal(size=(1, 4, 8)), rng.normal(size=(1, 4, 5))
    d_output = rng.normal(size=(query_heads, 4, 5))
    grads = attention_backward(scaled_dot_product_attention(q, k, v), q, k, v, d_output)
    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    out = F.scaled_dot_product_attention(tq, tk.expand_as(tq), tv.expand(query_heads, 4, 5))
    (out * torch.from_numpy(d_output)).sum().backward()
    assert_gradient(grads.d_k, tk.grad)
    assert_gradient(grads.d_v, tv.grad)


def test_keys_and_values_without_the_leading_axes_get_their_sum(rng):
    # One (k_pos, d) of keys and values read by every sequence and head of (2, 3, q_pos, d).
    q = rng.normal(size=(2, 3, 5, 8))
    k, v = rng.normal(size=(4, 8)), rng.normal(size=(4, 6))
    d_output = rng.normal(size=(2, 3, 5, 6))
    grads = attention_backward(scaled_dot_product_attention(q, k, v), q, k, v, d_output)
    tk, tv = leaf(k), leaf(v)
    out = F.scaled_dot_product_attention(
        torch.from_numpy(q), tk.expand(2, 3, 4, 8), tv.expand(2, 3, 4, 6)
    )
    (out * torch.from_numpy(d_output)).sum().backward()
    assert grads.d_k.shape == (4, 8) and grads.d_v.shape == (4, 6)
    assert_gradient(grads.d_k, tk.grad)
    assert_gradient(grads.d_v, tv.grad)


def test_every_backward_runs_on_torch_tensors_and_gives_numpys_numbers(rng):
    params = init_multi_head_params(8, 2, seed=3)
    x = rng.normal(size=(2, 5, 8))
    steps = multi_head_attention(x, params=params, num_heads=2, mask=causal_mask(5))
    d_output = rng.normal(size=steps.output.shape)
    ours = multi_head_backward(steps, params, d_output)
    tensors = {
        n: torch.from_numpy(getattr(params, n))
        for n in ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")
    }
    from attention_core import MultiHeadParams

    t_steps = multi_head_attention(
        torch.from_numpy(x), params=MultiHeadParams(**tensors), num_heads=2, mask=causal_mask(5)
    )
    theirs = multi_head_backward(t_steps, tensors, torch.from_numpy(d_output))
    for name in ("d_w_q", "d_w_o", "d_b_q", "d_b_o", "d_input"):
        value = getattr(theirs, name)
        assert isinstance(value, torch.Tensor), name
        np.testing.assert_allclose(value.numpy(), getattr(ours, name), atol=1e-13)

    w_u, d_logits = rng.normal(size=(8, 11)), rng.normal(size=(2, 5, 11))
    t_unembed = unembed_backward(
        torch.from_numpy(x), torch.from_numpy(w_u), torch.from_numpy(d_logits)
    )
    unembed = unembed_backward(x, w_u, d_logits)
    for name in ("d_w_u", "d_b_u", "d_x"):
        assert isinstance(getattr(t_unembed, name), torch.Tensor)
        np.testing.assert_allclose(
            getattr(t_unembed, name).numpy(), getattr(unembed, name), atol=1e-13
        )

    tokens = rng.integers(0, 11, size=(2, 5))
    t_embedding = embedding_backward(torch.from_numpy(tokens), torch.from_numpy(x), 11, 7)
    embedding = embedding_backward(tokens, x, 11, 7)
    np.testing.assert_allclose(t_embedding.d_w_e.numpy(), embedding.d_w_e, atol=1e-13)
    np.testing.assert_allclose(t_embedding.d_w_pos.numpy(), embedding.d_w_pos, atol=1e-13)

    log_probs = log_softmax(rng.normal(size=(4, 6)))
    targets = rng.integers(0, 6, size=4)
    t_loss = cross_entropy_backward(torch.from_numpy(log_probs), torch.from_numpy(targets))
    np.testing.assert_allclose(
        t_loss.d_logits.numpy(), cross_entropy_backward(log_probs, targets).d_logits, atol=1e-15
    )


def test_a_probability_whose_gradient_would_be_subnormal_counts_as_zero():
    # float32, 1,000 predictions: a share p/1000 under 1.18e-38 (p under about 1.2e-35) is 0;
    # a larger p keeps its share exactly.
    count = 1000
    log_probs = np.full((count, 4), np.log(0.25), dtype=np.float32)
    log_probs[0] = [
        np.log(1 - 2e-30),
        -85.0,
        -79.0,
        np.log(1e-30),
    ]  # e^-85 ≈ 1.2e-37, e^-79 ≈ 5e-35
    targets = np.zeros(count, dtype=int)
    grads = cross_entropy_backward(log_probs, targets)
    tiny = np.finfo(np.float32).smallest_normal
    nonzero = np.abs(grads.d_logits[grads.d_logits != 0])
    assert nonzero.min() >= tiny  # nothing subnormal slows the products after it
    assert grads.probabilities[0, 1] == 0.0 and grads.d_logits[0, 1] == 0.0
    np.testing.assert_allclose(grads.probabilities[0, 2], np.exp(np.float32(-79.0)), rtol=1e-6)
    np.testing.assert_allclose(grads.d_logits[0, 2], np.exp(np.float32(-79.0)) / count, rtol=1e-6)


def test_embeddings_read_at_every_position_or_in_one_sequence(rng):
    d_x = rng.normal(size=(1, 4, 3))
    full = embedding_backward(np.array([[0, 1, 2, 3]]), d_x, 5, 4)  # as many positions as n_ctx
    np.testing.assert_allclose(full.d_w_pos, d_x[0], atol=0)
    alone = embedding_backward(np.array([0, 1, 2, 3]), d_x[0], 5, 4)  # one sequence, no batch
    np.testing.assert_allclose(alone.d_w_e, full.d_w_e, atol=0)
    np.testing.assert_allclose(alone.d_w_pos, full.d_w_pos, atol=0)
