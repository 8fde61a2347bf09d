"""The forward pass of a llama-style decoder (SmolLM2-135M-Instruct, Llama, Qwen2, Qwen3,
SmolLM3, OLMo 2, Gemma 2 and 3), our own NumPy code.

Hugging Face ``LlamaForCausalLM``'s forward pass in eval mode, for `n` new tokens at positions
p .. p+n-1 after a cache holding positions 0 .. p-1 (p = 0 for a fresh prompt), with the
pieces the other families switch on (``LlamaConfig``) in brackets:

    h_0 = E[ids]                             [× √d_model: Gemma]            (n, d_model)
    for each layer:
        x   = RMSNorm(h)                     RMSNorm(x) = x / sqrt(mean(x²) + eps) · γ
                                             [none before the block: OLMo 2]
        q   = x W_qᵀ + b_q -> (head, n, d_head)       k, v = x W_kᵀ + b_k, x W_vᵀ + b_v
                                             [biases: Qwen2]          -> (kv_head, n, d_head)
        q,k = RMSNorm(q), RMSNorm(k)         [QK-norm per head: Qwen3, Gemma 3; over the
                                             whole projection: OLMo 2]
        q,k = RoPE(q, positions), RoPE(k, positions)    rotate_half, llama3-scaled or not
                                             [the layer's own base: Gemma 3; none: SmolLM3's
                                             NoPE layers]
        K,V = cache.append(k, v)                                  (kv_head, p+n, d_head)
        s   = q_h K_gᵀ · scale               scale = 1/√d_head [query_pre_attn_scalar^-½:
                                             Gemma]; [c·tanh(s/c): Gemma 2]
        o_h = softmax(s + causal) V_g        head h reads KV head g = h // (H/KV)
                                             [only the last W keys in a local layer]
        a   = concat(o_h) W_oᵀ               [RMSNorm(a): Gemma, OLMo 2]
        h   = h + a
        m   = W_down (act(y W_gateᵀ) ⊙ (y W_upᵀ)),  y = RMSNorm(h) [OLMo 2: y = h]
                                             act = SiLU [GELU, tanh form: Gemma]
        h   = h + m                          [h + RMSNorm(m): Gemma, OLMo 2]
    logits = RMSNorm(h) W_headᵀ              [c·tanh(logits/c): Gemma 2]
                                             W_head = E when tied: the embedding read backwards

Gemma stores each norm's gain as γ − 1; it is read back as γ, so one RMSNorm serves all.

Grouped-query attention (GQA) is a broadcast, not a copy: queries are shaped
`(kv_head, group, n, d_head)` and keys `(kv_head, 1, k_pos, d_head)`, so the shared
`decoding.decode_step` / `attention.scaled_dot_product_attention` give each group of H/KV query
heads the same keys and values, exactly what ``transformers``' ``repeat_kv`` builds.

The products read the weights as stored (``weights.py``): a bfloat16 matrix is widened to
float32 a block of rows at a time just before its product (``linear``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from attention_core.attention import soft_cap
from attention_core.decoding import KVCache, check_attend, decode_step
from attention_core.masks import sliding_window_mask
from attention_core.positional import llama3_frequencies, rotary_tables, rotate_half_pairs
from attention_core.validation import AttentionInputError, check_token_ids

from .. import passes, points
from ..decoder import MAX_CONTEXT_TOKENS, MAX_SCORED_TOKENS
from ..layers import gelu_tanh, rms_norm, silu
from .config import LlamaConfig
from .files import widen
from .model import LlamaModel
from .steps import LlamaCache, LlamaLayerSteps, LlamaTrace
from .weights import LlamaLayerWeights

__all__ = [
    "MAX_CONTEXT_TOKENS",
    "MAX_SCORED_TOKENS",
    "head_logits",
    "linear",
    "qk_norm",
    "read_text",
    "rope_tables",
    "run_llama",
]


def run_llama(
    model: LlamaModel,
    input_ids: object,
    cache: LlamaCache | None = None,
    *,
    all_logits: bool = False,
    attend: object = None,
    head_mask: object = None,
    edits: Mapping[str, points.Edit] | None = None,
    keep: Sequence[str] | None = None,
    start: tuple[int, np.ndarray] | None = None,
    tokens: Sequence[int] | None = None,
) -> LlamaTrace:
    """Run the decoder on ``input_ids`` `(n,)`, continuing ``cache`` (None = a fresh prompt).

    Every layer's steps are kept (see ``LlamaLayerSteps``); ``trace.cache`` holds all positions.
    With a cache and one id this is one decoding step: one query row against every cached key.

    ``keep`` names the steps to keep of each layer (``("weights", "q_rot")``; ``()`` for none,
    when only the logits and the cache are wanted): ``trace.layers`` then holds ``KeptSteps``,
    and the rest of a layer's steps is let go before the next layer runs. A pass keeping
    everything holds its (head, n, n) scores four times over in every layer: 340 MB at its
    peak for 192 tokens.

    ``attend`` `(cache + n,)` boolean hides keys (False) from every query, like transformers'
    ``attention_mask``; `(n, cache + n)` says for each new query which keys it may see (on top
    of the causal mask: a sliding window, sinks). ``head_mask`` `(layer, head)` or `(head,)`
    multiplies each query head's output before W_o (0 removes the head, as transformers 4's
    ``head_mask`` did for BERT): an edit of each ``layer.{l}.heads`` (``points.head_scaling``).

    ``edits`` maps the names of ``attention_core.models.points`` (``points.resid(3)``,
    ``points.heads(7)``…) to functions of the activation there (the n new positions: resid
    `(n, d_model)`, heads `(head, n, d_head)`, attn_out and mlp_out `(n, d_model)`) that return
    its replacement, of the same shape; the pass goes on with the replacement, and the trace
    keeps it (``trace.point(name)`` reads what the pass went on with). The softmax steps (and
    ``attention.output``) are kept as computed, before an edit of the heads.

    ``start`` = (l, stream) begins the pass at layer boundary l with ``stream`` as resid.l
    instead of running layers 0..l-1 on the embeddings: `(n, d_model)`, or `(batch, n,
    d_model)` for a batch of streams over the same ids (activation patching runs one per
    patch). With a batch every point, edit and the logits gain that leading axis; layers
    before l keep no steps (``trace.point`` of a point before l is an error, resid.l reads
    ``stream``), and ``cache`` is then read from layer l on: an unbatched cache of a common
    prefix broadcasts over the batch (``trace.cache`` is None for a pass started past layer 0
    without one).

    ``tokens`` names the vocabulary ids whose logits the pass computes (all by default), for a
    caller that reads a few: logits are then `(..., n_logits, len(tokens))` in that order.
    """
    ids, past, attend, edits = _checked_inputs(model, input_ids, cache, attend, head_mask, edits)
    first, stream = passes.checked_start(model.config, start, ids.shape[0])
    if past + ids.shape[0] > MAX_CONTEXT_TOKENS:
        raise AttentionInputError(
            f"{past + ids.shape[0]} tokens is more than this page's maximum of "
            f"{MAX_CONTEXT_TOKENS} (prompt and generated tokens together): start again with a "
            "shorter prompt."
        )
    weights = model.weights
    rows = ids.shape[0] if stream is None else stream.size // stream.shape[-1]
    embeddings, ropes, scratch = _start(model, ids, past, rows)
    layers, caches = passes.skipped(first, cache)
    embeddings, hidden = passes.first_stream(edits, first, embeddings, stream, layers)
    attends = _layer_attends(model.config, attend, past, ids.shape[0])
    for steps, layer_cache in _layer_by_layer(
        model, hidden, ropes, scratch, cache=cache, attends=attends, edits=edits, first=first
    ):
        layers.append(passes.kept(steps, keep))
        caches.append(layer_cache)
        hidden = steps.hidden
        del steps  # what keep leaves goes now, not once the next layer has run
    final = rms_norm(hidden, weights.final_norm, model.config.rms_norm_eps)
    logits = passes.read_logits(
        final,
        weights.unembedding,
        lambda x, w: head_logits(model, x, w, scratch),
        all_logits=all_logits,
        tokens=tokens,
    )
    return LlamaTrace(
        input_ids=ids.astype(np.int64),
        positions=np.arange(past, past + ids.shape[0]),
        embeddings=embeddings,
        layers=tuple(layers),
        final_hidden=final,
        logits=logits,
        # A pass started past layer 0 without a cache has none for the layers it skipped.
        cache=LlamaCache(tuple(caches), model.config.num_attention_heads)
        if len(caches) == len(weights.layers)
        else None,
    )


def read_text(
    model: LlamaModel,
    input_ids: object,
    *,
    attend: object = None,
    first: int = 1,
    kv_codec: object = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``score_text``'s pass without its logits: the checked ids `(n,)`, the stream after the
    final RMSNorm `(n, d_model)` and the first keys' weights `(layer, head, first)`. For
    callers that read the logits of several passes together (``kv_experiments``)."""
    ids, _, attend, _ = _checked_inputs(model, input_ids, None, attend, None, None)
    first = passes.checked_text(ids.shape[0], first, model.text_limit)
    weights = model.weights
    hidden, ropes, scratch = _start(model, ids, 0)
    attends = _layer_attends(model.config, attend, 0, ids.shape[0])
    layers = _layer_by_layer(model, hidden, ropes, scratch, attends=attends, kv_codec=kv_codec)
    hidden, shares = passes.first_key_shares(layers, hidden, first)
    final = rms_norm(hidden, weights.final_norm, model.config.rms_norm_eps)
    return ids, final, shares


def _checked_inputs(model, input_ids, cache, attend, head_mask, edits):
    """ids `(n,)`, the cache's length, attend checked and shaped, and the edits checked, with
    head_mask's among them (None when there are none)."""
    config = model.config
    ids = check_token_ids(input_ids, config.vocab_size)
    if cache is not None:
        _check_cache(cache, config)
    past = 0 if cache is None else cache.length
    n, h_heads = ids.shape[0], config.num_attention_heads
    attend = check_attend(attend, past, n)
    if head_mask is not None:
        head_mask = np.asarray(head_mask, dtype=np.float32)
        if head_mask.shape not in ((h_heads,), (config.num_hidden_layers, h_heads)):
            raise AttentionInputError(
                f"head_mask must be shaped ({config.num_hidden_layers}, {h_heads}) or "
                f"({h_heads},), got {head_mask.shape}."
            )
        head_mask = np.broadcast_to(head_mask, (config.num_hidden_layers, h_heads))
    edits = points.check_edits(edits, config.num_hidden_layers)
    if head_mask is not None:
        scaling = points.head_scaling(head_mask)
        both = sorted(set(scaling) & set(edits or {}))
        if both:
            raise AttentionInputError(
                f"head_mask and edits both change {', '.join(both)}: give that layer's head "
                "multipliers in the edit instead."
            )
        edits = {**scaling, **(edits or {})} or None
    return ids, past, attend, edits


def _start(model: LlamaModel, ids: np.ndarray, past: int, rows: int | None = None):
    """The embeddings `(n, d_model)` float32, each layer's RoPE (cos, sin) for positions
    past .. past+n-1 (None for a NoPE layer), and the buffer every widened weight block is
    written into (None for float32 weights) for products of ``rows`` rows (n by default)."""
    config, weights = model.config, model.weights
    n = ids.shape[0]
    embeddings = widen(weights.embed[ids])  # (n, d_model) float32
    if config.embed_scale is not None:
        # Gemma's embeddings are small and shared with the head: √d_model brings them up to the
        # scale of what the layers add.
        embeddings *= np.float32(config.embed_scale)
    # RoPE's cos/sin depend only on the positions and the base: one table per base.
    tables = {
        base: rope_tables(config, past, n, like=embeddings, base=base)
        for base in {config.rope_base(i) for i in range(config.num_hidden_layers)} - {None}
    }
    ropes = tuple(tables.get(config.rope_base(i)) for i in range(config.num_hidden_layers))
    # The buffer's size sets only how many rows a product widens at once, never a number.
    rows = n if rows is None else rows  # pragma: no mutate
    return embeddings, ropes, _widening_buffer(model, rows)


def rope_tables(
    config: LlamaConfig, past: int, n: int, *, like: np.ndarray, base: float | None = None
):
    """RoPE's (cos, sin) `(n, d_head)` for positions past .. past+n-1, as this model turns q
    and k (Llama 3.1's scaled frequencies where its config has them), in `like`'s dtype.
    ``base``: a layer's own RoPE base (``config.rope_base(layer)``; rope_theta by default)."""
    base = config.rope_theta if base is None else base
    positions = np.arange(past, past + n, dtype=np.float64)
    frequencies = (
        None
        if config.rope_llama3 is None
        else llama3_frequencies(config.head_dim, base, *config.rope_llama3)
    )
    return rotary_tables(positions, config.head_dim, base, like=like, frequencies=frequencies)


def _layer_attends(
    config: LlamaConfig, attend: np.ndarray | None, past: int, n: int
) -> tuple[np.ndarray | None, ...]:
    """Each layer's ``attend``: the caller's, and for a local layer its window too, `(n, past +
    n)` (one mask per window size, shared by the layers that slide it)."""
    windows = {config.window(i) for i in range(config.num_hidden_layers)} - {None}
    masks = {}
    for window in windows:
        # The window reaches back from each new query's own position, past its cached keys.
        local = sliding_window_mask(n, window, past + n, first_query=past)
        masks[window] = local if attend is None else local & attend
    return tuple(masks.get(config.window(i), attend) for i in range(config.num_hidden_layers))


def head_logits(
    model: LlamaModel, final: np.ndarray, unembedding: np.ndarray, scratch: np.ndarray | None
) -> np.ndarray:
    """The logits final Wᵀ of the stream after the final norm, soft-capped where the family
    caps them (Gemma 2's c·tanh(x/c))."""
    logits = linear(final, unembedding, scratch)
    cap = getattr(model.config, "final_softcap", None)  # GPT-2's config has no caps to name
    return logits if cap is None else soft_cap(logits, np.float32(cap))


def _widening_buffer(model: LlamaModel, n: int) -> np.ndarray | None:
    """The buffer a pass over n new tokens widens every weight block into (None for float32
    weights)."""
    if model.weights.storage == "float32":
        return None
    if n < 16:
        # A decoding step's one query row: 1 MiB, a core's L2, keeps a block in the cache while
        # it is used, where larger and smaller blocks are both slower.
        return np.empty(2**18, np.float32)
    # A prompt: a layer's largest matrix whole (gate and up side by side, 7 MB), one product
    # per matrix. Each product gives up the GIL and waits to take it back, and on a busy server
    # that wait is the cost: fewer, larger products wait less, and alone they cost the same
    # (bench/bench_gil_wait.py).
    layer = model.weights.layers[0]
    return np.empty(max(w.size for w in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down)),
                    np.float32)  # fmt: skip


def _layer_by_layer(
    model: LlamaModel,
    hidden: np.ndarray,
    ropes: tuple[tuple[np.ndarray, np.ndarray] | None, ...],
    scratch: np.ndarray | None,
    *,
    cache: LlamaCache | None = None,
    attends: tuple[np.ndarray | None, ...],
    edits: Mapping[str, points.Edit] | None = None,
    kv_codec: object = None,
    first: int = 0,
) -> Iterator[tuple[LlamaLayerSteps, KVCache]]:
    """Each decoder layer's steps and grown cache in turn, from layer ``first`` on, each layer
    reading the output of the one before, from `hidden` `(..., n, d_model)` on. A caller that
    drops a layer's steps before asking for the next has at most one layer's steps alive (the
    generator drops its own)."""
    for index, layer in enumerate(model.weights.layers[first:], start=first):
        steps, layer_cache = _decoder_layer(
            model, index, layer, hidden, None if cache is None else cache.layers[index],
            ropes[index], attends[index], edits, scratch, kv_codec,
        )  # fmt: skip
        hidden = steps.hidden
        yield steps, layer_cache
        del steps, layer_cache


def _decoder_layer(
    model: LlamaModel,
    index: int,
    layer: LlamaLayerWeights,
    hidden: np.ndarray,
    cache: KVCache | None,
    rope: tuple[np.ndarray, np.ndarray] | None,
    attend: np.ndarray | None,
    edits: Mapping[str, points.Edit] | None,
    scratch: np.ndarray | None,
    kv_codec: object = None,
) -> tuple[LlamaLayerSteps, KVCache]:
    """One decoder layer on `hidden` `(n, d_model)` (or `(batch, n, d_model)`: every array
    below gains the leading axis): its steps, and its cache grown by n. The layer's points go
    through ``edits`` (None: none, and not one lookup). ``rope`` None: a NoPE layer."""
    config = model.config
    h_heads, kv_heads, dh = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    group, eps, n = config.group_size, config.rms_norm_eps, hidden.shape[-2]
    batch = hidden.shape[:-2]  # () for one sequence
    x = hidden if layer.attn_norm is None else rms_norm(hidden, layer.attn_norm, eps)
    qkv = linear(x, layer.w_qkv, scratch)  # (n, (H + 2·KV)·d_head): q, k, v side by side
    if layer.b_qkv is not None:  # Qwen2: q, k and v are affine, o is not
        qkv += layer.b_qkv
    qkv = np.moveaxis(qkv.reshape(*batch, n, h_heads + 2 * kv_heads, dh), -2, -3)
    q = qkv[..., :h_heads, :, :]  # (head, n, d_head)
    k = qkv[..., h_heads : h_heads + kv_heads, :, :]  # (kv_head, n, d_head)
    v = qkv[..., h_heads + kv_heads :, :, :]  # (kv_head, n, d_head)
    qk = qkv[..., : h_heads + kv_heads, :, :]  # q and k, turned by RoPE at once
    q_normed = k_normed = None
    if config.qk_norm is not None:
        # QK-norm fixes the length of q and k, so no score can grow without bound as training
        # pushes the projections' weights up: the softmax cannot saturate by accident.
        q_normed, k_normed = qk_norm(config, layer, q, k)
        qk = np.concatenate([q_normed, k_normed], axis=-3)
    # RoPE turns each (i, i + d/2) pair by an angle ∝ position, so q·k sees only the offset;
    # a NoPE layer turns nothing and sees positions only through the causal mask.
    qk_rot = qk if rope is None else rotate_half_pairs(qk, *rope)
    q_rot, k_rot = qk_rot[..., :h_heads, :, :], qk_rot[..., h_heads:, :, :]
    cached_k, cached_v = (k_rot, v) if kv_codec is None else kv_codec(index, k_rot, v)
    # GQA: the `group` query heads of a KV head broadcast against its one key/value set.
    step = decode_step(
        cache,
        q_rot.reshape(*batch, kv_heads, group, n, dh),
        cached_k[..., None, :, :],
        cached_v[..., None, :, :],
        scale=config.scale,
        softcap=config.attn_softcap,
        attend=attend,
        checked=False,  # ids and cache were checked by the caller; these arrays are our own
    )
    computed_heads = step.output.reshape(*batch, h_heads, n, dh)  # (head, n, d_head)
    head_outputs = points.edit_at(edits, points.heads, index, computed_heads)
    # The steps keep an edited copy only: unedited, the heads are attention.output.
    edited_heads = None if head_outputs is computed_heads else head_outputs
    concat = np.moveaxis(head_outputs, -3, -2).reshape(*batch, n, h_heads * dh)
    attn_output = linear(concat, layer.w_o, scratch)  # (n, d_model)
    if layer.post_attn_norm is not None:
        # Gemma and OLMo 2 normalise what a block writes, so no block can swamp the stream.
        attn_output = rms_norm(attn_output, layer.post_attn_norm, eps)
    attn_output = points.edit_at(edits, points.attn_out, index, attn_output)
    # Residuals: each block reads a (normalised) copy of the stream and adds its result back.
    residual = hidden + attn_output
    y = residual if layer.ffn_norm is None else rms_norm(residual, layer.ffn_norm, eps)
    # A gated MLP: the activated gate decides, element by element, how much of `up` passes.
    gate_up = linear(y, layer.w_gate_up, scratch)  # (n, 2·d_ff): gate, up side by side
    gate, up = gate_up[..., : config.intermediate_size], gate_up[..., config.intermediate_size :]
    gated = gelu_tanh(gate) if config.activation == "gelu_tanh" else silu(gate)
    gated *= up
    ffn_output = linear(gated, layer.w_down, scratch)  # (n, d_model)
    if layer.post_ffn_norm is not None:
        ffn_output = rms_norm(ffn_output, layer.post_ffn_norm, eps)
    ffn_output, output = passes.layer_output(edits, index, residual, ffn_output)
    steps = LlamaLayerSteps(
        input=hidden, attn_norm=x, q=q, k=k, v=v, q_rot=q_rot, k_rot=k_rot,
        attention=step.attention, attn_output=attn_output, ffn_output=ffn_output, hidden=output,
        edited_heads=edited_heads, q_normed=q_normed, k_normed=k_normed,
    )  # fmt: skip
    return steps, step.cache


def qk_norm(
    config: LlamaConfig, layer: LlamaLayerWeights, q: np.ndarray, k: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """q `(head, n, d_head)` and k `(kv_head, n, d_head)` RMS-normalised: each head's vector
    on its own (Qwen3, Gemma 3), or all heads' together as the projection wrote them (OLMo 2)."""
    eps = config.rms_norm_eps
    if config.qk_norm == "head":
        return rms_norm(q, layer.q_norm, eps), rms_norm(k, layer.k_norm, eps)

    def whole(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
        # NumPy reads any negative size as "the rest": -1 and its mutants are one reshape.
        flat = np.moveaxis(x, -3, -2).reshape(*x.shape[:-3], x.shape[-2], -1)  # pragma: no mutate
        normed = rms_norm(flat, gain, eps).reshape(*x.shape[:-3], x.shape[-2], *x.shape[-3::2])
        return np.moveaxis(normed, -2, -3)

    return whole(q, layer.q_norm), whole(k, layer.k_norm)


def _check_cache(cache: object, config: LlamaConfig) -> None:
    """A cache from ``run_llama`` on a model of this architecture (run_llama's layers trust
    it)."""
    layers, kv = config.num_hidden_layers, config.num_key_value_heads
    if not isinstance(cache, LlamaCache):
        raise AttentionInputError(
            "cache must be the LlamaCache of an earlier run_llama call (or None for a prompt)."
        )
    shape = cache.shape
    if (
        shape[0] != layers
        or shape[2] != kv
        or shape[4] != config.head_dim
        or any(c.keys.dtype != np.float32 or c.values.shape != c.keys.shape for c in cache.layers)
    ):
        raise AttentionInputError(
            f"The cache has shape {shape} (layer, K and V, KV head, position, d_head) but this "
            f"model needs ({layers}, 2, {kv}, position, {config.head_dim}) in float32: it comes "
            "from another model."
        )


def linear(x: np.ndarray, w: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """y = x Wᵀ `(n, out)` in float32, W stored `(out, in)`.

    A bfloat16 (or float16) W is widened a block of rows at a time into ``scratch`` (a float32
    buffer; its size over W's width sets the rows per block), just before their product: no
    float32 copy of W is ever made (for the tied head a 113 MB temporary), and the buffer is
    allocated once per forward pass, not once per matrix.
    """
    if w.dtype == np.float32:
        return x @ w.T
    if x.ndim != 2:  # a batch of sequences: one product over all their rows
        return linear(x.reshape(-1, x.shape[-1]), w, scratch).reshape(*x.shape[:-1], -1)
    if scratch is None:  # 512 rows at a time, as a prompt's pass does (`_start`)
        scratch = np.empty(min(w.shape[0], 512) * w.shape[1], dtype=np.float32)
    rows = max(1, min(w.shape[0], scratch.size // w.shape[1]))
    out = np.empty((x.shape[0], w.shape[0]), dtype=np.float32)
    for start in range(0, w.shape[0], rows):
        part = w[start : start + rows]
        wide = widen(part, out=scratch[: part.size].reshape(part.shape))
        np.matmul(x, wide.T, out=out[:, start : start + part.shape[0]])
    return out
