"""Worked examples: the presets of the step-by-step page, and every number behind one row.

Presets (each an `Example`: Q `(q_pos, d_k)`, K `(k_pos, d_k)`, V `(k_pos, d_v)`, token labels):

    three_token_example()      the hand-worked 3-token example, d_k = d_v = 2
    sentence_example(...)      Q, K, V of a short sentence from seeded random embeddings X and
                               random projections (nn.Linear layout: Q = X W_Qᵀ)
    random_example(...)        N(0, 1) entries rounded to one decimal, easy to redo by hand
    sharp_flat_pair()          the same keys and values, queries ×0.5 (flat) and ×10 (sharp)

`example_for(preset, ...)` gives any preset at the page's sizes; `attention_for(...)` runs the
page's settings (scoring function, √d_k on/off, temperature, causal mask) and returns the
`AttentionSteps`; `row_breakdown(...)` returns every intermediate number of one query's row
(dot-product terms, exponentials, their sum, weighted value rows), so a page can write the
calculation out without computing anything itself.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from ..attention import (
    SCORING_FUNCTIONS,
    AttentionSteps,
    additive_attention,
    cosine_attention,
    init_additive_params,
    scaled_dot_product_attention,
)
from ..masks import causal_mask
from ..validation import AttentionInputError, as_matrix, check_int, check_real

__all__ = [
    "ADDITIVE_D_ATTN",
    "MAX_EXAMPLE_SIZE",
    "MAX_EXAMPLE_TOKENS",
    "MAX_EXAMPLE_WIDTH",
    "PRESETS",
    "SIZE_LIMITS",
    "Example",
    "RowBreakdown",
    "attention_for",
    "example_for",
    "fit_example",
    "preset_sizes",
    "random_example",
    "row_breakdown",
    "sentence_example",
    "sentence_tokens",
    "sharp_flat_pair",
    "three_token_example",
]

# The step-by-step page is about reading every number: the presets stay within 8 tokens × 8
# dimensions, which keeps a hand-edited matrix small enough for a link.
MAX_EXAMPLE_SIZE = 8
# A real head sent from a model page is larger: MiniLM's d_head is 32 and SmolLM2's 64 (all of
# it, so the page's weights equal the model's), and 16 tokens hold a short sentence with [CLS]
# and [SEP].
MAX_EXAMPLE_TOKENS = 16
MAX_EXAMPLE_WIDTH = 64
SIZE_LIMITS = {
    "n_q": MAX_EXAMPLE_TOKENS,
    "n_k": MAX_EXAMPLE_TOKENS,
    "d_k": MAX_EXAMPLE_WIDTH,
    "d_v": MAX_EXAMPLE_WIDTH,
}
ADDITIVE_D_ATTN = 8
DEFAULT_SENTENCE = "the cat sat on the mat"
# One entry per preset: its natural (n_q, n_k, d_k, d_v); the sentence's rows follow its words.
PRESETS: dict[str, tuple[int, int, int, int]] = {
    "three_token": (3, 3, 2, 2),
    "sentence": (6, 6, 4, 4),
    "random": (4, 4, 3, 3),
    "sharp_flat": (4, 4, 2, 2),
}


@dataclass(frozen=True, eq=False)
class Example:
    """Q `(q_pos, d_k)`, K `(k_pos, d_k)`, V `(k_pos, d_v)` with a token label per row.

    `key_labels` label both K and V: row j of V is the value of key j.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    query_labels: tuple[str, ...]
    key_labels: tuple[str, ...]
    title: str = ""

    def __post_init__(self) -> None:
        q = as_matrix(self.q, "Q (queries)").astype(np.float64)
        k = as_matrix(self.k, "K (keys)").astype(np.float64)
        v = as_matrix(self.v, "V (values)").astype(np.float64)
        if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
            raise AttentionInputError("An example's Q, K and V must each be one matrix (2-D).")
        if q.shape[1] != k.shape[1]:
            raise AttentionInputError(
                f"K has {k.shape[1]} columns but Q has {q.shape[1]}: queries and keys must have "
                "the same width d_k."
            )
        if k.shape[0] != v.shape[0]:
            raise AttentionInputError(
                f"K has {k.shape[0]} rows but V has {v.shape[0]}: every key needs one value row."
            )
        if len(self.query_labels) != q.shape[0] or len(self.key_labels) != k.shape[0]:
            raise AttentionInputError(
                f"There are {len(self.query_labels)} query tokens for {q.shape[0]} rows of Q and "
                f"{len(self.key_labels)} key tokens for {k.shape[0]} rows of K: give one token "
                "per row."
            )
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "v", v)
        object.__setattr__(self, "query_labels", tuple(str(t) for t in self.query_labels))
        object.__setattr__(self, "key_labels", tuple(str(t) for t in self.key_labels))

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """(n_q, n_k, d_k, d_v)."""
        return (self.q.shape[0], self.k.shape[0], self.q.shape[1], self.v.shape[1])


def three_token_example() -> Example:
    """The hand-worked example: three tokens, d_k = d_v = 2, small integers."""
    return Example(
        q=[[1, 0], [0, 1], [1, 1]],
        k=[[1, 1], [1, 0], [0, 1]],
        v=[[10, 0], [0, 10], [5, 5]],
        query_labels=("the", "cat", "sat"),
        key_labels=("the", "cat", "sat"),
        title="3-token example",
    )


def sentence_tokens(sentence: str) -> tuple[str, ...]:
    """The words of `sentence` (split on spaces), at most MAX_EXAMPLE_SIZE of them."""
    words = tuple(str(sentence).split())
    if not words:
        raise AttentionInputError("The sentence is empty: type a few words separated by spaces.")
    if len(words) > MAX_EXAMPLE_SIZE:
        raise AttentionInputError(
            f"The sentence has {len(words)} words; this page shows at most {MAX_EXAMPLE_SIZE} "
            "so that every number stays readable. Shorten it."
        )
    return words


def sentence_example(
    sentence: str = DEFAULT_SENTENCE, *, d_model: int = 8, d_k: int = 4, d_v: int = 4, seed: int = 0
) -> Example:
    """Self-attention over a sentence with random (untrained) embeddings and projections.

    X `(tokens, d_model)`: one N(0, 1) embedding per distinct word (a repeated word reuses it),
    drawn from a generator seeded by (seed, word), so a word keeps its embedding when the
    sentence changes. W_Q, W_K `(d_k, d_model)`, W_V `(d_v, d_model)` ~ N(0, 1/d_model).
    Q = X W_Qᵀ, K = X W_Kᵀ, V = X W_Vᵀ (the nn.Linear layout, no bias).
    """
    words = sentence_tokens(sentence)
    d_model = check_int(d_model, "d_model", minimum=1)
    d_k = check_int(d_k, "d_k", minimum=1)
    d_v = check_int(d_v, "d_v", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    # crc32 (unlike hash()) is the same in every Python process, so links stay reproducible.
    x = np.stack(
        [
            np.random.default_rng([seed, zlib.crc32(w.encode())]).standard_normal(d_model)
            for w in words
        ]
    )  # (tokens, d_model)
    rng = np.random.default_rng([seed, 1])
    # Variance 1/d_model keeps q, k, v entries at unit variance, like a freshly initialised layer.
    w_q, w_k, w_v = (
        rng.standard_normal((d, d_model)) / math.sqrt(d_model) for d in (d_k, d_k, d_v)
    )
    return Example(
        q=x @ w_q.T, k=x @ w_k.T, v=x @ w_v.T, query_labels=words, key_labels=words,
        title=f"“{' '.join(words)}”",
    )  # fmt: skip


def random_example(n_q: int, n_k: int, d_k: int, d_v: int, seed: int = 0) -> Example:
    """Q, K, V with N(0, 1) entries rounded to one decimal (so a hand check is practical)."""
    n_q, n_k, d_k, d_v = _check_sizes(n_q, n_k, d_k, d_v)
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    q, k, v = (np.round(rng.standard_normal(s), 1) for s in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    return Example(
        q=q + 0.0, k=k + 0.0, v=v + 0.0,  # +0.0 turns a rounded -0.0 into 0.0
        query_labels=tuple(f"q{i + 1}" for i in range(n_q)),
        key_labels=tuple(f"k{j + 1}" for j in range(n_k)),
        title=f"random (seed {seed})",
    )  # fmt: skip


def sharp_flat_pair() -> tuple[Example, Example]:
    """(flat, sharp): the same 4 keys and values; the sharp queries are 20× the flat ones.

    Multiplying the queries multiplies every score, and the softmax of large scores saturates
    towards a one-hot row; small scores give a near-uniform row.
    """
    base = np.array([[1.0, 0.5], [0.5, 1.0], [-1.0, 0.5], [0.5, -1.0]])
    k = [[1, 0], [0, 1], [-1, 0], [0, -1]]
    v = [[10, 0], [0, 10], [-10, 0], [0, -10]]
    tokens = ("east", "north", "west", "south")
    return tuple(
        Example(q=base * f, k=k, v=v, query_labels=tokens, key_labels=tokens, title=name)
        for f, name in ((0.5, "flat"), (10.0, "sharp"))
    )  # type: ignore[return-value]


def _check_sizes(n_q: object, n_k: object, d_k: object, d_v: object) -> tuple[int, ...]:
    sizes = []
    for value, name in ((n_q, "n_q"), (n_k, "n_k"), (d_k, "d_k"), (d_v, "d_v")):
        size = check_int(value, name, minimum=1)
        if size > SIZE_LIMITS[name]:
            raise AttentionInputError(
                f"{name} is {size}; the step-by-step examples have at most {SIZE_LIMITS[name]}."
            )
        sizes.append(size)
    return tuple(sizes)


def fit_example(example: Example, n_q: int, n_k: int, d_k: int, d_v: int, seed: int = 0) -> Example:
    """`example` cut or grown to the given sizes.

    Kept cells keep their values; new cells come from `random_example(..., seed)` (one decimal)
    and new rows get the labels q5, k5, ... .
    """
    n_q, n_k, d_k, d_v = _check_sizes(n_q, n_k, d_k, d_v)
    fill = random_example(n_q, n_k, d_k, d_v, seed)

    def fit(m: np.ndarray, filler: np.ndarray) -> np.ndarray:
        out = filler.copy()
        rows, cols = min(m.shape[0], out.shape[0]), min(m.shape[1], out.shape[1])
        out[:rows, :cols] = m[:rows, :cols]
        return out

    def labels(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
        return old[: len(new)] + new[len(old) :]

    return Example(
        q=fit(example.q, fill.q),
        k=fit(example.k, fill.k),
        v=fit(example.v, fill.v),
        query_labels=labels(example.query_labels, fill.query_labels),
        key_labels=labels(example.key_labels, fill.key_labels),
        title=example.title,
    )


def preset_sizes(preset: str, sentence: str = DEFAULT_SENTENCE) -> tuple[int, int, int, int]:
    """The natural (n_q, n_k, d_k, d_v) of a preset; the sentence's follow its word count."""
    if preset not in PRESETS:
        raise AttentionInputError(f"Unknown preset {preset!r}: choose one of {list(PRESETS)}.")
    n_q, n_k, d_k, d_v = PRESETS[preset]
    if preset == "sentence":
        n_q = n_k = len(sentence_tokens(sentence))
    return n_q, n_k, d_k, d_v


def example_for(
    preset: str,
    *,
    n_q: int,
    n_k: int,
    d_k: int,
    d_v: int,
    seed: int = 0,
    sentence: str = DEFAULT_SENTENCE,
    sharp: bool = True,
) -> Example:
    """A preset at the given sizes.

    "three_token" and "sharp_flat" (the sharp one, or the flat one if `sharp` is False) are
    hand-made and cut or grown by `fit_example`; "sentence" and "random" are generated at d_k
    and d_v directly. A sentence's rows are its words; other sizes cut or grow them.
    """
    sizes = _check_sizes(n_q, n_k, d_k, d_v)
    if preset == "three_token":
        base = three_token_example()
    elif preset == "sharp_flat":
        base = sharp_flat_pair()[1 if sharp else 0]
    elif preset == "sentence":
        base = sentence_example(sentence, d_k=sizes[2], d_v=sizes[3], seed=seed)
    elif preset == "random":
        return random_example(*sizes, seed=seed)
    else:
        raise AttentionInputError(f"Unknown preset {preset!r}: choose one of {list(PRESETS)}.")
    return fit_example(base, *sizes, seed=seed)


def attention_for(
    q: object,
    k: object,
    v: object,
    *,
    scoring: str = "scaled_dot",
    temperature: float = 1.0,
    causal: bool = False,
    additive_seed: int = 0,
) -> AttentionSteps:
    """Attention of one example under the page's settings.

    scaled_dot  scale = 1 / (τ √d_k)      dot     scale = 1 / τ
    cosine      cosine similarity / τ     additive  vᵀ tanh(W_q q + W_k k), τ not used (its
                                                    random v, seeded by additive_seed, sets it)
    `causal` applies `causal_mask(q_pos, k_pos)` (query i sees keys 0..i).
    """
    if scoring not in SCORING_FUNCTIONS:
        names = ", ".join(repr(n) for n in SCORING_FUNCTIONS)
        raise AttentionInputError(f"Unknown scoring function {scoring!r}: choose one of {names}.")
    temperature = check_real(temperature, "the temperature τ", positive=True)
    q = as_matrix(q, "Q (queries)")
    k = as_matrix(k, "K (keys)")
    mask = causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    if scoring == "cosine":
        return cosine_attention(q, k, v, temperature=temperature, mask=mask)
    if scoring == "additive":
        params = init_additive_params(q.shape[-1], ADDITIVE_D_ATTN, seed=additive_seed)
        return additive_attention(q, k, v, params=params, mask=mask)
    # The temperature divides the scores on top of √d_k: τ < 1 sharpens, τ > 1 flattens.
    base = 1.0 / math.sqrt(q.shape[-1]) if scoring == "scaled_dot" else 1.0
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=base / temperature)


@dataclass(frozen=True, eq=False)
class RowBreakdown:
    """Every number in query `row`'s calculation, for writing it out by hand.

    query      `(d_k,)`        q_i, the query row
    keys       `(k_pos, d_k)`  K;  values `(k_pos, d_v)` V (the inputs, kept for the write-up)
    products   `(k_pos, d_k)`  q_i[c] · k_j[c]; their row sums are the dot products
    dots       `(k_pos,)`      q_i · k_j
    q_norm     float           ‖q_i‖ (what cosine scoring divides by, with ‖k_j‖)
    k_norms    `(k_pos,)`      ‖k_j‖
    scores     `(k_pos,)`      the step's scores (= dots for dot scoring)
    scaled     `(k_pos,)`      scores × scale
    allowed    `(k_pos,)` bool False where the mask blocks the key
    shift      float           m subtracted before exp (0 unless the scores are large; it
                               cancels in the ratio, so the weights are the same)
    exps       `(k_pos,)`      exp(scaled - m) for allowed keys, 0 for blocked ones
    total      float           Σ exps
    weights    `(k_pos,)`      exps / total: the step's weights
    weighted   `(k_pos, d_v)`  weights[j] · v_j
    output     `(d_v,)`        Σ_j weighted[j]: the step's output row
    scale      float           the factor applied to the scores
    """

    row: int
    query: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    products: np.ndarray
    dots: np.ndarray
    q_norm: float
    k_norms: np.ndarray
    scores: np.ndarray
    scaled: np.ndarray
    allowed: np.ndarray
    shift: float
    exps: np.ndarray
    total: float
    weights: np.ndarray
    weighted: np.ndarray
    output: np.ndarray
    scale: float


# Below this, e^x of every score is printable as is; above it, subtract the row maximum first.
PRINTABLE_EXPONENT = 20.0


def row_breakdown(
    steps: AttentionSteps, row: int, *, q: object, k: object, v: object
) -> RowBreakdown:
    """The numbers of query `row` of 2-D `steps` computed from q `(q_pos, d_k)`, k, v.

    exps_j = exp(scaled_ij - m) (0 where masked),  total = Σ_j exps_j,
    weights_ij = exps_j / total,  output_i = Σ_j weights_ij v_j.
    """
    q = as_matrix(q, "Q (queries)")
    k = as_matrix(k, "K (keys)")
    v = as_matrix(v, "V (values)")
    scores = np.asarray(steps.scores)
    if scores.ndim != 2 or scores.shape != (q.shape[0], k.shape[0]):
        raise AttentionInputError(
            f"The steps have scores of shape {scores.shape} but Q and K give "
            f"({q.shape[0]}, {k.shape[0]}): pass the Q, K, V the steps were computed from."
        )
    row = check_int(row, "row", minimum=0)
    if row >= q.shape[0]:
        raise AttentionInputError(f"There are {q.shape[0]} queries, so row {row} does not exist.")
    masked = np.asarray(steps.masked)[row]
    allowed = np.isfinite(masked)
    finite = masked[allowed]
    big = finite.size and float(np.abs(finite).max()) > PRINTABLE_EXPONENT
    shift = float(finite.max()) if big else 0.0
    exps = np.where(allowed, np.exp(np.where(allowed, masked - shift, 0.0)), 0.0)
    products = q[row][None, :] * k  # (k_pos, d_k)
    weights = np.asarray(steps.weights)[row]
    return RowBreakdown(
        row=row,
        query=q[row],
        keys=k,
        values=v,
        products=products,
        dots=products.sum(axis=-1),
        q_norm=float(np.linalg.norm(q[row])),
        k_norms=np.linalg.norm(k, axis=-1),
        scores=np.asarray(steps.scores)[row],
        scaled=np.asarray(steps.scaled)[row],
        allowed=allowed,
        shift=shift,
        exps=exps,
        total=float(exps.sum()),
        weights=weights,
        weighted=weights[:, None] * v,  # (k_pos, d_v)
        output=np.asarray(steps.output)[row],
        scale=float(steps.scale),
    )
