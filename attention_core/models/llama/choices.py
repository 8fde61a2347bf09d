"""What a layer's own attention choices do to one head's last query, each choice a step: QK-norm,
the rotation (or none, in a NoPE layer), the query scale, the soft cap and the sliding window.

    HeadChoices                         the steps, for the decoder page's "attention choices"
    head_choices(model, layer, head, q, k)   them, from the layer's q and k as the pass
                                        projected them (``LlamaLayerSteps.q`` and ``.k``),
                                        through the forward's own pieces: no second formula
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.attention import scaled_dot_product_attention
from attention_core.masks import sliding_window_mask
from attention_core.positional import rotate_half_pairs
from attention_core.validation import AttentionInputError

from .forward import qk_norm, rope_tables
from .model import LlamaModel

__all__ = ["HeadChoices", "head_choices"]


@dataclass(frozen=True, eq=False)
class HeadChoices:
    """One head's last query against every key, step by step.

    q, q_normed, q_rot   `(d_head,)` the query as projected, after QK-norm (None without
                         one), after RoPE (the same as before it in a NoPE layer)
    k, k_normed, k_rot   `(n, d_head)` the keys of the head's KV head, likewise
    raw                  `(n,)` q·k · scale, before any cap
    scaled               `(n,)` what the softmax reads: c·tanh(raw / c) with a soft cap c
    weights              `(n,)` softmax over the keys the query may see
    scale, softcap, rope_base, window    the layer's settings (softcap, rope_base and window
                         None where the layer has none)
    """

    q: np.ndarray
    q_normed: np.ndarray | None
    q_rot: np.ndarray
    k: np.ndarray
    k_normed: np.ndarray | None
    k_rot: np.ndarray
    raw: np.ndarray
    scaled: np.ndarray
    weights: np.ndarray
    scale: float
    softcap: float | None
    rope_base: float | None
    window: int | None


def head_choices(
    model: LlamaModel, layer: int, head: int, q: np.ndarray, k: np.ndarray
) -> HeadChoices:
    """The last query of ``head`` in ``layer`` through the layer's choices. q `(head, n,
    d_head)` and k `(kv_head, n, d_head)`: the layer's projections for positions 0..n-1,
    before any norm or rotation."""
    config = model.config
    if not (0 <= layer < config.num_hidden_layers and 0 <= head < config.num_attention_heads):
        raise AttentionInputError(
            f"Layer {layer + 1}, head {head + 1} is past this model's "
            f"{config.num_hidden_layers} layers of {config.num_attention_heads} heads."
        )
    q_normed = k_normed = None
    turned_q, turned_k = q, k
    if config.qk_norm is not None:
        q_normed, k_normed = qk_norm(config, model.weights.layers[layer], q, k)
        turned_q, turned_k = q_normed, k_normed
    n, base = q.shape[-2], config.rope_base(layer)
    if base is not None:
        cos, sin = rope_tables(config, 0, n, like=q, base=base)
        turned_q, turned_k = (
            rotate_half_pairs(turned_q, cos, sin),
            rotate_half_pairs(turned_k, cos, sin),
        )
    kv = head // config.group_size
    window = config.window(layer)
    mask = None if window is None else sliding_window_mask(1, window, n, first_query=n - 1)
    # Only the weights are shown here: the values are zeros of width 1.
    values = np.zeros((n, 1), q.dtype)  # pragma: no mutate
    steps = scaled_dot_product_attention(
        turned_q[head, -1:], turned_k[kv], values, mask=mask, scale=config.scale,
        softcap=config.attn_softcap,
    )  # fmt: skip
    return HeadChoices(
        q=q[head, -1],
        q_normed=None if q_normed is None else q_normed[head, -1],
        q_rot=turned_q[head, -1],
        k=k[kv],
        k_normed=None if k_normed is None else k_normed[kv],
        k_rot=turned_k[kv],
        raw=steps.scores[0] * steps.scale,
        scaled=steps.scaled[0],
        weights=steps.weights[0],
        scale=steps.scale,
        softcap=config.attn_softcap,
        rope_base=base,
        window=window,
    )
