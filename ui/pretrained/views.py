"""TODO"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import AttentionSteps, scaled_dot_product_attention
from ui.models.minilm import PRESETS, PageTrace
from ui.widgets.state import PageState

# Layer 4, head 2 links "it" to "animal" (0.68) in the default sentence; with "wide" instead of
# "tired" the same head moves weight towards "street". Positions count from 1, like the page.
DEFAULT_LAYER, DEFAULT_HEAD, DEFAULT_QUERY = 4, 2, 11


VIEWS = {
    "head": "Head view (lines)",
    "model": "Model view (all heads)",
    "layers": "Average per layer",
}


PATTERN_TITLES = {
    "previous": "previous token",
    "next": "next token",
    "self": "itself",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "broad": "broad",
    "mixed": "mixed",
}


# Shorter names for the cells of the head-role grid.
ROLE_TITLES = {**PATTERN_TITLES, "previous": "previous", "next": "next"}


PATTERN_MEANINGS = {
    "previous": "mean weight a query gives the token just before it",
    "next": "mean weight a query gives the token just after it",
    "self": "mean weight a query gives its own token",
    "cls": "mean weight a query gives [CLS] (the first token)",
    "sep": "mean weight a query gives [SEP] (the last token)",
    "broad": "mean entropy of a row over log(number of tokens): 1 = spread evenly",
}


# explain_row writes one line per key; past this many keys the row is shown as a table.
MAX_WRITTEN_KEYS = 40


MAX_PIPELINE_TOKENS = 24


def head_steps(trace: PageTrace, layer: int, head: int) -> tuple[AttentionSteps, float]:
    """Head (`layer`, `head`), from 0, as 2-D AttentionSteps, and the largest difference between
    its weights and the model's own (the same computation, one head at a time)."""
    return _head_steps(trace.digest, layer, head, trace)


# A 512-token head's steps hold four (512, 512) float32 arrays, 4 MB: keep a handful.
@st.cache_resource(max_entries=6, show_spinner=False)
def _head_steps(digest: str, layer: int, head: int, _trace: PageTrace):
    q = _trace.q_heads[layer, head]
    k = _trace.k_heads[layer, head]
    v = _trace.v_heads[layer, head]
    steps = scaled_dot_product_attention(q, k, v)  # scores (n, n), output (n, d_head)
    difference = float(np.max(np.abs(steps.weights - _trace.weights[layer, head])))
    return steps, difference


def focus_position(tokens: Sequence[str], word: str) -> int | None:
    """Position (from 1) of the first token equal to `word`, if any."""
    for i, token in enumerate(tokens):
        if token == word:
            return i + 1
    return None


# The word a preset asks the query control to jump to, once the preset's text is tokenized.
FOCUS_KEY = "pretrained.focus"


LINK_CHECKED_KEY = "pretrained.link_checked"


def use_preset(view: PageState, name: str) -> None:
    """A preset button's callback: its text, and (after tokenizing) a jump to its word."""
    _, text, word = PRESETS[name]
    view.set("text", text)
    st.session_state[FOCUS_KEY] = word


def fit_query_token(view: PageState, tokens: Sequence[str]) -> None:
    """Point the query control at a preset's word, and keep it inside the text: a token past
    the end becomes the last one (a link that asked for it gets a notice, once)."""
    if FOCUS_KEY in st.session_state:
        view.set("token", focus_position(tokens, st.session_state.pop(FOCUS_KEY)) or 1)
    n = len(tokens)
    if view.value("token") > n:
        if "token" in st.query_params and LINK_CHECKED_KEY not in st.session_state:
            view.notices.append(
                f"The link's `token={view.value('token')}` is past the end of this text ({n} "
                "tokens); the last token is shown instead."
            )
        view.set("token", n)
    st.session_state[LINK_CHECKED_KEY] = True


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
