"""The forward pass of GPT-2, our own NumPy code.

Hugging Face ``GPT2LMHeadModel``'s forward pass in eval mode, for `n` new tokens at positions
p .. p+n-1 after a cache holding positions 0 .. p-1 (p = 0 for a fresh prompt):

    h_0 = wte[ids] + wpe[p .. p+n-1]                                    (n, d_model)
    for each block l:
        x     = LayerNorm_1(h)             LayerNorm(x) = (x - mean) / sqrt(var + eps) · γ + β
        q,k,v = x W_qᵀ + b_q, x W_kᵀ + b_k, x W_vᵀ + b_v  -> (head, n, d_head) each
        K,V   = cache.append(k, v)                                  (head, p+n, d_head)
        o_h   = softmax(q_h K_hᵀ / √d_head + causal) V_h             (head, n, d_head)
        h     = h + concat(o_h) W_oᵀ + b_o
        h     = h + GELU(LayerNorm_2(h) W_fcᵀ + b_fc) W_projᵀ + b_proj
    logits = LayerNorm_f(h) wteᵀ                 tied head: the embedding matrix read backwards

Positions enter once, as learned vectors added to the token embeddings (no rotation of q and
k, unlike llama's RoPE): the attention itself sees only what the stream carries. GELU is the
checkpoint's own form (``config.activation_function``: "gelu_new", the tanh approximation
GPT-2 was trained with, or the exact "gelu"). The attention of every block is
``decoding.decode_step``: the new keys and values appended to the cache, then the project's one
scaled dot-product attention (``attention_core.attention``) from the new queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from attention_core.decoding import KVCache, check_attend, decode_step
from attention_core.validation import AttentionInputError, check_token_ids

from .. import passes, points
from ..layers import gelu, gelu_tanh, layer_norm
from .config import GPT2Config
from .model import GPT2Model
from .steps import GPT2Cache, GPT2LayerSteps, GPT2Trace
from .weights import GPT2LayerWeights

__all__ = ["read_text", "run_gpt2"]

_ACTIVATION = {"gelu_new": gelu_tanh, "gelu": gelu}


def run_gpt2(
    model: GPT2Model,
    input_ids: object,
    cache: GPT2Cache | None = None,
    *,
    all_logits: bool = False,
    attend: object = None,
    edits: Mapping[str, points.Edit] | None = None,
    keep: Sequence[str] | None = None,
    start: tuple[int, np.ndarray] | None = None,
    tokens: Sequence[int] | None = None,
) -> GPT2Trace:
    """Run GPT-2 on ``input_ids`` `(n,)`, continuing ``cache`` (None = a fresh prompt).

    Every block's steps are kept (``GPT2LayerSteps``); ``trace.cache`` holds all positions, so
    ``run_gpt2(model, [next_id], trace.cache)`` is one decoding step: one query row against
    every cached key, the same numbers as the whole sequence run again.

    ``attend`` `(cache + n,)` boolean hides keys (False) from every query, like transformers'
    ``attention_mask``; `(n, cache + n)` says for each new query which keys it may see (on top
    of the causal mask).

    ``edits`` maps the names of ``attention_core.models.points`` (``points.resid(1)``,
    ``points.heads(0)``…) to functions of the activation there (the n new positions: resid
    `(n, d_model)`, heads `(head, n, d_head)`, attn_out and mlp_out `(n, d_model)`) that return
    its replacement, of the same shape; the pass goes on with the replacement, and the trace
    keeps it (``trace.point(name)``). The softmax steps are kept as computed.

    ``keep``, ``start`` and ``tokens`` are ``run_llama``'s: the steps kept of each block
    (``KeptSteps``), a pass begun at layer boundary l from a stream `(n, d_model)` or `(batch,
    n, d_model)` (every point, edit and the logits then gain the batch axis), and the
    vocabulary ids whose logits are computed.
    """
    config, weights = model.config, model.weights
    ids, past, attend, edits = _checked_inputs(config, input_ids, cache, attend, edits)
    n = ids.shape[0]
    first, stream = passes.checked_start(config, start, n)
    token_embeddings = weights.wte[ids]  # (n, d_model)
    position_embeddings = weights.wpe[past : past + n]  # (n, d_model): row p for position p
    # A token's vector says what it is, its position's vector where it is: one sum carries both.
    embeddings = token_embeddings + position_embeddings
    layers, caches = passes.skipped(first, cache)
    embeddings, hidden = passes.first_stream(edits, first, embeddings, stream, layers)
    for index, layer in enumerate(weights.layers[first:], start=first):
        layer_cache = None if cache is None else cache.layers[index]
        steps, grown = _block(config, index, layer, hidden, layer_cache, attend, edits)
        layers.append(passes.kept(steps, keep))
        caches.append(grown)
        hidden = steps.hidden
        del steps  # what keep leaves goes now, not once the next block has run
    final = layer_norm(hidden, weights.ln_f_weight, weights.ln_f_bias, config.layer_norm_epsilon)
    logits = passes.read_logits(
        final, weights.lm_head, lambda x, w: x @ w.T, all_logits=all_logits, tokens=tokens
    )  # (..., n_logits, vocab)
    return GPT2Trace(
        input_ids=ids.astype(np.int64),
        positions=np.arange(past, past + n),
        token_embeddings=token_embeddings,
        position_embeddings=position_embeddings,
        embeddings=embeddings,
        layers=tuple(layers),
        final_hidden=final,
        logits=logits,
        # A pass started past block 0 without a cache has none for the blocks it skipped.
        cache=GPT2Cache(tuple(caches)) if len(caches) == len(weights.layers) else None,
    )


def read_text(
    model: GPT2Model,
    input_ids: object,
    *,
    attend: object = None,
    first: int = 1,
    kv_codec: object = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``llama.read_text`` for GPT-2: a text read block by block, keeping no steps: the checked
    ids `(n,)`, the stream after ln_f `(n, d_model)` and the first keys' weights `(layer, head,
    first)`. ``kv_codec(layer, k, v) -> (k, v)`` replaces each block's new keys and values
    `(head, n, d_head)` before attention reads them (a smaller KV cache)."""
    config, weights = model.config, model.weights
    ids, _, attend, _ = _checked_inputs(config, input_ids, None, attend, None)
    first = passes.checked_text(ids.shape[0], first, model.text_limit)
    hidden = weights.wte[ids] + weights.wpe[: ids.shape[0]]  # (n, d_model)

    def blocks():
        stream = hidden
        for index, layer in enumerate(weights.layers):
            steps, grown = _block(config, index, layer, stream, None, attend, None, kv_codec)
            stream = steps.hidden
            yield steps, grown
            del steps, grown

    hidden, shares = passes.first_key_shares(blocks(), hidden, first)
    final = layer_norm(hidden, weights.ln_f_weight, weights.ln_f_bias, config.layer_norm_epsilon)
    return ids, final, shares


def _block(
    config: GPT2Config,
    index: int,
    layer: GPT2LayerWeights,
    hidden: np.ndarray,
    cache: KVCache | None,
    attend: np.ndarray | None,
    edits: Mapping[str, points.Edit] | None,
    kv_codec: object = None,
) -> tuple[GPT2LayerSteps, KVCache]:
    """One block on `hidden` `(n, d_model)` (or `(batch, n, d_model)`: every array below gains
    the leading axis): its steps, and its cache grown by n. The block's points go through
    ``edits`` (None: none, and not one lookup); ``kv_codec``, given, replaces the new keys and
    values the cache keeps."""
    heads, dh, eps = config.n_head, config.head_dim, config.layer_norm_epsilon
    *batch, n, _ = hidden.shape
    x = layer_norm(hidden, layer.ln_1_weight, layer.ln_1_bias, eps)
    qkv = x @ layer.w_qkv.T + layer.b_qkv  # (n, 3·d_model): q, k, v side by side (c_attn)
    qkv = np.moveaxis(qkv.reshape(*batch, n, 3 * heads, dh), -2, -3)  # (3·head, n, d_head)
    q, k, v = (qkv[..., i * heads : (i + 1) * heads, :, :] for i in range(3))  # (head, n, d_head)
    cached_k, cached_v = (k, v) if kv_codec is None else kv_codec(index, k, v)
    step = decode_step(
        cache,
        q,
        cached_k,
        cached_v,
        scale=config.attention_scale(index),
        attend=attend,
        checked=False,  # ids, cache and attend were checked by run_gpt2; these are our arrays
    )
    head_outputs = points.edit_at(edits, points.heads, index, step.output)  # (head, n, d_head)
    concat = np.moveaxis(head_outputs, -3, -2).reshape(*batch, n, heads * dh)
    attn_output = concat @ layer.w_o.T + layer.b_o  # (n, d_model): W_o mixes the heads
    attn_output = points.edit_at(edits, points.attn_out, index, attn_output)
    # Pre-norm residuals: each sublayer reads a normalised copy and adds its result back.
    residual = hidden + attn_output
    y = layer_norm(residual, layer.ln_2_weight, layer.ln_2_bias, eps)
    ffn_hidden = _ACTIVATION[config.activation_function](y @ layer.w_fc.T + layer.b_fc)
    ffn_output, output = passes.layer_output(
        edits, index, residual, ffn_hidden @ layer.w_proj.T + layer.b_proj
    )
    steps = GPT2LayerSteps(
        input=hidden, attn_norm=x, q=q, k=k, v=v, attention=step.attention,
        head_outputs=head_outputs, attn_output=attn_output, ffn_norm=y, ffn_hidden=ffn_hidden,
        ffn_output=ffn_output, hidden=output,
    )  # fmt: skip
    return steps, step.cache


def _checked_inputs(config, input_ids, cache, attend, edits):
    """ids `(n,)`, the cache's length, attend checked, and the edits checked (None when there
    are none)."""
    ids = check_token_ids(input_ids, config.vocab_size)
    if cache is not None:
        _check_cache(cache, config)
    past, n = (0 if cache is None else cache.length), ids.shape[0]
    if past + n > config.n_positions:
        raise AttentionInputError(
            f"{past + n} tokens is more than the {config.n_positions} positions this GPT-2 "
            f"learned: its position table has no row for position {config.n_positions}. "
            "Use a shorter text."
        )
    return ids, past, check_attend(attend, past, n), points.check_edits(edits, config.n_layer)


def _check_cache(cache: object, config: GPT2Config) -> None:
    """A cache from ``run_gpt2`` on a model of this architecture (the blocks trust it)."""
    if not isinstance(cache, GPT2Cache):
        raise AttentionInputError(
            "cache must be the GPT2Cache of an earlier run_gpt2 call (or None for a prompt)."
        )
    shape = cache.shape
    if shape[0] != config.n_layer or shape[2] != config.n_head or shape[4] != config.head_dim:
        raise AttentionInputError(
            f"The cache has shape {shape} (layer, K and V, head, position, d_head) but this "
            f"model needs ({config.n_layer}, 2, {config.n_head}, position, {config.head_dim}): "
            "it comes from another model."
        )
