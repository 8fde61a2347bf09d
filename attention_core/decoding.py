"""Attention as a decoder generates: one new query at a time against a KV cache.

`decode_step` appends the new positions' keys and values to a `KVCache` and attends from their
queries to every position so far; `incremental_causal_attention` runs it for positions 0, 1,
..., n-1 and reproduces causal self-attention. What a cache costs in bytes, and the ways of
shrinking it, are `kv_cache.py`.

Shapes: q `(..., new, d_k)`, cached keys `(..., cached_pos, d_k)`, values `(..., cached_pos,
d_v)`, output `(..., new, d_v)`; masks are boolean, True = may attend. NumPy only.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .attention import (
    AttentionSteps,
    check_dot_product,
    scaled_dot_product,
    scaled_dot_product_attention,
    score_scale,
)
from .validation import AttentionInputError, as_matrix, broadcast_batch, check_int, check_size

__all__ = [
    "DecodeStep",
    "DecoderCache",
    "IncrementalDecoding",
    "KVCache",
    "check_attend",
    "decode_step",
    "incremental_causal_attention",
]


class _KVStore:
    """Key and value rows with room to grow, shared by a chain of caches.

    keys `(..., capacity, d_k)`, values `(..., capacity, d_v)`; rows 0..filled-1 are taken.
    Each cache is a read-only view of the first `length` rows. A row, once written, is never
    written again, so every cache of the chain keeps its contents while the newest one grows
    in place: appending costs the new rows only, not a copy of the whole cache per step.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray, needed: int) -> None:
        # Doubling makes growth amortised O(1) per row: a chain of n appends copies < 2n rows.
        capacity = max(2 * needed, 16)
        self.keys = np.empty((*keys.shape[:-2], capacity, keys.shape[-1]), keys.dtype)
        self.values = np.empty((*values.shape[:-2], capacity, values.shape[-1]), values.dtype)
        self.filled = 0
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return int(self.keys.shape[-2])

    def claim(self, start: int, count: int) -> bool:
        """Take rows start..start+count-1 if they are the next free ones (one caller wins)."""
        with self._lock:  # sessions share caches (a page keeps them), so two may append at once
            if self.filled != start or start + count > self.capacity:
                return False
            self.filled = start + count
            return True

    def write(self, start: int, keys: np.ndarray, values: np.ndarray) -> KVCache:
        stop = start + keys.shape[-2]
        self.keys[..., start:stop, :] = keys
        self.values[..., start:stop, :] = values
        return KVCache._view(self, stop)


@dataclass(frozen=True, eq=False)
class KVCache:
    """The keys and values of every position decoded so far.

    keys `(..., cached_pos, d_k)`, values `(..., cached_pos, d_v)`. A decoder computes each
    position's key and value once and appends them here, so step t costs t dot products instead
    of recomputing the whole t×t pattern. `append` returns a new cache (this one is unchanged).

    Like a decoder's preallocated cache, the rows live in a buffer with spare capacity
    (`reserved_bytes`, up to twice what is used): appending to the newest cache writes the new
    rows in place; appending to an older one (a second continuation of the same prefix) copies
    it into a new buffer. `keys` and `values` are read-only views holding exactly
    `length` positions.
    """

    keys: Any
    values: Any
    _store: _KVStore | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self._store is not None:  # a view made by `_view`, of rows already checked
            return
        keys = as_matrix(self.keys, "The cached keys")
        values = as_matrix(self.values, "The cached values")
        if keys.shape[-2] != values.shape[-2]:
            raise AttentionInputError(
                f"The cache holds {keys.shape[-2]} keys but {values.shape[-2]} values: every "
                "cached position needs one key and one value."
            )
        store = _KVStore(keys, values, keys.shape[-2])
        store.claim(0, keys.shape[-2])
        view = store.write(0, keys, values)
        object.__setattr__(self, "keys", view.keys)
        object.__setattr__(self, "values", view.values)
        object.__setattr__(self, "_store", store)

    @classmethod
    def _view(cls, store: _KVStore, length: int) -> KVCache:
        keys, values = store.keys[..., :length, :], store.values[..., :length, :]
        keys.setflags(write=False)
        values.setflags(write=False)
        return cls(keys, values, store)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle the used rows only; the copy gets a buffer of its own.
        return (KVCache, (np.array(self.keys), np.array(self.values)))

    @property
    def length(self) -> int:
        """The number of cached positions."""
        return int(self.keys.shape[-2])

    @property
    def reserved_bytes(self) -> int:
        """Bytes allocated for keys and values, the room to grow included (`keys.nbytes +
        values.nbytes` is what is used)."""
        store = self._store
        return 0 if store is None else store.keys.nbytes + store.values.nbytes

    def prefix(self, length: int) -> KVCache:
        """The cache of the first `length` positions, a view of the same rows: appending to it
        copies them first, since the positions after it are taken."""
        length = check_int(length, "length", minimum=0)
        if length > self.length:
            raise AttentionInputError(f"The cache holds {self.length} positions, not {length}.")
        if self._store is None:
            return KVCache(self.keys[..., :length, :], self.values[..., :length, :])
        return KVCache._view(self._store, length)

    def append(self, k_new: object, v_new: object) -> KVCache:
        """A cache with the new positions' keys `(..., new, d_k)` and values added at the end."""
        k_new = as_matrix(k_new, "The new keys")
        v_new = as_matrix(v_new, "The new values")
        for old, new, what in ((self.keys, k_new, "keys"), (self.values, v_new, "values")):
            if old.shape[-1] != new.shape[-1]:
                raise AttentionInputError(
                    f"The new {what} have {new.shape[-1]} columns but the cached ones have "
                    f"{old.shape[-1]}: every position must have the same width."
                )
        if k_new.shape[-2] != v_new.shape[-2]:
            raise AttentionInputError(
                f"{k_new.shape[-2]} new keys but {v_new.shape[-2]} new values: each new "
                "position brings one key and one value."
            )
        batch = broadcast_batch(
            ("cached keys", self.keys.shape[:-2]), ("new keys", k_new.shape[:-2])
        )
        check_size((*batch, self.length + k_new.shape[-2], k_new.shape[-1]), "The cache")
        return self._extend(k_new, v_new)

    def _extend(self, k_new: np.ndarray, v_new: np.ndarray) -> KVCache:
        """`append` for arrays already checked (same widths, batch dims that broadcast)."""
        store, start = self._store, self.length
        fits = (
            store is not None
            and k_new.shape[:-2] == store.keys.shape[:-2]
            and v_new.shape[:-2] == store.values.shape[:-2]
            and k_new.dtype == store.keys.dtype
            and v_new.dtype == store.values.dtype
        )
        if fits and store.claim(start, k_new.shape[-2]):
            return store.write(start, k_new, v_new)
        # A new buffer: the old rows are taken by a later position, or the shapes changed.
        batch = np.broadcast_shapes(self.keys.shape[:-2], k_new.shape[:-2])
        keys = np.concatenate(
            [np.broadcast_to(x, (*batch, *x.shape[-2:])) for x in (self.keys, k_new)], axis=-2
        )
        values = np.concatenate(
            [np.broadcast_to(x, (*batch, *x.shape[-2:])) for x in (self.values, v_new)], axis=-2
        )
        store = _KVStore(keys, values, keys.shape[-2])
        store.claim(0, keys.shape[-2])
        return store.write(0, keys, values)


@dataclass(frozen=True, eq=False)
class DecoderCache:
    """A whole decoder's KV cache: one ``KVCache`` per layer, keys and values `(kv_head, ...,
    pos, d_head)` (a family may keep a broadcast axis between heads and positions). Immutable:
    a pass returns a new cache, so a page can keep the old one."""

    layers: tuple[KVCache, ...]

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0

    @property
    def num_kv_heads(self) -> int:
        return int(self.layers[0].keys.shape[0])

    @property
    def head_dim(self) -> int:
        return int(self.layers[0].keys.shape[-1])

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """(layer, K and V, kv_head, pos, d_head)."""
        return (len(self.layers), 2, self.num_kv_heads, self.length, self.head_dim)

    @property
    def bytes_used(self) -> int:
        return sum(c.keys.nbytes + c.values.nbytes for c in self.layers)

    @property
    def bytes_reserved(self) -> int:
        return sum(c.reserved_bytes for c in self.layers)

    def prefix(self, length: int) -> DecoderCache:
        """Every layer's cache of the first `length` positions (``KVCache.prefix``)."""
        return replace(self, layers=tuple(layer.prefix(length) for layer in self.layers))

    def keys(self, layer: int) -> np.ndarray:
        """`(kv_head, pos, d_head)` cached keys of one layer (after RoPE, for a RoPE model)."""
        keys = self.layers[layer].keys
        return keys.reshape(keys.shape[0], *keys.shape[-2:])

    def values(self, layer: int) -> np.ndarray:
        """`(kv_head, pos, d_head)` cached values of one layer."""
        values = self.layers[layer].values
        return values.reshape(values.shape[0], *values.shape[-2:])


@dataclass(frozen=True, eq=False)
class DecodeStep:
    """One decoding step: the new queries against every cached key.

    position   absolute position of the first new query (= cache length before this step)
    cache      the cache after appending this step's keys and values
    attention  `AttentionSteps` of the new queries `(..., new, cached_pos)`; with several new
               positions (a prompt), new query i sees the keys up to position `position + i`
    """

    position: int
    cache: KVCache
    attention: AttentionSteps

    @property
    def output(self) -> Any:
        """`(..., new, d_v)` attention output of the new positions."""
        return self.attention.output


def decode_step(
    cache: KVCache | None,
    q_new: object,
    k_new: object,
    v_new: object,
    *,
    scale: float | None = None,
    softcap: float | None = None,
    attend: object = None,
    checked: bool = True,
) -> DecodeStep:
    """Append the new positions' keys and values to the cache, then attend from their queries.

    q_new `(..., new, d_k)`, k_new `(..., new, d_k)`, v_new `(..., new, d_v)`; usually new = 1.
    New query i sits at position p = cache.length + i and attends to cached keys 0..p:
        output_i = softmax(q_i Kᵀ_{0..p} · scale) V_{0..p}
    which is row p of causal self-attention over the whole sequence (the cache makes the
    causal mask's bottom-right alignment explicit). ``attend`` `(cache.length + new,)` boolean
    (True = may be attended to) also hides keys from every new query, like a padding mask.
    With ``softcap`` c the scores pass through c·tanh(· / c) before the softmax (Gemma 2).

    checked=False skips the input checks, for a caller that checked its input once and passes
    arrays it computed (float, matching widths and heads): a model's forward pass calls this
    for every layer of every step. The formula is the same.
    """
    if checked:
        q_new = as_matrix(q_new, "The new queries")
        k_new = as_matrix(k_new, "The new keys")
        if q_new.shape[-2] != k_new.shape[-2]:
            raise AttentionInputError(
                f"{q_new.shape[-2]} new queries but {k_new.shape[-2]} new keys: each new "
                "position brings one query, one key and one value."
            )
        if cache is not None and not isinstance(cache, KVCache):
            raise AttentionInputError("cache must be a KVCache (or None before the first step).")
    position = 0 if cache is None else cache.length
    if cache is None:
        cache = KVCache(k_new, v_new)
    else:
        cache = cache.append(k_new, v_new) if checked else cache._extend(k_new, v_new)
    new = q_new.shape[-2]
    mask = None
    if new > 1:
        # Bottom-right causal: the new queries are the last `new` positions of the sequence.
        mask = np.arange(cache.length)[None, :] <= (position + np.arange(new))[:, None]
    if attend is not None:
        mask = attend if mask is None else mask & attend  # (new, k_pos)
    if checked:
        attention = scaled_dot_product_attention(
            q_new, cache.keys, cache.values, mask=mask, scale=scale, softcap=softcap
        )
    else:
        scale = 1.0 / math.sqrt(q_new.shape[-1]) if scale is None else float(scale)
        attention = scaled_dot_product(
            np, q_new, cache.keys, cache.values, mask, scale, checked=False, softcap=softcap
        )
    return DecodeStep(position, cache, attention)


def check_attend(attend: object, past: int, new: int) -> np.ndarray | None:
    """A decoder pass's ``attend`` checked, for ``new`` positions after ``past`` cached ones:
    `(past + new,)` booleans (False hides that key from every new query) or `(new, past +
    new)` (a row for each new query), as ``decode_step`` takes it; None stays None."""
    if attend is None:
        return None
    attend = np.asarray(attend)
    if attend.shape not in ((past + new,), (new, past + new)) or attend.dtype != bool:
        raise AttentionInputError(
            f"attend must be {past + new} booleans, one per position (or ({new}, {past + new}): "
            f"one row per new query), got shape {attend.shape} and dtype {attend.dtype}."
        )
    return attend


@dataclass(frozen=True, eq=False)
class IncrementalDecoding:
    """Causal self-attention computed one position at a time with a KV cache.

    output   `(..., q_pos, d_v)`  equals causal scaled_dot_product_attention
    weights  `(..., q_pos, k_pos)` row t is step t's weights over keys 0..t, zeros after t
    cache    the final `KVCache` (all keys and values)
    """

    output: Any
    weights: Any
    cache: KVCache


def incremental_causal_attention(
    q: object, k: object, v: object, *, scale: float | None = None
) -> IncrementalDecoding:
    """Run `decode_step` for positions 0, 1, ..., n-1 and collect the outputs.

    Reproduces `scaled_dot_product_attention(q, k, v, mask=causal_mask(n))`: position t only
    ever sees keys 0..t, and those are exactly what the cache holds at step t.
    """
    _, q, k, v = check_dot_product(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        raise AttentionInputError(
            f"Q has {q.shape[-2]} rows but K has {k.shape[-2]}: decoding is self-attention, "
            "one query, key and value per position."
        )
    n = q.shape[-2]
    scale = score_scale(scale, q.shape[-1])
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    check_size((*batch, n, n), "The weights")
    weights = np.zeros((*batch, n, n), dtype=q.dtype)
    outputs = []
    cache = None
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below, once
        for t in range(n):
            step = decode_step(
                cache,
                q[..., t : t + 1, :],
                k[..., t : t + 1, :],
                v[..., t : t + 1, :],
                scale=scale,
                checked=False,  # q, k, v were checked above, once
            )
            cache = step.cache
            weights[..., t, : t + 1] = step.attention.weights[..., 0, :]
            outputs.append(step.output)
    output = np.concatenate(outputs, axis=-2)
    # Finite inputs give a non-finite output only through scores that overflowed.
    if not np.all(np.isfinite(output)):
        raise AttentionInputError(
            "Some attention scores overflowed to infinity: the inputs are too large for "
            f"{q.dtype}. Scale Q and K down (or use float64)."
        )
    return IncrementalDecoding(output, weights, cache)
