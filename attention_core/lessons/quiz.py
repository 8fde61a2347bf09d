"""Predict, then reveal: questions whose answers come from the numbers a learner is looking at.

Each question function takes the current arrays or Steps of a page and returns a `Question`:
the prompt, the options, which option(s) are right and an explanation that quotes the actual
numbers. Nothing is canned: change Q, the mask, the heads or the positions and the answer moves
with them. Degenerate cases (a tie, a fully masked row, a scale of 1) have an option of their
own, so the right answer is always among the options and says what happened.

Questions are named `<page>.<name>` (`QUESTIONS`), the names a teacher's link carries:
`?quiz=sdpa.winner,mask.row2`. Rows and keys are counted from 1 in every text, as the pages do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..attention import AttentionSteps, dot_product_attention, scaled_dot_product_attention
from ..head_patterns import head_patterns
from ..masks import causal_mask
from ..positional import sinusoidal_encoding
from ..summaries import attention_entropy
from ..validation import AttentionInputError, as_matrix

__all__ = [
    "QUESTIONS",
    "Question",
    "attention_agrees_with_hiding",
    "head_attends_to_previous",
    "nearest_position",
    "parse_question_ids",
    "reorder_changes_outputs",
    "row_weight_sum",
    "visible_keys",
    "weights_without_scale",
    "winning_key",
]

# Every question a link may ask for, by page: id -> a short title for menus.
QUESTIONS = {
    "sdpa.winner": "Which key wins the last query's row?",
    "sdpa.noscale": "What happens to the weights without ÷√d_k?",
    "mask.row2": "Which keys can query 2 see?",
    "mask.sum": "What do query 2's weights add up to?",
    "mha.previous": "Which head attends most to the previous token?",
    "bert.previous": "Which head of this layer attends most to the previous token?",
    "pe.shuffle": "Does reordering the sentence change each word's output?",
    "pe.nearest": "At which distance are two positions' encodings most alike?",
    "heads.agree": "Is the token attention favours the one that matters most?",
    "patching.arrives": "At which layer does the answer reach the last token?",
    "learning.layer": "Which layer will hold the induction head?",
    "learning.first": "Which forms first, a previous-token or an induction head?",
    "attends.source": "What wrote at the key makes it attractive, more than anything else?",
}

# Two weights this close are the same number reached by two roundings, not a winner and a loser.
RTOL, ATOL = 1e-9, 1e-12
TIE = "Two or more keys tie for the most weight"
NOTHING = "None: every key of this query is masked"


@dataclass(frozen=True)
class Question:
    """One prediction to make, with its answer.

    id           `<page>.<name>`, a key of QUESTIONS
    prompt       the question, with the current setting it is about
    options      what the learner chooses from
    correct      indices into `options` that count as right (a tie may accept several)
    explanation  why, with the numbers behind the answer
    multiple     True: choose every option that applies (right iff exactly `correct`);
                 False: choose one (right iff it is in `correct`)
    pending      True while the answer is not known yet (a training still running): a
                 prediction can be locked in, and is judged once the question is asked again
                 with its answer
    """

    id: str
    prompt: str
    options: tuple[str, ...]
    correct: frozenset[int]
    explanation: str
    multiple: bool = False
    pending: bool = False

    def is_right(self, chosen: int | Iterable[int] | None) -> bool:
        if chosen is None:
            return False
        if self.multiple:
            return set(chosen) == set(self.correct)
        return int(chosen) in self.correct

    @property
    def answer(self) -> str:
        """The right option(s), in the order of `options`."""
        return "; ".join(self.options[i] for i in sorted(self.correct))


def parse_question_ids(
    raw: str, page: str, asked_on: Mapping[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """The ids a link asks `page` (an id prefix: "sdpa") for, and a message for each id that
    cannot be asked there.

    `raw` is the link's comma-separated list. Ids of another prefix are explained with
    `asked_on` (prefix -> where those questions are asked: "the masking lab page"), since a
    teacher's link may hold several pages' questions; unknown ids are named.
    """
    asked_on = asked_on or {}
    asked, problems = [], []
    for item in dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()):
        owner = item.split(".", 1)[0]
        if item in QUESTIONS and owner == page:
            asked.append(item)
        elif item in QUESTIONS:
            where = asked_on.get(owner, "another page")
            problems.append(f"`{item}` is asked on {where}, not here.")
        else:
            shown = item if len(item) <= 30 else item[:30] + "…"
            here = ", ".join(f"`{q}`" for q in QUESTIONS if q.startswith(page + "."))
            problems.append(f"`{shown}` is not a question; this page asks {here}.")
    return asked, problems


def _key_options(labels: Sequence[str]) -> list[str]:
    return [f"{j + 1} · {label}" for j, label in enumerate(labels)]


def _numbers(values: Iterable[float]) -> str:
    return ", ".join(f"{x:.3f}" for x in values)


def _check_row(row: int, count: int, what: str) -> int:
    if not 0 <= row < count:
        raise AttentionInputError(f"There is no {what} {row + 1}: there are {count}.")
    return row


def _top(values: np.ndarray) -> np.ndarray:
    """Indices of the largest entries, ties included."""
    return np.flatnonzero(np.isclose(values, values.max(), rtol=RTOL, atol=ATOL))


def _right_for_largest(best: np.ndarray, tie: int) -> frozenset[int]:
    """The right options of a "which is largest?" question, `best` from `_top`: the largest
    entry's, or, when several tie, each tied entry's and the tie option `tie` (a learner who saw
    one of the tied entries win is not wrong)."""
    return frozenset({tie, *best.tolist()}) if best.size > 1 else frozenset(best.tolist())


# -- scaled dot-product ---------------------------------------------------------------------------


def winning_key(
    steps: AttentionSteps, row: int, query_labels: Sequence[str], key_labels: Sequence[str]
) -> Question:
    """Which key gets the most weight in query `row` (0-based) of `steps` `(q_pos, k_pos)`?

    winner = argmax_j weights[row, j]; softmax keeps the order of the (masked) scores, so it
    is also the key with the largest scaled score.
    """
    weights = np.asarray(steps.weights, dtype=np.float64)
    row = _check_row(row, weights.shape[0], "query")
    w, s = weights[row], np.asarray(steps.masked, dtype=np.float64)[row]  # (k_pos,) each
    options = [*_key_options(key_labels), TIE, NOTHING]
    query = f"{row + 1} · {query_labels[row]}"
    prompt = f"Which key gets the most weight in the row of query **{query}**?"
    if bool(np.asarray(steps.fully_masked)[row]):
        explanation = (
            f"Every score of query {query} is −∞ (masked), so no key can win: the softmax has "
            "nothing to share out, and this row's weights are all 0."
        )
        return Question(
            "sdpa.winner", prompt, tuple(options), frozenset({len(options) - 1}), explanation
        )
    winners = _top(w)
    named = " and ".join(f"key {options[j]}" for j in winners)
    scores = f"Its scaled scores are {_numbers(s)}; the weights are {_numbers(w)}."
    if winners.size > 1:
        explanation = (
            f"{scores} {named.capitalize()} have the same largest score, so they get the same "
            f"weight, {w[winners[0]]:.3f} each: a tie (each of them counts as right)."
        )
    else:
        j = int(winners[0])
        explanation = (
            f"{scores} The softmax keeps the order of the scores, so {named}, with the largest "
            f"score {s[j]:.3f}, gets the most weight: {w[j]:.3f}."
        )
    correct = _right_for_largest(winners, len(options) - 2)
    return Question("sdpa.winner", prompt, tuple(options), correct, explanation)


SHARPER = "Sharper: the top weight grows, the entropy falls"
FLATTER = "Flatter: the top weight shrinks, the entropy grows"
SAME = "No change"


def weights_without_scale(
    q: object, k: object, row: int, query_labels: Sequence[str], *, causal: bool = False
) -> Question:
    """What happens to query `row`'s dot-product weights when ÷√d_k is left out?

    with    = softmax(q_row Kᵀ / √d_k),   without = softmax(q_row Kᵀ)
    Leaving the scale out multiplies every score by √d_k >= 1, which never flattens a softmax.
    """
    q, k = as_matrix(q, "Q (queries)"), as_matrix(k, "K (keys)")
    row = _check_row(row, q.shape[0], "query")
    d_k = q.shape[1]
    v = np.zeros((k.shape[0], 1))  # only the weights matter here
    mask = causal_mask(q.shape[0], k.shape[0]) if causal else None
    scaled = scaled_dot_product_attention(q, k, v, mask=mask)
    unscaled = dot_product_attention(q, k, v, mask=mask)
    w_with, w_without = scaled.weights[row], unscaled.weights[row]  # (k_pos,) each
    top_with, top_without = w_with.max(), w_without.max()
    h_with, h_without = attention_entropy(w_with), attention_entropy(w_without)
    options = (SHARPER, FLATTER, SAME)
    query = f"{row + 1} · {query_labels[row]}"
    prompt = (
        f"Take the dot-product scores of these Q and K (d_k = {d_k}"
        + (", causal mask on" if causal else "")
        + f"). If they were **not** divided by √d_k = {math.sqrt(d_k):.3f}, what would happen "
        f"to the weights of query **{query}**?"
    )
    numbers = (
        f"With ÷√d_k the weights are {_numbers(w_with)} (top {top_with:.3f}, entropy "
        f"{h_with:.3f} nats); without it they are {_numbers(w_without)} (top "
        f"{top_without:.3f}, entropy {h_without:.3f} nats)."
    )
    if math.isclose(top_with, top_without, rel_tol=RTOL, abs_tol=ATOL):
        visible = scaled.masked[row][np.isfinite(scaled.masked[row])]
        if d_k == 1:
            why = "√1 = 1: dividing by it changes nothing."
        elif visible.size == 0:
            why = "Every key of this query is masked: its weights are 0 either way."
        elif visible.size == 1:
            why = "The query sees a single key, which gets weight 1 at any scale."
        else:
            why = "All the scores this query sees are equal, so its weights stay even at any scale."
        return Question("sdpa.noscale", prompt, options, frozenset({2}), f"{numbers} {why}")
    correct = 0 if top_without > top_with else 1
    why = (
        f"Without the scale every score is {math.sqrt(d_k):.3f} times larger, so the gaps "
        "between them grow and the softmax piles more weight onto the largest: the row "
        "gets sharper (a nearly one-hot row passes almost no gradient back)."
    )
    return Question("sdpa.noscale", prompt, options, frozenset({correct}), f"{numbers} {why}")


# -- masks ----------------------------------------------------------------------------------------


def visible_keys(mask: object, row: int, tokens: Sequence[str], mask_name: str) -> Question:
    """Which keys may query `row` attend to under `mask` `(q_pos, k_pos)` (True = may attend)?

    None means no mask: every key is visible. Answer: {j : mask[row, j]}, or NOTHING.
    """
    n = len(tokens)
    allowed = np.ones((n, n), bool) if mask is None else np.asarray(mask, dtype=bool)
    row = _check_row(row, allowed.shape[0], "query")
    options = (*_key_options(tokens), NOTHING)
    seen = np.flatnonzero(allowed[row])
    query = f"{row + 1} · {tokens[row]}"
    prompt = (
        f"Under the mask **{mask_name}**, which keys can query **{query}** attend to? "
        "Choose every one that applies."
    )
    blocked = [options[j] for j in np.flatnonzero(~allowed[row])]
    if seen.size == 0:
        explanation = (
            f"Row {row + 1} of the mask blocks every key, so query {query} sees nothing: all "
            "its scores become −∞ and its weights are all 0."
        )
        return Question("mask.row2", prompt, options, frozenset({n}), explanation, multiple=True)
    explanation = f"Row {row + 1} of the mask allows {', '.join(options[j] for j in seen)}" + (
        f" and blocks {', '.join(blocked)}: those scores become −∞ and get weight exactly 0."
        if blocked
        else ": it blocks nothing."
    )
    return Question(
        "mask.row2", prompt, options, frozenset(seen.tolist()), explanation, multiple=True
    )


SUM_OPTIONS = ("Exactly 1", "Less than 1: the blocked keys' share is lost", "0", "More than 1")


def row_weight_sum(steps: AttentionSteps, row: int, tokens: Sequence[str]) -> Question:
    """What do query `row`'s masked weights add up to? 1 (softmax over the allowed keys), or 0
    for a fully masked row (this package's convention: zero weights, flagged `fully_masked`)."""
    w = np.asarray(steps.weights, dtype=np.float64)
    row = _check_row(row, w.shape[0], "query")
    query = f"{row + 1} · {tokens[row]}"
    prompt = (
        f"After the mask, what do the attention weights of query **{query}** add up to, "
        "counting the blocked keys' zeros?"
    )
    allowed = np.isfinite(np.asarray(steps.masked)[row])
    if bool(np.asarray(steps.fully_masked)[row]):
        explanation = (
            f"Every key of query {query} is blocked. The textbook softmax would give 0/0 = NaN; "
            "this package gives the row weights of 0, so the sum is 0 (and flags the row)."
        )
        return Question("mask.sum", prompt, SUM_OPTIONS, frozenset({2}), explanation)
    terms = " + ".join(f"{x:.3f}" for x in w[row][allowed])
    explanation = (
        f"The softmax shares the weight among the {int(allowed.sum())} allowed keys only: "
        f"{terms} = {w[row].sum():.3f}. The blocked keys ({int((~allowed).sum())}) add exactly 0."
    )
    return Question("mask.sum", prompt, SUM_OPTIONS, frozenset({0}), explanation)


# -- multi-head -----------------------------------------------------------------------------------


def head_attends_to_previous(
    weights: object,
    tokens: Sequence[str],
    *,
    layer: int | None = None,
    previous: np.ndarray | None = None,
) -> Question:
    """Which head puts the most weight on the previous token? weights `(head, pos, pos)`.

    previous_h = mean over queries i >= 2 of w_h[i, i-1] (head_patterns' "previous" score).
    `layer` (0-based) names a trained model's layer: the question is then `bert.previous`.
    `previous`: those `(head,)` scores, when the caller has them already (a long text's layer
    is not worth scoring twice); `weights` is then not read.
    """
    scores = head_patterns(weights).previous if previous is None else np.asarray(previous)
    heads = scores.shape[0]
    qid = "mha.previous" if layer is None else "bert.previous"
    options = (*(f"head {h + 1}" for h in range(heads)), "Two or more heads tie")
    shown = " ".join(tokens) if len(tokens) <= 16 else " ".join(tokens[:16]) + " …"
    prompt = (
        ("" if layer is None else f"In layer {layer + 1}: ")
        + f"which of the {heads} heads puts the most weight on the **previous** token (each "
        f"query i looking at key i − 1, in “{shown}”)?"
    )
    prompt = prompt[0].upper() + prompt[1:]
    best = _top(scores)
    listed = "; ".join(f"head {h + 1}: {x:.3f}" for h, x in enumerate(scores))
    explanation = (
        f"Mean weight a query gives the token just before it, over queries 2..{len(tokens)}: "
        f"{listed}."
    )
    if best.size > 1:
        why = " and ".join(f"head {h + 1}" for h in best) + " tie."
    else:
        h = int(best[0])
        hint = (
            " Only one head: it wins by default."
            if heads == 1
            else " These heads are untrained (random weights): a trained model has heads that "
            "do this on purpose, often with most of their weight."
            if layer is None
            else " A trained head that scores near 1 has learned to read the word before: the "
            "pattern is a line just below the diagonal."
        )
        why = f"Head {h + 1} is highest.{hint}"
    return Question(qid, prompt, options, _right_for_largest(best, heads), f"{explanation} {why}")


# -- positions ------------------------------------------------------------------------------------

CHANGE_OPTIONS = (
    "No: each word gets the same output, only in another row",
    "Yes: words get different outputs",
)


def reorder_changes_outputs(
    tokens: Sequence[str],
    reordered: Sequence[str],
    max_abs_difference: float,
    output_size: float,
    encoding: str,
) -> Question:
    """Does self-attention give each word another output when the sentence is reordered?

    max_abs_difference = max |Attn(PX) put back in order − Attn(X)| (position_lab.order_blindness);
    it is rounding (≈1e-16 · output_size) exactly when the answer is no. Each word is followed
    by where it stood: in “a b a” reversed, the first “a” moves to the end, so with positions
    its output changes although the sentence reads the same.
    """
    prompt = (
        f"With **{encoding}** positions, reorder “{' '.join(tokens)}” into "
        f"“{' '.join(reordered)}”. Does any word's attention output change?"
    )
    rounding = 1e-9 * max(1.0, float(output_size))
    measured = f"Measured: max |difference| = {max_abs_difference:.2e}."
    if max_abs_difference > rounding:
        why = (
            f"{measured} With {encoding} positions a word that moved gets another position "
            "vector, so another input and another output."
        )
        return Question("pe.shuffle", prompt, CHANGE_OPTIONS, frozenset({1}), why)
    if encoding != "none":
        why = (
            f"{measured} This reordering leaves every word where it was, so each keeps its "
            "position vector and its output, even with positions."
        )
    else:
        why = (
            f"{measured} Only rounding: without positions attention treats the sentence as a "
            "bag of words; reordering the inputs only reorders the output rows."
        )
    return Question("pe.shuffle", prompt, CHANGE_OPTIONS, frozenset({0}), why)


def nearest_position(d_model: int, base: float, max_distance: int = 8) -> Question:
    """Which distance k in 1..max_distance gives the largest PE(p)·PE(p + k)?

    PE(p)·PE(p + k) = Σ_i cos(ω_i k) depends on k only, so row 0 of the table answers for
    every p. Near positions are usually most alike, but not always (d_model = 2: one cosine).
    """
    if max_distance < 1:
        raise AttentionInputError("The table needs at least 2 positions to compare two of them.")
    table = sinusoidal_encoding(max_distance + 1, d_model, base)  # (pos, d_model)
    dots = table[1:] @ table[0]  # (max_distance,): PE(0)·PE(k), k = 1..max_distance
    options = (*(f"k = {k}" for k in range(1, max_distance + 1)), "Two or more distances tie")
    prompt = (
        f"Sinusoidal encoding, d_model = {d_model}, base {base:g}: for which distance "
        f"k = 1..{max_distance} is the dot product PE(p)·PE(p + k) largest?"
    )
    best = _top(dots)
    listed = "; ".join(f"k = {k + 1}: {x:.3f}" for k, x in enumerate(dots))
    explanation = f"PE(p)·PE(p + k) = Σᵢ cos(ωᵢ k), the same for every p: {listed}."
    if best.size > 1:
        why = "A tie."
    else:
        k = int(best[0])
        why = f"The largest is at k = {k + 1}." + (
            " Neighbours are most alike here."
            if k == 0
            else " Not the nearest: each cosine comes back towards 1 after a full turn, and with "
            "few or slow frequencies a farther position can line up better."
        )
    correct = _right_for_largest(best, max_distance)
    return Question("pe.nearest", prompt, options, correct, f"{explanation} {why}")


# -- what heads do --------------------------------------------------------------------------------


def attention_agrees_with_hiding(
    attention: Sequence[float], hiding: Sequence[float], tokens: Sequence[str], query: str
) -> Question:
    """Does the key that gets the most attention (heads averaged) also move the model's output
    the most when it is hidden? `attention` and `hiding` `(k,)` over the same keys."""
    a, h = np.asarray(attention, dtype=np.float64), np.asarray(hiding, dtype=np.float64)
    if a.shape != h.shape or a.shape != (len(tokens),) or a.size < 2:
        raise AttentionInputError("Attention and hiding need one value per key, two keys or more.")
    favoured, matters = int(np.argmax(a)), int(np.argmax(h))
    named = _key_options(tokens)
    options = ("Yes, the same token", "No, hiding another token changes more")
    prompt = (
        f"For the token **{query}**, attention (heads averaged) puts the most weight on "
        f"**{named[favoured]}** ({a[favoured]:.3f}). Is that also the token whose hiding "
        "changes the model's output the most?"
    )
    if favoured == matters:
        return Question(
            "heads.agree",
            prompt,
            options,
            frozenset({0}),
            f"Yes here: hiding {named[favoured]} changes the output by {h[favoured]:.4f}, more "
            "than hiding any other token. The two often part ways: a weight says where a head "
            "looks, not how much what it finds adds.",
        )
    return Question(
        "heads.agree",
        prompt,
        options,
        frozenset({1}),
        f"No: hiding {named[matters]} changes the output most ({h[matters]:.4f}); hiding "
        f"{named[favoured]}, the most attended token, changes it by {h[favoured]:.4f}. A large "
        "weight on a token whose value adds little (often the first token, a sink) says where "
        "a head looks, not what it uses.",
    )
