"""Experiments on positional information: what the position-encoding page measures and draws.

Built on `positional` (the encodings themselves) and `multihead` (a self-attention layer):

- order blindness: self-attention on a sentence and on a permutation of it, compared after
  putting the outputs back in the original order;
- the sinusoidal table broken down into frequencies and angles, and its similarity PE·PEᵀ as a
  function of the offset between positions;
- PE(p + k) rebuilt from PE(p) with `sinusoid_shift_matrix`, and the error of doing so;
- every family's scores for identical content at every position (does the score depend on the
  offset only?), and what each family offers beyond the length it was trained on.

Shapes: tables `(pos, d_model)`, score matrices `(q_pos, k_pos)` (rows are queries).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import positional
from ..masks import causal_mask, mask_to_additive
from ..multihead import init_multi_head_params, multi_head_attention
from ..positional import check_base, sinusoid_frequencies
from ..reference import token_embeddings
from ..validation import AttentionInputError, as_float_array, check_int, check_size

__all__ = [
    "LEARNED_STD",
    "PERMUTATIONS",
    "POSITION_FAMILIES",
    "SENTENCE_ENCODINGS",
    "OffsetProfile",
    "OrderBlindness",
    "PositionBreakdown",
    "RotationExample",
    "SentenceInput",
    "ShiftCheck",
    "causal_alibi",
    "offset_profile",
    "order_blindness",
    "permutation",
    "position_breakdown",
    "rotation_example",
    "same_content_scores",
    "sentence_input",
    "shift_check",
    "similarity_matrix",
    "toeplitz_deviation",
    "unseen_angle_share",
]

# Entries of the sinusoidal table have mean square 1/2; a random stand-in for a learned table
# gets the same size so the two can be compared on one colour scale.
LEARNED_STD = math.sqrt(0.5)

SENTENCE_ENCODINGS = ("none", "sinusoidal", "learned")
POSITION_FAMILIES = ("sinusoidal", "learned", "rotary", "alibi", "nope")
PERMUTATIONS = ("reverse", "rotate", "swap first two")


def permutation(kind: str, length: int) -> np.ndarray:
    """A named reordering of `length` tokens, `(length,)`: new sentence j holds old token order[j].

    "reverse": I love AI -> AI love I;  "rotate": the first token moves to the end;
    "swap first two": love I AI.
    """
    n = check_int(length, "the number of tokens", minimum=1)
    check_size((n,), "The permutation")
    index = np.arange(n)
    if kind == "reverse":
        return index[::-1].copy()
    if kind == "rotate":
        return np.roll(index, -1)
    if kind == "swap first two":
        index[:2] = index[:2][::-1]
        return index
    raise AttentionInputError(
        f"Unknown reordering {kind!r}: choose one of {', '.join(PERMUTATIONS)}."
    )


def _check_tokens(tokens: Sequence[str]) -> tuple[str, ...]:
    tokens = tuple(str(token) for token in tokens)
    if not tokens:
        raise AttentionInputError("The sentence is empty: type at least one word.")
    return tokens


@dataclass(frozen=True, eq=False)
class SentenceInput:
    """What a model receives for a sentence: token embedding + position vector, row by row.

    tokens            the words, in order
    token_embeddings  `(pos, d_model)`  the same vector for the same word wherever it stands
    positions         `(pos, d_model)`  row p encodes position p (all zeros for "none")
    inputs            `(pos, d_model)`  token_embeddings + positions
    """

    tokens: tuple[str, ...]
    token_embeddings: np.ndarray
    positions: np.ndarray
    inputs: np.ndarray


def _position_table(encoding: str, length: int, d_model: int, seed: int, base: float) -> np.ndarray:
    if encoding == "none":
        return np.zeros((length, d_model))
    if encoding == "sinusoidal":
        return positional.sinusoidal_encoding(length, d_model, base)
    if encoding == "learned":
        return positional.learned_encoding(length, d_model, seed=seed, std=LEARNED_STD)
    raise AttentionInputError(
        f"Unknown positional encoding {encoding!r}: choose one of {', '.join(SENTENCE_ENCODINGS)}."
    )


def sentence_input(
    tokens: Sequence[str],
    d_model: int,
    *,
    encoding: str = "sinusoidal",
    seed: int = 0,
    base: float = 10000.0,
) -> SentenceInput:
    """x_p = E[token_p] + P[p]: the input of the first layer, `(pos, d_model)`.

    `encoding` is "none", "sinusoidal" or "learned" (a random table, std `LEARNED_STD`).
    """
    tokens = _check_tokens(tokens)
    embedded = token_embeddings(tokens, d_model, seed)
    table = _position_table(encoding, len(tokens), embedded.shape[1], seed, base)
    # Adding (rather than concatenating) keeps the width d_model; the model learns to read
    # both signals from the same vector.
    return SentenceInput(tokens, embedded, table, embedded + table)


@dataclass(frozen=True, eq=False)
class OrderBlindness:
    """Self-attention on a sentence and on a reordering of it.

    order              `(pos,)`  permuted sentence j holds original token order[j]
    original           SentenceInput of the sentence
    permuted           SentenceInput of the reordered sentence (positions 0.. again)
    output             `(pos, d_model)`  attention output for the sentence
    permuted_output    `(pos, d_model)`  attention output for the reordered sentence
    unpermuted_output  `(pos, d_model)`  permuted_output with its rows put back in the
                                         original token order
    difference         `(pos, d_model)`  unpermuted_output - output
    weights            `(q_pos, k_pos)`  attention weights for the sentence
    permuted_weights   `(q_pos, k_pos)`  attention weights for the reordered sentence
    max_abs_difference float            max |difference|: 0 up to rounding without positions
    """

    order: np.ndarray
    original: SentenceInput
    permuted: SentenceInput
    output: np.ndarray
    permuted_output: np.ndarray
    unpermuted_output: np.ndarray
    difference: np.ndarray
    weights: np.ndarray
    permuted_weights: np.ndarray
    max_abs_difference: float


def order_blindness(
    tokens: Sequence[str],
    order: object,
    d_model: int,
    *,
    encoding: str = "none",
    seed: int = 0,
    base: float = 10000.0,
) -> OrderBlindness:
    """Is self-attention's output for each token the same whichever order the tokens come in?

    Y  = Attn(X),   Y' = Attn(X')  where X' holds the same tokens reordered by `order`;
    with no positional encoding Attn is permutation-equivariant, Attn(P X) = P Attn(X), so
    Y'[argsort(order)] = Y. Adding positions (`encoding` "sinusoidal" or "learned") gives the
    tokens of X' other position vectors than in X, and the outputs change.

    The attention layer is one head of `multi_head_attention` with parameters
    `init_multi_head_params(d_model, 1, seed)`.
    """
    tokens = _check_tokens(tokens)
    order = np.asarray(order)
    if (
        order.shape != (len(tokens),)
        or order.dtype.kind not in "iu"
        or not np.array_equal(np.sort(order), np.arange(len(tokens)))
    ):
        raise AttentionInputError(
            f"order must list each of the {len(tokens)} token positions exactly once, got "
            f"{order.tolist()}."
        )
    original = sentence_input(tokens, d_model, encoding=encoding, seed=seed, base=base)
    reordered = [tokens[i] for i in order]
    permuted = sentence_input(reordered, d_model, encoding=encoding, seed=seed, base=base)
    params = init_multi_head_params(original.inputs.shape[1], 1, seed)
    steps = multi_head_attention(original.inputs, params=params, num_heads=1)
    permuted_steps = multi_head_attention(permuted.inputs, params=params, num_heads=1)
    # Row j of the permuted output belongs to original token order[j]; argsort inverts that.
    unpermuted = permuted_steps.output[np.argsort(order)]
    difference = unpermuted - steps.output
    return OrderBlindness(
        order=order,
        original=original,
        permuted=permuted,
        output=steps.output,
        permuted_output=permuted_steps.output,
        unpermuted_output=unpermuted,
        difference=difference,
        weights=steps.attention.weights[0],
        permuted_weights=permuted_steps.attention.weights[0],
        max_abs_difference=float(np.abs(difference).max()),
    )


@dataclass(frozen=True, eq=False)
class PositionBreakdown:
    """Every entry of PE[position], with what goes into it, one element per dimension.

    dimension   `(d_model,)` int    0 .. d_model-1
    pair        `(d_model,)` int    i = dimension // 2
    function    tuple of "sin"/"cos" (even dimensions are sines, odd ones cosines)
    frequency   `(d_model,)`        ω_i = base^(-2i/d_model), radians per position
    wavelength  `(d_model,)`        2π/ω_i, in positions
    angle       `(d_model,)`        position · ω_i
    value       `(d_model,)`        PE[position, dimension] from `sinusoidal_encoding`
    """

    position: int
    dimension: np.ndarray
    pair: np.ndarray
    function: tuple[str, ...]
    frequency: np.ndarray
    wavelength: np.ndarray
    angle: np.ndarray
    value: np.ndarray


def position_breakdown(position: int, d_model: int, base: float = 10000.0) -> PositionBreakdown:
    """PE[position] taken apart: frequency, wavelength and angle behind each entry.

    PE[p, 2i] = sin(p · ω_i),  PE[p, 2i+1] = cos(p · ω_i),  ω_i = base^(-2i/d_model).
    """
    p = check_int(position, "position", minimum=0)
    d = check_int(d_model, "d_model", minimum=1)
    value = positional.sinusoidal_encoding(p + 1, d, base)[p]
    dimension = np.arange(d)
    pair = dimension // 2
    frequency = sinusoid_frequencies(d, base)[pair]
    wavelength = positional.sinusoid_wavelengths(d, base)[pair]
    function = tuple("sin" if j % 2 == 0 else "cos" for j in range(d))
    return PositionBreakdown(
        p, dimension, pair, function, frequency, wavelength, p * frequency, value
    )


def similarity_matrix(table: object) -> np.ndarray:
    """Dot products of every pair of rows, `(pos, pos)`: S[m, n] = table[m] · table[n]."""
    t = as_float_array(table, "the position table", min_ndim=2, max_ndim=2)
    check_size((t.shape[0], t.shape[0]), "The similarity matrix")
    return t @ t.T


@dataclass(frozen=True, eq=False)
class OffsetProfile:
    """A `(q_pos, k_pos)` matrix summarised along its diagonals, one entry per offset.

    offsets  `(n_offsets,)` int   k = key position - query position
    mean     `(n_offsets,)`       mean of M[i, i + k] over every i where both exist
    low      `(n_offsets,)`       smallest such entry
    high     `(n_offsets,)`       largest such entry; high = low everywhere iff M is Toeplitz
    """

    offsets: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def spread(self) -> float:
        """max over offsets of (high - low): 0 iff every diagonal is constant."""
        return float(np.max(self.high - self.low))


def offset_profile(matrix: object, *, nonnegative: bool = False) -> OffsetProfile:
    """Mean, smallest and largest entry of each diagonal M[i, i + k] of a score matrix.

    For PE·PEᵀ this is the dot product as a function of distance: with the sinusoidal table it
    is Σ_i cos(ω_i k) whatever the position, so low = mean = high. `nonnegative=True` keeps
    offsets k >= 0 (keys at or after the query) only. -inf entries (masked) give -inf.
    """
    m = as_float_array(matrix, "the score matrix", min_ndim=2, max_ndim=2, allow_neg_inf=True)
    rows, cols = m.shape
    first = 0 if nonnegative else -(rows - 1)
    offsets = np.arange(first, cols)
    mean, low, high = (np.empty(offsets.size) for _ in range(3))
    for n, k in enumerate(offsets):
        diagonal = np.diagonal(m, offset=k)
        mean[n], low[n], high[n] = diagonal.mean(), diagonal.min(), diagonal.max()
    return OffsetProfile(offsets, mean, low, high)


def toeplitz_deviation(matrix: object) -> float:
    """max over diagonals of (largest - smallest entry): 0 iff M[i, j] depends on j - i only.

    A diagonal that is -inf throughout (masked) counts as constant; one that mixes -inf with
    numbers gives inf.
    """
    m = as_float_array(matrix, "the score matrix", min_ndim=2, max_ndim=2, allow_neg_inf=True)
    worst = 0.0
    for k in range(-(m.shape[0] - 1), m.shape[1]):
        diagonal = np.diagonal(m, offset=k)
        finite = np.isfinite(diagonal)
        if finite.all():
            worst = max(worst, float(diagonal.max() - diagonal.min()))
        elif finite.any():
            return math.inf
    return worst


@dataclass(frozen=True, eq=False)
class ShiftCheck:
    """How exactly M_k (`sinusoid_shift_matrix`) turns PE[p] into PE[p + k].

    offset             k
    error_by_position  `(pos - k,)`  max_j |PE[p + k, j] - (M_k PE[p])_j| for p = 0 .. pos-k-1
    max_abs_error      float         the largest of these
    exact_dims         int           dimensions compared: all for even d_model; for odd d_model
                                     the lone last sine has no cosine partner and is left out
    """

    offset: int
    error_by_position: np.ndarray
    max_abs_error: float
    exact_dims: int


def shift_check(num_positions: int, d_model: int, offset: int, base: float = 10000.0) -> ShiftCheck:
    """Rebuild rows k .. pos-1 of the table from rows 0 .. pos-k-1 with one fixed matrix.

    PE[p + k] = M_k PE[p]  (as row vectors: PE[p + k] = PE[p] M_kᵀ),  for every p at once.
    The error is rounding only (about 1e-15 for small p, growing like p · 1e-16 because the
    angles p·ω themselves are rounded).
    """
    n = check_int(num_positions, "num_positions", minimum=2)
    k = check_int(offset, "offset", minimum=0)
    if k >= n:
        raise AttentionInputError(
            f"The offset k={k} must be smaller than the number of positions ({n}): PE(p + k) "
            "must exist for at least p = 0."
        )
    table = positional.sinusoidal_encoding(n, d_model, base)  # (pos, d_model)
    shift = positional.sinusoid_shift_matrix(table.shape[1], k, base)  # (d_model, d_model)
    # One matrix for every p: the shift is a rotation that depends on k alone.
    rebuilt = table[: n - k] @ shift.T  # (pos - k, d_model)
    exact = table.shape[1] - table.shape[1] % 2
    error = np.abs(rebuilt[:, :exact] - table[k:, :exact])
    by_position = error.max(axis=1) if exact else np.zeros(n - k)
    return ShiftCheck(k, by_position, float(by_position.max()), exact)


@dataclass(frozen=True, eq=False)
class RotationExample:
    """One (sin, cos) pair of PE[p] turned by the angle ω_i·k into the same pair of PE[p + k].

    rotation  `(2, 2)`  [[cos ω_i k, sin ω_i k], [-sin ω_i k, cos ω_i k]], the block of M_k
    before    `(2,)`    (PE[p, 2i], PE[p, 2i+1])
    rotated   `(2,)`    rotation @ before
    actual    `(2,)`    (PE[p + k, 2i], PE[p + k, 2i+1]) straight from the table
    angle     float     ω_i · k, in radians
    """

    position: int
    offset: int
    pair: int
    rotation: np.ndarray
    before: np.ndarray
    rotated: np.ndarray
    actual: np.ndarray
    angle: float


def rotation_example(
    position: int, offset: int, pair: int, d_model: int, base: float = 10000.0
) -> RotationExample:
    """The 2×2 rotation of pair i that carries PE[p] to PE[p + k]: sin(a + b), cos(a + b)."""
    p = check_int(position, "position", minimum=0)
    k = check_int(offset, "offset", minimum=0)
    d = check_int(d_model, "d_model", minimum=2)
    i = check_int(pair, "pair", minimum=0)
    if 2 * i + 1 >= d:
        raise AttentionInputError(
            f"Pair {i} does not exist for d_model={d}: pairs (sin, cos) run from 0 to {d // 2 - 1}."
        )
    table = positional.sinusoidal_encoding(p + k + 1, d, base)
    dims = slice(2 * i, 2 * i + 2)
    rotation = positional.sinusoid_shift_matrix(d, k, base)[dims, dims]
    before = table[p, dims]
    omega = sinusoid_frequencies(d, base)[i]
    return RotationExample(
        p, k, i, rotation, before, rotation @ before, table[p + k, dims], float(omega * k)
    )


def causal_alibi(num_heads: int, length: int) -> np.ndarray:
    """ALiBi as a causal model adds it, `(head, q_pos, k_pos)`: m_h·(j - i) for j <= i, else -inf.

    The bias of `alibi_bias` with the causal mask applied, so the later keys (where the linear
    formula would give a bonus) are removed, as in the ALiBi paper's decoder.
    """
    bias = positional.alibi_bias(num_heads, length)
    return bias + mask_to_additive(causal_mask(length))


def same_content_scores(
    family: str,
    num_positions: int,
    d_model: int,
    *,
    seed: int = 0,
    base: float = 10000.0,
    num_heads: int = 8,
    head: int = 0,
) -> np.ndarray:
    """Scaled scores `(q_pos, k_pos)` when every position holds the same content vector c.

    Whatever varies across the matrix comes from position alone:
      sinusoidal  (c + PE[m]) · (c + PE[n]) / √d
      learned     (c + P[m]) · (c + P[n]) / √d,  P = learned_encoding(.., std=LEARNED_STD)
      rotary      rot(c, m) · rot(c, n) / √d     (RoPE, `rope_scores`)
      alibi       c · c / √d + m_head · (n - m), causal (-inf for n > m)
      nope        c · c / √d, causal (-inf for n > m): no positions at all (SmolLM3's NoPE
                  layers), only the mask tells a query how many keys came before it
    c ~ N(0, 1) from `seed`. Rotary, ALiBi and NoPE give a Toeplitz matrix (a function of
    n - m; NoPE's is constant); the added encodings do not, because c·PE[n] depends on the
    absolute position n.
    """
    n = check_int(num_positions, "num_positions", minimum=1)
    d = check_int(d_model, "d_model", minimum=1)
    check_size((n, max(n, d)), "The score matrix")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    content = np.tile(rng.normal(0.0, 1.0, size=d), (n, 1))  # (pos, d_model)
    scale = 1.0 / math.sqrt(d)
    if family in ("sinusoidal", "learned"):
        table = _position_table(family, n, d, seed, base)
        x = content + table
        return (x @ x.T) * scale
    if family == "rotary":
        return positional.rope_scores(content, content, base=base) * scale
    if family == "alibi":
        h = check_int(head, "head", minimum=0)
        heads = check_int(num_heads, "num_heads", minimum=1)
        if h >= heads:
            raise AttentionInputError(f"head must be below num_heads={heads} (counting from 0).")
        bias = causal_alibi(heads, n)[h]
        # ALiBi leaves q and k alone: the content score is the same for every pair.
        return (content @ content.T) * scale + bias
    if family == "nope":
        # Nothing marks a position: every key a query may see scores the same.
        return (content @ content.T) * scale + mask_to_additive(causal_mask(n))
    raise AttentionInputError(
        f"Unknown position family {family!r}: choose one of {', '.join(POSITION_FAMILIES)}."
    )


def unseen_angle_share(
    train_length: int, num_positions: int, d_model: int, base: float = 10000.0
) -> np.ndarray:
    """Share of the (sin, cos) pairs whose angle at p was never reached in training, `(pos,)`.

    Training on positions 0 .. L-1 sweeps pair i through the arc [0, (L-1)·ω_i]. Position p
    puts it at p·ω_i mod 2π; that angle is new iff the arc is shorter than a full turn and the
    angle lies beyond it. Slow pairs (wavelength > L) are the ones that go somewhere new: the
    sinusoidal table at position p, and RoPE's rotation for an offset of p, alike.
    """
    length = check_int(train_length, "train_length", minimum=1)
    n = check_int(num_positions, "num_positions", minimum=1)
    d = check_int(d_model, "d_model", minimum=1)
    omega = sinusoid_frequencies(d, check_base(base))  # (pairs,)
    check_size((n, omega.size), "The angle table")
    swept = (length - 1) * omega  # (pairs,)
    angle = np.mod(np.arange(n)[:, None] * omega, 2 * np.pi)  # (pos, pairs)
    unseen = (swept < 2 * np.pi) & (angle > swept)
    return unseen.mean(axis=1)
