"""The patching page's tables and sentences: the numbers behind each chart, written for a
reader. Shares are of the clean LD restored, (LD − LD_corrupt) / (LD_clean − LD_corrupt)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from attention_core.models.patching import PatchRuns
from ui.patching.inputs import shown

TOP_HEADS = 5
# A patch that restores less than this is not said to carry the answer.
CARRIES = 0.1


def pair_table(runs: PatchRuns, answer: str, wrong: str) -> pd.DataFrame:
    """Both prompts' LD and both answers' probabilities."""
    return pd.DataFrame(
        {
            "prompt": ["clean", "corrupted"],
            f"LD = logit({answer}) − logit({wrong})": [round(runs.clean_ld, 3),
                                                          round(runs.corrupt_ld, 3)],
            f"P({answer})": np.round(runs.probabilities[:, 0], 4),
            f"P({wrong})": np.round(runs.probabilities[:, 1], 4),
        }
    )  # fmt: skip


def pair_sentence(runs: PatchRuns, answer: str, wrong: str) -> str:
    right = runs.clean_ld > 0 > runs.corrupt_ld
    verdict = ("The model gets both right: the clean prompt prefers "
               f"{answer}, the corrupted one {wrong}." if right else
               "The model does not prefer the answer after the clean prompt and the wrong "
               "answer after the corrupted one, so the shares below measure something else: "
               "try another pair.")  # fmt: skip
    return (
        f"LD_clean = {runs.clean_ld:+.3f}, LD_corrupt = {runs.corrupt_ld:+.3f}: a patch that "
        f"brings LD back to {runs.clean_ld:+.3f} restores 100%. {verdict}"
    )


def carriers(shares: np.ndarray, rows: Sequence[str], columns: Sequence[str]) -> str:
    """Where the information sits and when it moves: the position whose patch restores the
    most at each row (if it restores at least CARRIES), told as runs of rows ("embedding to
    after layer 23: token 10 “ John”→“ Mary” (up to 101%); after layer 24 to after layer 30:
    the last token …")."""
    best = np.where(shares.max(axis=1) >= CARRIES, shares.argmax(axis=1), -1)
    runs, start = [], 0
    for row in range(1, len(best) + 1):
        if row == len(best) or best[row] != best[start]:
            runs.append((start, row - 1, int(best[start])))
            start = row
    last = len(columns) - 1
    parts = []
    for first, final, position in runs:
        if position < 0:
            continue
        span = rows[first] if first == final else f"{rows[first]} to {rows[final]}"
        name = "the last token" if position == last else "token"
        peak = shares[first : final + 1, position].max()
        parts.append(f"{span}: {name} {columns[position]} (up to {peak:.0%})")
    if not parts:
        return f"No single patch here restores {CARRIES:.0%} of the clean LD or more."
    moved = next((r for r, _, p in runs if p == last), None)
    where = f" The last token carries it from {rows[moved]} on." if moved else ""
    return (f"Where one patch restores {CARRIES:.0%} or more, the position that restores the "
            "most — " + "; ".join(parts) + "." + where)  # fmt: skip


def top_heads(every: np.ndarray, last: np.ndarray) -> pd.DataFrame:
    """The heads whose patch (every position) restores the most, with both shares."""
    heads = every.shape[1]
    order = np.argsort(every.ravel())[::-1][:TOP_HEADS]
    return pd.DataFrame(
        {
            "head": [f"layer {i // heads + 1}, head {i % heads + 1}" for i in order],
            "restored, every position": [f"{every.ravel()[i]:.1%}" for i in order],
            "restored, last position only": [f"{last.ravel()[i]:.1%}" for i in order],
        }
    )


def heads_sentence(every: np.ndarray, last: np.ndarray) -> str:
    heads = every.shape[1]
    top = int(np.argmax(every))
    layer, head = divmod(top, heads)
    return (
        f"The top head is layer {layer + 1}, head {head + 1}: patching its output at every "
        f"position restores {every[layer, head]:.1%} of the clean LD, at the last position "
        f"alone {last[layer, head]:.1%}."
    )


def looked_at(weights: np.ndarray, tokens: Sequence[Sequence[str]]) -> str:
    """Where the head's last query looks on each prompt: what it moves, from where."""
    parts = []
    for name, pattern, prompt in zip(("clean", "corrupted"), weights, tokens, strict=True):
        row = pattern[-1]
        key = int(row.argmax())
        parts.append(f"on the {name} prompt it reads token {key + 1} {shown(prompt[key])} "
                     f"(weight {row[key]:.2f})")  # fmt: skip
    return "From the last token, " + "; ".join(parts) + "."
