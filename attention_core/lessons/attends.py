"""What the "why a head attends there" page says, computed from a score's split
(``attention_core.score_parts``): the cause of one query's attention to one key, whether a
head's pattern comes from its fast or its slow RoPE pairs, what kind of head a whole pattern
makes it, and the page's predict-then-reveal question.

Parts come as ``above`` `(C, k_pos)`: each source's part of each key's score minus its mean
over the keys the query sees (``score_parts.above_average``), the only part of a score the
softmax sees. Sources are named as ``models.score_sources`` names them ("token embedding",
"layer 17 head 1", "layer 3 MLP"…); the head a sentence is about is named by the caller
("Layer 19, head 7"), and positions by the tokens' own text.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from ..validation import AttentionInputError
from .quiz import Question

__all__ = [
    "band_sentence",
    "cause_sentence",
    "head_kind",
    "largest_terms",
    "source_question",
]

# A half of the bands "makes" a pattern when it carries more than this share of what sets the
# attended keys apart (neither does: mixed); a source "mostly" causes what it carries this much of.
MOST = 0.5


def _quoted(token: str) -> str:
    return "‘" + token + "’"


def cause_sentence(
    head: str, query_token: str, key_token: str, names: Sequence[str], above: np.ndarray, key: int
) -> str:
    """Which source made ``key`` attractive to this query: the largest part of its score above
    the average visible key's, out of the whole excess.

    "Layer 19, head 7 attends from ‘ fox’ to ‘ jumps’ mostly because of what layer 17 head 1
    wrote at ‘ jumps’ (+14.9 of the +16.5 by which its score beats the average visible key's)"."""
    column = above[:, key]
    excess = float(column.sum())
    top = int(np.argmax(column))
    if excess <= 0:
        return (
            f"{head} gives {_quoted(key_token)} no more than the average key from "
            f"{_quoted(query_token)}: its score is {excess:+.1f} from the visible keys' mean, "
            f"and the largest part for it is what {names[top]} wrote there ({column[top]:+.1f})."
        )
    mostly = "mostly" if column[top] >= MOST * excess else "most of all"
    return (
        f"{head} attends from {_quoted(query_token)} to {_quoted(key_token)} {mostly} "
        f"because of what {names[top]} wrote at {_quoted(key_token)} ({column[top]:+.1f} of the "
        f"{excess:+.1f} by which its score beats the average visible key's)."
    )


def largest_terms(
    names: Sequence[str], terms: np.ndarray, key: int, count: int = 5
) -> list[tuple[str, str, float]]:
    """The ``count`` query part × key part terms of the score of ``key`` largest in size:
    (what wrote at the query, what wrote at the key, the term), largest first. terms `(C, C,
    k_pos)` (``ScoreSplit.terms``)."""
    at_key = terms[:, :, key]
    order = np.argsort(-np.abs(at_key), axis=None, kind="stable")[:count]
    pairs = np.unravel_index(order, at_key.shape)
    return [(names[a], names[b], float(at_key[a, b])) for a, b in zip(*pairs, strict=True)]


def band_sentence(head: str, band_above: np.ndarray, weights: np.ndarray) -> str:
    """Whether the head's pattern comes from its fast RoPE pairs (position) or its slow ones
    (content): each band's share of the attended keys' excess over the average key, weighted
    by the attention they get.

    band_above `(bands, k_pos)` each band's part of each key's score above the visible keys'
    average, fastest band first; weights `(k_pos,)` the query's attention."""
    carried = band_above @ weights  # (bands,) what each band adds where the weight goes
    total = float(carried.sum())
    if total <= 0:
        return (
            f"{head} spreads its weight where no band sets keys apart: its pattern is "
            "not made by the rotation's frequencies."
        )
    shares = carried / total
    fast, slow = float(shares[: len(shares) // 2].sum()), float(shares[len(shares) // 2 :].sum())
    if fast > MOST:
        made = "its fast-turning pairs: position, how far each key is"
    elif slow > MOST:
        made = "its slow-turning pairs, which barely turn over a prompt: content, what each key is"
    else:
        made = "fast and slow pairs alike: position and content together"
    return (
        f"{head}'s weight goes where {made} ({fast:.0%} from the faster half of the "
        f"pairs, {slow:.0%} from the slower)."
    )


def head_kind(
    names: Sequence[str], source_totals: np.ndarray, previous_heads: Collection[str]
) -> tuple[str, str]:
    """(kind, sentence) of a head from which source dominates its pattern's map (each source's
    total over the keys, ``score_parts.source_map`` summed over keys): "positional" (the
    position embedding), "content" (the token embedding), "induction" (a previous-token head,
    found by the heads page's probe: K-composition), or "composed" (another head or an MLP)."""
    if len(names) != len(source_totals):
        raise AttentionInputError(
            f"{len(names)} names for {len(source_totals)} sources: they must match."
        )
    top = int(np.argmax(source_totals))
    name = names[top]
    share = float(source_totals[top] / np.clip(source_totals, 0, None).sum())
    if name == "position embedding":
        kind, why = "positional", "where each key is, not what it is"
    elif name == "token embedding":
        kind, why = "content", "which token each key is"
    elif name in previous_heads:
        kind, why = (
            "induction",
            f"what {name}, a previous-token head, wrote at each key: the token before it "
            "(K-composition)",
        )
    else:
        kind, why = "composed", f"what {name} wrote at each key"
    return (
        kind,
        f"Over the whole pattern, {share:.0%} of what sets the attended keys apart is {why}.",
    )


def source_question(
    head: str, query_token: str, key_token: str, names: Sequence[str], above: np.ndarray, key: int
) -> Question:
    """Which source makes this key attractive to this query? Options: the three largest
    sources and the token embedding (content alone); right: the largest."""
    column = above[:, key]
    order = [int(i) for i in np.argsort(-column, kind="stable")]
    shown = order[:3]
    if "token embedding" in names and names.index("token embedding") not in shown:
        shown.append(names.index("token embedding"))
    options = tuple(names[i] for i in sorted(shown))
    right = names[order[0]]
    why = (
        f"What {right} wrote at {_quoted(key_token)} adds {column[order[0]]:+.1f} to its score "
        f"above the average visible key's; "
        + ", ".join(f"{names[i]} {column[i]:+.1f}" for i in order[1:3])
        + "."
    )
    return Question(
        "attends.source",
        f"{head} attends from {_quoted(query_token)} to {_quoted(key_token)}. What wrote "
        f"at {_quoted(key_token)} makes it attractive, more than anything else?",
        options,
        frozenset({options.index(right)}),
        why,
    )
