"""The pretrained page's tables: one head's pattern scores, the heads per label, and one
query's row of the steps when it is too long to write out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from attention_core import AttentionSteps
from ui.models.minilm import PageTrace
from ui.pretrained.patterns import PATTERN_MEANINGS, PATTERN_TITLES

# explain_row writes one line per key; past this many keys the row is shown as a table.
MAX_WRITTEN_KEYS = 40


def head_scores_table(trace: PageTrace, layer: int, head: int) -> pd.DataFrame:
    """Every pattern score of one head, with what it measures."""
    patterns = trace.patterns
    return pd.DataFrame(
        {
            "pattern": [PATTERN_TITLES[p] for p in PATTERN_MEANINGS],
            "score": [float(patterns.score(p)[layer, head]) for p in PATTERN_MEANINGS],
            "what the score is": list(PATTERN_MEANINGS.values()),
        }
    )


def label_counts(trace: PageTrace) -> dict[str, int]:
    """How many heads carry each label, most common first."""
    values, counts = np.unique(trace.patterns.labels, return_counts=True)
    pairs = sorted(zip(values.tolist(), counts.tolist(), strict=True), key=lambda p: -p[1])
    return {PATTERN_TITLES[v]: int(c) for v, c in pairs}


def row_table(steps: AttentionSteps, query: int, tokens: Sequence[str]) -> pd.DataFrame:
    """One query's row of the steps, one line per key (for rows too long to write out)."""
    return pd.DataFrame(
        {
            "key": [f"{j + 1} · {t}" for j, t in enumerate(tokens)],
            "score q·k": np.asarray(steps.scores[query], dtype=np.float64),
            "scaled": np.asarray(steps.scaled[query], dtype=np.float64),
            "weight": np.asarray(steps.weights[query], dtype=np.float64),
        }
    )
