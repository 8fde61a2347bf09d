"""Boolean attention masks: True means "this query may attend to this key".

Every mask here has shape `(q_pos, k_pos)` (rows are queries, columns are keys), so it broadcasts
over any batch and head dimensions in front. Masks are applied in exactly one place,
`attention.scaled_dot_product_attention` (and the other scoring functions), by setting blocked
scores to -inf before the softmax.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .validation import (
    AttentionInputError,
    array_namespace,
    as_array,
    as_mask,
    check_int,
    check_real,
    check_size,
    device,
)

__all__ = [
    "causal_mask",
    "combine_masks",
    "mask_to_additive",
    "padding_mask",
    "prefix_lm_mask",
    "sink_window_mask",
    "sliding_window_mask",
]


def _grid(q_len: object, k_len: object | None) -> tuple[int, int]:
    q = check_int(q_len, "q_len (number of queries)", minimum=1)
    k = q if k_len is None else check_int(k_len, "k_len (number of keys)", minimum=1)
    check_size((q, k), "The mask")
    return q, k


def causal_mask(q_len: int, k_len: int | None = None) -> np.ndarray:
    """Lower-triangular mask: query i may attend to keys j <= i.

    mask[i, j] = (j <= i),  shape `(q_len, k_len)` (k_len defaults to q_len).

    This is torch's `scaled_dot_product_attention(..., is_causal=True)` convention, also when
    k_len != q_len: the triangle is aligned to the top-left corner (`ones(L, S).tril()`), so
    query i sees keys 0..i whatever the number of keys. (For decoding with a key/value cache, where
    the queries are the *last* q_len positions, you want the bottom-right alignment instead.)
    """
    q, k = _grid(q_len, k_len)
    return np.tril(np.ones((q, k), dtype=bool))


def padding_mask(valid_keys: object, q_len: int, k_len: int | None = None) -> np.ndarray:
    """Mask that hides padding keys from every query.

    `valid_keys` is either an int n (the first n keys are real tokens, the rest padding; the
    number of keys is `k_len`, default `q_len`) or a boolean sequence over key positions
    (True = real token). Returns `(q_len, k_len)` with mask[i, j] = valid[j] for every row i.
    """
    q = check_int(q_len, "q_len (number of queries)", minimum=1)
    if isinstance(valid_keys, int | np.integer) and not isinstance(valid_keys, bool | np.bool_):
        k = q if k_len is None else check_int(k_len, "k_len (number of keys)", minimum=1)
        n = check_int(valid_keys, "the number of valid keys", minimum=0)
        if n > k:
            raise AttentionInputError(
                f"The number of valid keys ({n}) is larger than the number of keys ({k})."
            )
        valid = np.arange(k) < n
    else:
        valid = as_array(valid_keys, "valid_keys")
        if valid.ndim != 1 or valid.size == 0:
            raise AttentionInputError(
                "valid_keys must be a number of real tokens or a list of True/False, one per "
                f"key position; got shape {valid.shape}."
            )
        if valid.dtype != np.bool_:
            if np.issubdtype(valid.dtype, np.integer) and np.isin(valid, (0, 1)).all():
                valid = valid.astype(bool)
            else:
                raise AttentionInputError(
                    "valid_keys must hold True/False (or 1/0) values, one per key position."
                )
        if k_len is not None and check_int(k_len, "k_len") != valid.size:
            raise AttentionInputError(
                f"valid_keys has {valid.size} entries but k_len is {k_len}: give one entry per key."
            )
        k = valid.size
    check_size((q, k), "The mask")
    return np.broadcast_to(valid, (q, k)).copy()


def sliding_window_mask(
    q_len: int, window: int, k_len: int | None = None, *, first_query: int = 0
) -> np.ndarray:
    """Causal sliding window: query i may attend to keys i-window+1 .. i (the last `window` keys).

    mask[i, j] = (i - window < j <= i),  shape `(q_len, k_len)`, aligned like `causal_mask`.
    window=1 lets each token see only itself; window >= k_len equals `causal_mask`.
    ``first_query`` is the position of query 0 (a decoder's new queries after its cached
    keys: query i sits at first_query + i).
    """
    q, k = _grid(q_len, k_len)
    w = check_int(window, "window", minimum=1)
    start = check_int(first_query, "first_query", minimum=0)
    offset = (start + np.arange(q))[:, None] - np.arange(k)[None, :]  # i - j, (q_pos, k_pos)
    return (offset >= 0) & (offset < w)


def sink_window_mask(q_len: int, window: int, sinks: int) -> np.ndarray:
    """A causal sliding window that always keeps the first `sinks` keys visible (StreamingLLM's
    attention sinks, Xiao et al. 2023): query i sees keys i-window+1 .. i and keys 0 .. sinks-1.

    mask[i, j] = j <= i and (i - j < window or j < sinks),  shape `(q_len, q_len)`.
    sinks=0 is `sliding_window_mask`. Positions are not renumbered: a kept key stays where it was.
    """
    q, _ = _grid(q_len, None)
    s = check_int(sinks, "sinks", minimum=0)
    # The window keeps the recent keys; the sinks add the first columns, below the diagonal only.
    first = np.arange(q)[None, :] < s
    return sliding_window_mask(q, window) | (first & causal_mask(q))


def prefix_lm_mask(q_len: int, prefix_len: int) -> np.ndarray:
    """Prefix-LM mask: the first `prefix_len` tokens are visible to everyone (bidirectional
    prefix), the rest are causal.

    mask[i, j] = (j < prefix_len) or (j <= i),  shape `(q_len, q_len)`.
    prefix_len=0 is `causal_mask`; prefix_len=q_len is full attention.
    """
    q, _ = _grid(q_len, None)
    p = check_int(prefix_len, "prefix_len", minimum=0)
    if p > q:
        raise AttentionInputError(f"prefix_len ({p}) is longer than the sequence ({q} tokens).")
    j = np.arange(q)[None, :]
    return (j < p) | (j <= np.arange(q)[:, None])


def combine_masks(*masks: object) -> Any:
    """Logical AND of boolean masks, with broadcasting: a key is allowed only if every mask
    allows it. `None` entries are ignored; with no masks at all the result is None (no mask).

    Given torch tensors, the result is a tensor on their device (NumPy masks join it).
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    xp = array_namespace(*present)
    arrays = []
    for index, m in enumerate(present):
        arr = as_array(m, f"mask {index + 1}", xp)
        arrays.append(as_mask(arr, f"mask {index + 1}", tuple(arr.shape), xp))
    try:
        shape = np.broadcast_shapes(*(tuple(a.shape) for a in arrays))
    except ValueError:
        shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
        raise AttentionInputError(
            f"These masks cannot be combined, their shapes do not match: {shapes}."
        ) from None
    check_size(shape, "The combined mask")
    where = next((device(a) for a in arrays if not isinstance(a, np.ndarray)), None)
    combined = xp.ones(shape, dtype=xp.bool, device=where)
    for arr in arrays:
        combined = combined & xp.asarray(arr, device=where)
    return combined


def mask_to_additive(
    mask: object, fill: float = -np.inf, dtype: type | np.dtype = np.float64
) -> np.ndarray:
    """Boolean mask -> additive bias: 0 where attending is allowed, `fill` where it is not.

    Adding this to the scores before softmax is the same as masking (exp(-inf) = 0); many
    libraries (and older torch code) use this form, or a large negative `fill` like -1e9.
    """
    arr = as_array(mask, "mask")
    arr = as_mask(arr, "mask", arr.shape)
    if not (isinstance(fill, float) and fill == -np.inf):
        fill = check_real(fill, "fill")
    return np.where(arr, 0.0, fill).astype(dtype)
