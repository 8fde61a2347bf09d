"""The masking lab's experiments: what a mask does to attention, and what breaks without it.

Everything here is built from the core pieces (`masks`, `softmax`, `scaled_dot_product_attention`,
`mask_to_additive`); this module only arranges them into comparisons:

- `MASK_KINDS` / `lab_mask`: the lab's mask kinds, one `MaskKind` entry each, combined with AND.
- `compare_mask`: attention without and with a mask, plus what a naive softmax makes of it.
- `value_change_effect`: which output rows move when one value vector changes (the future
  cannot leak through a causal mask).
- `padded_batch`: sequences of different lengths padded into one batch, versus each run alone.
- `additive_mask_softmax` / `leak_curve`: an additive mask with a finite fill (−1e9, −1e4, the
  float16 minimum) versus −∞, computed in the dtype asked for (float16 for real).

Shapes follow the package: scores and masks `(..., q_pos, k_pos)`, rows are queries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from .. import masks
from ..attention import AttentionSteps, scaled_dot_product_attention
from ..softmax import naive_softmax, stable_softmax
from ..validation import (
    AttentionInputError,
    as_array,
    as_float_array,
    as_mask,
    as_matrix,
    check_int,
    check_real,
    check_size,
)

__all__ = [
    "FLOAT16_MIN",
    "MASK_KINDS",
    "AdditiveMaskRow",
    "MaskComparison",
    "MaskKind",
    "PaddedBatch",
    "ValueChange",
    "additive_mask_softmax",
    "compare_mask",
    "example_qkv",
    "lab_mask",
    "leak_curve",
    "padded_batch",
    "value_change_effect",
]

# The most negative finite float16, what libraries use as "−∞" in half precision.
FLOAT16_MIN: float = float(np.finfo(np.float16).min)

_LAB_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class MaskKind:
    """One kind of mask the lab offers: adding a kind is adding one entry to `MASK_KINDS`.

    name        str              its id in links (`?kinds=causal,padding`) and in `lab_mask`
    label       str              what the page calls it ("Sliding window")
    build       callable         build(n, **parameters) -> `(n, n)` bool, True = may attend
    parameters  tuple of str     the keyword arguments of `lab_mask` that `build` takes
    """

    name: str
    label: str
    build: Callable[..., np.ndarray]
    parameters: tuple[str, ...] = ()


def _padding_positions_mask(n: int, *, padding: Sequence[int]) -> np.ndarray:
    """`masks.padding_mask` with the keys at the 0-based positions in `padding` hidden."""
    positions = [check_int(p, "a padding position", minimum=0) for p in padding]
    outside = [p for p in positions if p >= n]
    if outside:
        raise AttentionInputError(
            f"Padding position {outside[0] + 1} is past the last token ({n} tokens)."
        )
    real = np.ones(n, dtype=bool)
    real[positions] = False
    return masks.padding_mask(real, n)


def _custom_grid_mask(n: int, *, custom: object) -> np.ndarray:
    """The ticked `(n, n)` boolean grid itself, checked."""
    if custom is None:
        raise AttentionInputError("The custom mask is missing: tick the cells of the grid.")
    grid = as_array(custom, "The custom mask")
    if grid.shape != (n, n):
        raise AttentionInputError(
            f"The custom mask has shape {grid.shape} but there are {n} tokens: it needs one "
            f"row per query and one column per key, ({n}, {n})."
        )
    return as_mask(grid, "The custom mask", (n, n))


# The lab's mask kinds, in the order the page offers them; read-only, keyed by name.
MASK_KINDS: Mapping[str, MaskKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            MaskKind("causal", "Causal", masks.causal_mask),
            MaskKind("padding", "Padding", _padding_positions_mask, ("padding",)),
            MaskKind("window", "Sliding window", masks.sliding_window_mask, ("window",)),
            MaskKind("prefix", "Prefix-LM", masks.prefix_lm_mask, ("prefix_len",)),
            MaskKind("custom", "Custom grid", _custom_grid_mask, ("custom",)),
        )
    }
)


def lab_mask(
    n: int,
    kinds: Sequence[str],
    *,
    padding: Sequence[int] = (),
    window: int = 2,
    prefix_len: int = 1,
    custom: object = None,
) -> np.ndarray | None:
    """The AND of the chosen mask kinds over `n` tokens, `(n, n)` bool, or None for no mask.

    kinds ⊆ MASK_KINDS: "causal" (j <= i), "padding" (keys at the 0-based positions in `padding`
    are hidden from every query), "window" (causal sliding window of width `window`), "prefix"
    (prefix-LM with a bidirectional prefix of `prefix_len` tokens), "custom" (the `(n, n)`
    boolean grid `custom`). A key is allowed only if every chosen kind allows it.
    """
    n = check_int(n, "the number of tokens", minimum=1)
    check_size((n, n), "The mask")
    unknown = [kind for kind in kinds if kind not in MASK_KINDS]
    if unknown:
        raise AttentionInputError(
            f"Unknown mask kind {unknown[0]!r}: choose from {', '.join(MASK_KINDS)}."
        )
    given = {"padding": padding, "window": window, "prefix_len": prefix_len, "custom": custom}
    # In the table's order, each kind once: the AND does not care, and the first error a learner
    # meets does not depend on the order the kinds were picked in.
    return masks.combine_masks(
        *(
            kind.build(n, **{name: given[name] for name in kind.parameters})
            for kind in MASK_KINDS.values()
            if kind.name in kinds
        )
    )


def example_qkv(n: int, d: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reproducible example Q, K, V, each `(n, d)` with standard normal entries (float64)."""
    n = check_int(n, "the number of tokens", minimum=1)
    d = check_int(d, "the width d", minimum=1)
    check_size((3, n, d), "Q, K and V")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    q, k, v = rng.standard_normal((3, n, d))
    return q, k, v


@dataclass(frozen=True, eq=False)
class MaskComparison:
    """The same attention computed without and with a mask.

    mask           `(q_pos, k_pos)` bool or None   True = may attend
    unmasked       AttentionSteps                  no mask at all
    masked         AttentionSteps                  with `mask` (zero weights for a fully masked row)
    naive_weights  `(q_pos, k_pos)`                textbook softmax of `masked.masked`: NaN in a
                                                   fully masked row (0/0)
    naive_output   `(q_pos, d_v)`                  naive_weights @ V: NaN rows where that happens
    row_sums       `(q_pos,)`                      Σ_j masked.weights_ij: 1, or 0 if fully masked
    """

    mask: Any
    unmasked: AttentionSteps
    masked: AttentionSteps
    naive_weights: Any
    naive_output: Any
    row_sums: Any


def compare_mask(q: object, k: object, v: object, mask: object) -> MaskComparison:
    """Scaled dot-product attention without and with `mask`, and the naive softmax's version.

    unmasked = SDPA(Q, K, V);  masked = SDPA(Q, K, V, mask)
    naive_weights = exp(masked scores) / Σ_j exp(masked scores)   (no max-shift, no guard)
    """
    unmasked = scaled_dot_product_attention(q, k, v)
    masked = scaled_dot_product_attention(q, k, v, mask=mask)
    # The textbook formula has no answer for a row of only −∞: exp gives 0/0 = NaN there.
    naive_weights = naive_softmax(masked.masked)
    with np.errstate(invalid="ignore"):
        naive_output = naive_weights @ np.asarray(v, dtype=naive_weights.dtype)  # (q_pos, d_v)
    row_sums = masked.weights.sum(axis=-1)  # (q_pos,)
    return MaskComparison(
        None if mask is None else np.asarray(mask),
        unmasked,
        masked,
        naive_weights,
        naive_output,
        row_sums,
    )


@dataclass(frozen=True, eq=False)
class ValueChange:
    """The effect on every output row of changing one value vector.

    position    int                   the key position whose value vector changed
    before      AttentionSteps        attention with the original V
    after       AttentionSteps        attention with v_position + delta
    row_change  `(q_pos,)`            max over features of |after.output − before.output|
    changed     `(q_pos,)` bool       row_change > 0: the rows that can see the change
    """

    position: int
    before: AttentionSteps
    after: AttentionSteps
    row_change: Any
    changed: Any


def value_change_effect(
    q: object, k: object, v: object, position: int, delta: object = 1.0, *, mask: object = None
) -> ValueChange:
    """Add `delta` (a number or a `(d_v,)` vector) to the value vector at `position` and compare.

    output_i = Σ_j w_ij v_j, so only rows with w_i,position > 0 can change: with a causal mask
    those are the rows i >= position (the future cannot leak into the past), and a blocked key's
    weight is exactly 0, so the earlier rows do not change by even one bit.
    """
    v = as_matrix(v, "V (values)")
    position = check_int(position, "the changed position", minimum=0)
    if position >= v.shape[-2]:
        raise AttentionInputError(
            f"Position {position + 1} does not exist: there are {v.shape[-2]} value vectors."
        )
    shift = as_float_array(delta, "the change to the value vector", max_ndim=1)
    if shift.ndim == 1 and shift.shape[0] != v.shape[-1]:
        raise AttentionInputError(
            f"The change has {shift.shape[0]} entries but value vectors have {v.shape[-1]}."
        )
    changed_v = v.copy()
    changed_v[..., position, :] += shift
    before = scaled_dot_product_attention(q, k, v, mask=mask)
    after = scaled_dot_product_attention(q, k, changed_v, mask=mask)
    row_change = np.abs(after.output - before.output).max(axis=-1)  # (..., q_pos)
    return ValueChange(position, before, after, row_change, row_change > 0)


@dataclass(frozen=True, eq=False)
class PaddedBatch:
    """Sequences of different lengths padded to one length and attended as one batch.

    lengths     tuple of int            real tokens per sequence
    side        "right" | "left"        where the padding slots go
    q, k, v     `(batch, L, d)`         the padded batch (pad slots hold `pad_value`)
    real        `(batch, L)` bool       True for a real token's slot
    mask        `(batch, L, L)` bool or None   the mask of the batched run
    batched     AttentionSteps          the whole batch at once, `(batch, L, ...)`
    alone       tuple of AttentionSteps each sequence run on its own, unpadded
    difference  `(batch,)`              max |batched output − alone output| over the real tokens
    """

    lengths: tuple[int, ...]
    side: str
    q: Any
    k: Any
    v: Any
    real: Any
    mask: Any
    batched: AttentionSteps
    alone: tuple[AttentionSteps, ...]
    difference: Any


def padded_batch(
    sequences: Sequence[tuple[object, object, object]],
    *,
    causal: bool = False,
    use_padding_mask: bool = True,
    pad_value: float = 0.0,
    side: str = "right",
    dtype: type | np.dtype = np.float64,
) -> PaddedBatch:
    """Pad `sequences` of (q, k, v), each `(n_b, d)`, to the longest length and attend in one batch.

    mask_b = padding_b (keys that are real) [AND causal]  over the padded length L
    difference_b = max over real tokens of |batched output − SDPA(q_b, k_b, v_b [, causal])|

    With the padding mask, a blocked pad key gets weight exactly 0, so every real token's output
    equals the one computed alone. Without it, the pad slots take part in the softmax and change
    the real tokens' results (unless a causal mask already hides right-side padding).
    """
    if side not in ("right", "left"):
        raise AttentionInputError(f"side must be 'right' or 'left', got {side!r}.")
    dtype = np.dtype(dtype)
    if dtype not in _LAB_DTYPES[1:]:
        raise AttentionInputError(f"dtype must be float32 or float64, got {dtype}.")
    pad_value = check_real(pad_value, "the padding value")
    if not sequences:
        raise AttentionInputError("Give at least one sequence to put in the batch.")
    triples = []
    for index, (q, k, v) in enumerate(sequences):
        name = f"sequence {index + 1}"
        q, k, v = (
            as_float_array(x, f"{part} of {name}", min_ndim=2, max_ndim=2).astype(dtype)
            for part, x in (("Q", q), ("K", k), ("V", v))
        )
        if not q.shape[0] == k.shape[0] == v.shape[0] or q.shape[1] != k.shape[1]:
            raise AttentionInputError(
                f"In {name}, Q {q.shape}, K {k.shape} and V {v.shape} must have one row per "
                "token, and Q and K the same width."
            )
        triples.append((q, k, v))
    widths = {(q.shape[1], v.shape[1]) for q, _, v in triples}
    if len(widths) != 1:
        raise AttentionInputError("All sequences must have the same widths d_k and d_v.")
    lengths = tuple(q.shape[0] for q, _, _ in triples)
    length = max(lengths)
    check_size((len(triples), length, length), "The batch's score matrix")

    def pad(x: np.ndarray) -> np.ndarray:
        out = np.full((length, x.shape[1]), pad_value, dtype=dtype)
        if side == "right":
            out[: x.shape[0]] = x
        else:
            out[length - x.shape[0] :] = x
        return out

    q, k, v = (np.stack([pad(t[part]) for t in triples]) for part in range(3))  # (batch, L, d)
    slots = np.arange(length)
    real = np.stack(
        [
            slots < n if side == "right" else slots >= length - n
            for n in lengths  # (batch, L)
        ]
    )
    # The padding mask hides pad keys from every query: (batch, 1, L) broadcasts over queries.
    key_mask = real[:, None, :] if use_padding_mask else None
    mask = masks.combine_masks(key_mask, masks.causal_mask(length) if causal else None)
    if mask is not None:
        mask = np.broadcast_to(mask, (len(triples), length, length)).copy()
    batched = scaled_dot_product_attention(q, k, v, mask=mask)
    alone = tuple(
        scaled_dot_product_attention(tq, tk, tv, mask=masks.causal_mask(n) if causal else None)
        for (tq, tk, tv), n in zip(triples, lengths, strict=True)
    )
    difference = np.array(
        [np.abs(batched.output[b][real[b]] - alone[b].output).max() for b in range(len(triples))]
    )
    return PaddedBatch(lengths, side, q, k, v, real, mask, batched, alone, difference)


@dataclass(frozen=True, eq=False)
class AdditiveMaskRow:
    """Softmax of scores plus an additive mask, computed in one dtype.

    fill             float       the fill asked for (e.g. −1e9)
    stored_fill      float       the fill once stored in `dtype` (−1e9 becomes −∞ in float16)
    dtype            np.dtype    float16, float32 or float64: every step is computed in it
    scores           `(..., k_pos)`  scale × scores, stored in dtype (±inf if they overflow)
    biased           `(..., k_pos)`  scores + bias, bias = 0 where allowed and fill where blocked
    weights          `(..., k_pos)`  stable softmax of `biased`
    leaked           `(...,)`    total weight on the blocked keys (should be 0)
    weight_sum       `(...,)`    Σ weights (1, or 0 for a fully masked row with fill −∞)
    scores_overflow  bool        some scale × score does not fit in dtype
    has_nan          bool        some weight is NaN
    """

    fill: float
    stored_fill: float
    dtype: np.dtype
    scores: Any
    biased: Any
    weights: Any
    leaked: Any
    weight_sum: Any
    scores_overflow: bool
    has_nan: bool


def _lab_dtype(dtype: object) -> np.dtype:
    try:
        out = np.dtype(dtype)
    except TypeError:
        out = None
    if out not in _LAB_DTYPES:
        raise AttentionInputError(f"dtype must be float16, float32 or float64, got {dtype!r}.")
    return out


def additive_mask_softmax(
    scores: object,
    allowed: object,
    *,
    fill: float = -np.inf,
    dtype: object = np.float32,
    scale: float = 1.0,
) -> AdditiveMaskRow:
    """Mask by adding a bias instead of by −∞, the way many libraries do, all in `dtype`.

    s       = dtype(scale · scores)                              (..., k_pos)
    bias_j  = 0 if allowed_j else dtype(fill)
    weights = softmax(s + bias),  computed in dtype with the max-shift
    leaked  = Σ_{j blocked} weights_j

    With fill = −∞ a blocked key gets exp(−∞) = 0 exactly, whatever the scores. A finite fill only
    pushes the blocked scores down by |fill|: once a blocked key outscores the allowed ones by
    about |fill| it wins the softmax, and a row where every key is blocked spreads its whole
    weight over blocked keys. float16 cannot even store −1e9 (it rounds to −∞) and its most
    negative number is −65504.
    """
    dtype = _lab_dtype(dtype)
    row = as_float_array(scores, "the scores", min_ndim=1)
    scale = check_real(scale, "the score scale")
    allowed = as_mask(as_array(allowed, "the mask"), "the mask", row.shape[-1:])
    with np.errstate(over="ignore", invalid="ignore"):
        # Casting is where float16 rounds large scores to ±inf: the real half-precision story.
        stored = (row.astype(np.float64) * scale).astype(dtype)
        bias = masks.mask_to_additive(allowed, fill=fill, dtype=dtype)
        stored_fill = float(np.asarray(fill, dtype=np.float64).astype(dtype))
        biased = stored + bias  # (..., k_pos), rounded to dtype at every entry
        weights = stable_softmax(biased, axis=-1)
    blocked = ~np.broadcast_to(allowed, weights.shape)
    leaked = np.where(blocked, weights, 0).sum(axis=-1)
    return AdditiveMaskRow(
        fill=float(fill),
        stored_fill=stored_fill,
        dtype=dtype,
        scores=stored,
        biased=biased,
        weights=weights,
        leaked=leaked,
        weight_sum=weights.sum(axis=-1),
        scores_overflow=bool(np.isinf(stored).any()),
        has_nan=bool(np.isnan(weights).any()),
    )


def leak_curve(
    scores: object, allowed: object, scales: object, *, fill: float, dtype: object
) -> np.ndarray:
    """The weight leaked onto blocked keys by `additive_mask_softmax` at each scale `(n_scales,)`.

    NaN where the scaled scores overflow `dtype` (the softmax then has no meaning).
    """
    row = as_float_array(scores, "the scores", min_ndim=1, max_ndim=1)
    scales = as_float_array(scales, "the scales", min_ndim=1, max_ndim=1)
    check_size((scales.size, row.size), "The leak curve")
    result = additive_mask_softmax(
        np.multiply.outer(scales, row), allowed, fill=fill, dtype=dtype
    )  # (n_scales, k_pos)
    overflow = np.isinf(result.scores).any(axis=-1)
    return np.where(overflow, np.nan, result.leaked.astype(np.float64))
