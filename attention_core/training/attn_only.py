"""A small attention-only transformer, named and shaped as TransformerLens names it.

The form in which Elhage et al. (2021) read circuits: token and learned position embeddings,
then layers of attention heads only (no MLP, no LayerNorm), each adding its heads' outputs to
the residual stream, then the unembedding:

    x₀ = W_E[tokens] + W_pos[:pos]                                        (batch, pos, d_model)
    x_{l+1} = x_l + Σ_h softmax(causal(q_h k_hᵀ / √d_head)) v_h W_O[h] + b_O
              with q_h = x_l W_Q[h] + b_Q[h], and k_h, v_h alike
    logits = x_L W_U + b_U                                                (batch, pos, vocab)

Parameters are a dict under `HookedTransformer`'s state-dict names (`attn_only=True`,
`normalization_type=None`): `embed.W_E` (vocab, d_model), `pos_embed.W_pos` (n_ctx, d_model),
`blocks.{l}.attn.W_Q`/`W_K`/`W_V` (head, d_model, d_head), `b_Q`/`b_K`/`b_V` (head, d_head),
`W_O` (head, d_head, d_model), `b_O` (d_model,), `unembed.W_U` (d_model, vocab), `unembed.b_U`
(vocab,). TransformerLens multiplies on the right (`x @ W_Q`), so these are the transposes of
torch's `nn.Linear` weights, cut by head; `layer_weights` turns a layer's into the app's
`MultiHeadParams` layout, and every layer runs through `multihead.multi_head_attention`'s
formula, the attention the multi-head page shows, and back through
`gradients.multi_head_backward`.

    run_attn_only(config, params, tokens, head_mask=None)    -> AttnOnlySteps (named points)
    attn_only_gradients(config, params, steps, d_logits)     -> AttnOnlyGrads (a dict like params)
    next_token_loss(steps, counted=None)                     the mean loss, and its gradient
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..losses import log_softmax
from ..masks import causal_mask
from ..multihead import MultiHeadParams, MultiHeadSteps, multi_head
from ..validation import AttentionInputError, check_int, check_size
from .gradients import (
    CrossEntropyGrads,
    EmbeddingGrads,
    MultiHeadGrads,
    UnembedGrads,
    cross_entropy_backward,
    embedding_backward,
    multi_head_backward,
    unembed_backward,
)

__all__ = [
    "AttnOnlyConfig",
    "AttnOnlyGrads",
    "AttnOnlySteps",
    "attn_only_gradients",
    "init_params",
    "layer_params",
    "layer_weights",
    "next_token_loss",
    "parameter_shapes",
    "run_attn_only",
]

Params = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class AttnOnlyConfig:
    """The model's sizes. d_head = d_model / n_heads, as TransformerLens's default."""

    n_layers: int
    n_heads: int
    d_model: int
    d_vocab: int
    n_ctx: int

    def __post_init__(self) -> None:
        for name in ("n_layers", "n_heads", "d_model", "d_vocab", "n_ctx"):
            check_int(getattr(self, name), name, minimum=1)
        if self.d_model % self.n_heads:
            raise AttentionInputError(
                f"{self.n_heads} heads do not divide d_model = {self.d_model}: each head gets "
                "d_model / heads features, so choose a number of heads that divides it."
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def transformer_lens(self) -> dict[str, Any]:
        """The `HookedTransformerConfig` arguments of this model."""
        return {
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "d_model": self.d_model,
            "d_head": self.d_head,
            "d_vocab": self.d_vocab,
            "n_ctx": self.n_ctx,
            "attn_only": True,
            "normalization_type": None,
            "positional_embedding_type": "standard",
            "act_fn": "relu",  # required by the config, used by no layer: there is no MLP
        }


def parameter_shapes(config: AttnOnlyConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's TransformerLens name and shape, in the state dict's order."""
    heads, d_model, d_head = config.n_heads, config.d_model, config.d_head
    shapes = {"embed.W_E": (config.d_vocab, d_model), "pos_embed.W_pos": (config.n_ctx, d_model)}
    for layer in range(config.n_layers):
        attn = f"blocks.{layer}.attn"
        shapes |= {f"{attn}.W_{x}": (heads, d_model, d_head) for x in "QKV"}
        shapes[f"{attn}.W_O"] = (heads, d_head, d_model)
        shapes |= {f"{attn}.b_{x}": (heads, d_head) for x in "QKV"}
        shapes[f"{attn}.b_O"] = (d_model,)
    return shapes | {"unembed.W_U": (d_model, config.d_vocab), "unembed.b_U": (config.d_vocab,)}


def init_params(
    config: AttnOnlyConfig, seed: int, dtype: Any = np.float32
) -> dict[str, np.ndarray]:
    """Seeded random parameters, as TransformerLens initialises a model (its "gpt2" mode):
    every weight drawn from N(0, 0.8/√d_model), every bias 0."""
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    std = 0.8 / math.sqrt(config.d_model)
    return {
        name: (np.zeros(shape) if ".b_" in name else rng.normal(0.0, std, size=shape)).astype(dtype)
        for name, shape in parameter_shapes(config).items()
    }


def layer_weights(params: Params, layer: int) -> dict[str, np.ndarray]:
    """Layer `layer`'s heads in torch's layout (`x @ w.T + b`), by `MultiHeadParams`' field
    names: head h's W_Q[h] `(d_model, d_head)` becomes rows h·d_head .. (h+1)·d_head of w_q, and
    W_O[h] `(d_head, d_model)` the same columns of w_o."""
    attn = f"blocks.{layer}.attn"
    heads, d_model, d_head = params[f"{attn}.W_Q"].shape

    def rows(name: str) -> np.ndarray:
        return params[f"{attn}.{name}"].transpose(0, 2, 1).reshape(heads * d_head, d_model)

    return {
        "w_q": rows("W_Q"), "w_k": rows("W_K"), "w_v": rows("W_V"),
        "w_o": params[f"{attn}.W_O"].reshape(heads * d_head, d_model).T,
        "b_q": params[f"{attn}.b_Q"].ravel(), "b_k": params[f"{attn}.b_K"].ravel(),
        "b_v": params[f"{attn}.b_V"].ravel(), "b_o": params[f"{attn}.b_O"],
    }  # fmt: skip


def layer_params(params: Params, layer: int) -> MultiHeadParams:
    """Layer `layer`'s heads as the multi-head page's `MultiHeadParams` (checked)."""
    return MultiHeadParams(**layer_weights(params, layer))


def _layer_grads(grads: MultiHeadGrads, layer: int, heads: int) -> dict[str, np.ndarray]:
    """`multi_head_backward`'s gradients under the layer's TransformerLens names and shapes."""
    attn = f"blocks.{layer}.attn"
    d_model = grads.d_w_q.shape[1]
    d_head = d_model // heads

    def per_head(d_w: np.ndarray) -> np.ndarray:
        return d_w.reshape(heads, d_head, d_model).transpose(0, 2, 1)

    return {
        f"{attn}.W_Q": per_head(grads.d_w_q), f"{attn}.W_K": per_head(grads.d_w_k),
        f"{attn}.W_V": per_head(grads.d_w_v),
        f"{attn}.W_O": grads.d_w_o.T.reshape(heads, d_head, d_model),
        f"{attn}.b_Q": grads.d_b_q.reshape(heads, d_head),
        f"{attn}.b_K": grads.d_b_k.reshape(heads, d_head),
        f"{attn}.b_V": grads.d_b_v.reshape(heads, d_head), f"{attn}.b_O": grads.d_b_o,
    }  # fmt: skip


@dataclass(frozen=True, eq=False)
class AttnOnlySteps:
    """One forward pass, every named point kept (TransformerLens's hook names in brackets).

    tokens     `(batch, pos)` int
    embed      `(batch, pos, d_model)`  W_E[tokens]                       (hook_embed)
    pos_embed  `(pos, d_model)`         W_pos[:pos]                       (hook_pos_embed)
    resid      one `(batch, pos, d_model)` per layer boundary: resid[l] enters layer l
               (blocks.l.hook_resid_pre), resid[-1] leaves the last (its hook_resid_post)
    blocks     one `MultiHeadSteps` per layer: q_heads `(batch, head, pos, d_head)` (hook_q,
               heads before positions), weights `(batch, head, q_pos, k_pos)` (hook_pattern),
               attention.output (hook_z), output (hook_attn_out)
    logits     `(batch, pos, vocab)`
    head_mask  `(layer, head)` multipliers the heads ran with (None: all 1)
    """

    tokens: np.ndarray
    embed: np.ndarray
    pos_embed: np.ndarray
    resid: tuple[np.ndarray, ...]
    blocks: tuple[MultiHeadSteps, ...]
    logits: np.ndarray
    head_mask: np.ndarray | None = None

    @property
    def patterns(self) -> np.ndarray:
        """Every head's weights `(layer, batch, head, q_pos, k_pos)`."""
        return np.stack([block.attention.weights for block in self.blocks])


def check_tokens(config: AttnOnlyConfig, tokens: object) -> np.ndarray:
    """`tokens` as a `(batch, pos)` integer array the model can read."""
    ids = np.asarray(tokens)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise AttentionInputError(
            f"tokens must be a (batch, pos) array of token ids, got shape {ids.shape}."
        )
    if ids.shape[1] > config.n_ctx:
        raise AttentionInputError(
            f"{ids.shape[1]} tokens do not fit: this model has learned {config.n_ctx} positions."
        )
    if ids.min() < 0 or ids.max() >= config.d_vocab:
        raise AttentionInputError(f"Token ids must lie in 0..{config.d_vocab - 1}.")
    return ids


def run_attn_only(
    config: AttnOnlyConfig, params: Params, tokens: object, *, head_mask: object = None
) -> AttnOnlySteps:
    """The forward pass of the module docstring on `tokens` `(batch, pos)` (or `(pos,)`).

    `head_mask` `(layer, head)` multiplies each head's output before W_O (0 removes a head, a
    zero-ablation; its layer's b_O stays).
    """
    ids = check_tokens(config, tokens)
    batch, pos = ids.shape
    check_size((config.n_layers, batch, config.n_heads, pos, pos), "The attention patterns")
    mask = None if head_mask is None else np.asarray(head_mask, dtype=float)
    if mask is not None and mask.shape != (config.n_layers, config.n_heads):
        raise AttentionInputError(
            f"head_mask has shape {mask.shape}: give one multiplier per head, "
            f"({config.n_layers}, {config.n_heads})."
        )
    embed = params["embed.W_E"][ids]  # (batch, pos, d_model)
    pos_embed = params["pos_embed.W_pos"][:pos]  # (pos, d_model)
    # The residual stream starts as what each token is plus where it is.
    resid = [embed + pos_embed]
    blocks = []
    attend = causal_mask(pos)  # (q_pos, k_pos): a token reads only itself and the past
    for layer in range(config.n_layers):
        weights = layer_weights(params, layer)
        multipliers = None if mask is None else mask[layer, :, None, None].astype(embed.dtype)
        # The formula of multihead.multi_head_attention, on arrays this pass made itself.
        block = multi_head(
            resid[-1], resid[-1], weights, config.n_heads, attend, multipliers, checked=False
        )
        blocks.append(block)
        # Each layer adds what its heads write; nothing is overwritten.
        resid.append(resid[-1] + block.output)
    # One product for every position of every sequence (a stack would be one per sequence).
    flat = resid[-1].reshape(batch * pos, config.d_model) @ params["unembed.W_U"]
    logits = flat.reshape(batch, pos, config.d_vocab) + params["unembed.b_U"]
    return AttnOnlySteps(ids, embed, pos_embed, tuple(resid), tuple(blocks), logits, mask)


@dataclass(frozen=True, eq=False)
class AttnOnlyGrads:
    """The backward pass through the whole model, in the order it happens.

    loss        CrossEntropyGrads   dlogits
    unembed     UnembedGrads        dW_U, db_U, and dx at the residual stream's end
    blocks      one MultiHeadGrads per layer, in the layers' order (computed last to first)
    d_resid     the gradient at each layer boundary, `(batch, pos, d_model)`, as `resid`
    embedding   EmbeddingGrads      dW_E, dW_pos
    params      every parameter's gradient, under the parameters' names
    """

    loss: CrossEntropyGrads
    unembed: UnembedGrads
    blocks: tuple[MultiHeadGrads, ...]
    d_resid: tuple[np.ndarray, ...]
    embedding: EmbeddingGrads
    params: dict[str, np.ndarray]


def next_token_loss(
    steps: AttnOnlySteps, counted: object = None
) -> tuple[float, CrossEntropyGrads]:
    """The mean loss of predicting each next token (position i predicts token i + 1), over the
    predictions `counted` `(batch, pos - 1)` marks (None: all), and its gradient at the logits
    `(batch, pos, vocab)` (the last position predicts nothing: 0)."""
    targets = steps.tokens[:, 1:]  # (batch, pos - 1)
    counted = np.ones(targets.shape, dtype=bool) if counted is None else np.asarray(counted, bool)
    if counted.shape != targets.shape:
        raise AttentionInputError(
            f"counted has shape {counted.shape} but there are {targets.shape} predictions."
        )
    log_probs = log_softmax(steps.logits[:, :-1])  # (batch, pos - 1, vocab)
    # −log p of each target: exact even where p underflows to 0.
    losses = -np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    grads = cross_entropy_backward(log_probs, targets, counted)
    # The last position's logits predict nothing in the loss: no gradient reaches them.
    d_logits = np.concatenate([grads.d_logits, np.zeros_like(steps.logits[:, -1:])], axis=1)
    loss = float(losses[counted].mean(dtype=np.float64))
    return loss, CrossEntropyGrads(grads.probabilities, d_logits, grads.count)


def attn_only_gradients(
    config: AttnOnlyConfig, params: Params, steps: AttnOnlySteps, loss: CrossEntropyGrads
) -> AttnOnlyGrads:
    """Every parameter's gradient from the loss's dlogits `(batch, pos, vocab)`: the forward
    read backwards, each layer through `gradients.multi_head_backward`."""
    unembed = unembed_backward(steps.resid[-1], params["unembed.W_U"], loss.d_logits)
    d_resid = [unembed.d_x]
    blocks = []
    for layer in reversed(range(config.n_layers)):
        block = multi_head_backward(
            steps.blocks[layer],
            layer_weights(params, layer),
            d_resid[0],
            head_mask=None if steps.head_mask is None else steps.head_mask[layer],
        )
        blocks.append(block)
        # The residual connection passes the gradient on unchanged, and the heads add theirs.
        d_resid.insert(0, d_resid[0] + block.d_input)
    embedding = embedding_backward(steps.tokens, d_resid[0], config.d_vocab, config.n_ctx)
    grads = {"embed.W_E": embedding.d_w_e, "pos_embed.W_pos": embedding.d_w_pos}
    for layer, block in enumerate(reversed(blocks)):
        grads |= _layer_grads(block, layer, config.n_heads)
    grads |= {"unembed.W_U": unembed.d_w_u, "unembed.b_U": unembed.d_b_u}
    ordered = {name: grads[name] for name in params}
    return AttnOnlyGrads(loss, unembed, tuple(blocks[::-1]), tuple(d_resid), embedding, ordered)
