"""The "why a head attends there" page's sections, each drawn from one `HeadReading`: the cause
of one query's attention to one key, the split by RoPE frequency (or learned positions' four
terms), the whole pattern, and the question.

The reading's arrays come from ``ui.attends.data``; every number written here is read from them,
and every sentence is computed by ``attention_core.lessons.attends``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attention_core.lessons import attends
from attention_core.models.score_reading import FOCUSED, HeadReading
from attention_core.training.formation import PREVIOUS_TOKEN_HEAD
from ui.attends import figures
from ui.widgets import render, small_screens
from ui.widgets.byte_cache import digest_of
from ui.widgets.layout import plain
from ui.widgets.quiz import ask
from ui.widgets.state import PageState

NORM_HELD = {
    "RMSNorm": "the RMSNorm's scale at each position (1/rms) is held at its value in this run, "
    "so q and k are linear in the parts",
    "LayerNorm": "the LayerNorm's scale at each position (1/σ) is held at its value in this run "
    "and each part loses its own mean, so q and k are linear in the parts",
    "post-LN": "every LayerNorm on the way (after each block) has its scale held at its value "
    "in this run, and each part loses its own mean there",
    "none": "nothing: this model has no norm, so q and k are linear in the parts as they are",
}


def cause(
    reading: HeadReading, tokens: tuple[str, ...], key: int, head: str, norm: str, digest: str
) -> None:
    """The sentence naming the cause, the score against its parts' sum, both sides' charts and
    the largest terms."""
    query_token, key_token = tokens[reading.query], tokens[key]
    st.markdown(
        attends.cause_sentence(
            head, figures.token_label(query_token), figures.token_label(key_token),
            reading.names, reading.key_above, key,
        )
    )  # fmt: skip
    st.markdown(
        f"The model's own score of this key: **{reading.scores[key]:.4f}**; its "
        f"{len(reading.names)} × {len(reading.names)} query part × key part terms together: "
        f"**{reading.summed[key]:.4f}** (float32 rounding apart). Held: {NORM_HELD[norm]} "
        f"(scale {reading.query_scale:.4g} at the query)."
    )
    drawn = render.digested(digest, reading)
    left, right = st.columns(2)
    with left:
        render.show(render.cached(figures.side_figure, drawn, "key", key),
                    filename="attends-key-side", key="attends.key_side")  # fmt: skip
    with right:
        render.show(render.cached(figures.side_figure, drawn, "query", key),
                    filename="attends-query-side", key="attends.query_side")  # fmt: skip
    st.markdown("The largest single terms: what one source wrote at the query, meeting what one "
                "source wrote at the key.")  # fmt: skip
    small_screens.table(terms_table(reading, key), hide_index=True, key="attends.terms")


def terms_table(reading: HeadReading, key: int) -> pd.DataFrame:
    pairs, values = reading.top_terms[key], reading.top_values[key]
    return pd.DataFrame(
        {
            "written at the query by": [reading.names[a] for a, _ in pairs],
            "meets, written at the key by": [reading.names[b] for _, b in pairs],
            "adds to the score": [round(float(v), 4) for v in values],
        }
    )


def frequencies(
    reading: HeadReading, tokens: tuple[str, ...], key: int, head: str, digest: str
) -> None:
    """RoPE: each band's part and the scores without the rotation. Learned positions: the four
    token/position terms of the key's score."""
    if reading.bands is not None:
        labels = figures.labels(tokens)
        drawn = render.digested(digest, reading)
        st.markdown(attends.band_sentence(head, reading.bands, reading.weights))
        render.show(render.cached(figures.bands_figure, drawn, labels),
                    filename="attends-bands", key="attends.bands")  # fmt: skip
        render.show(render.cached(figures.rotation_figure, drawn, labels),
                    filename="attends-rotation", key="attends.rotation")  # fmt: skip
        return
    if reading.positional is None:
        st.markdown(
            f"{head} sits in a layer that uses **no positions at all** (NoPE): neither a "
            "rotation nor a position embedding. Its scores see where a key sits only through "
            "the causal mask, so there is no position part to split off: every part above is "
            "content, and a token far back is matched as readily as a near one."
        )
        return
    terms = reading.positional[:, :, key]
    st.markdown(
        "This model has no rotation: where each token sits comes in with the position "
        "embedding, added to the token's own. Of this key's score, the token and position "
        "parts meet in four terms (at the first layer they are the whole score but for the "
        "biases; later, what earlier layers wrote joins them):"
    )
    small_screens.table(
        pd.DataFrame(
            {
                "query part": ["token", "token", "position", "position"],
                "key part": ["token", "position", "token", "position"],
                "adds to the score": [round(float(v), 4) for v in terms.ravel()],
            }
        ),
        hide_index=True,
        key="attends.positional",
    )


def pattern(
    reading: HeadReading, tokens: tuple[str, ...], previous: tuple[str, ...], digest: str
) -> None:
    """The keys × sources map of the whole pattern, and the kind of head it makes."""
    _, sentence = attends.head_kind(reading.names, reading.pattern_totals, previous)
    st.markdown(
        f"{sentence} For the {len(reading.pattern_queries)} queries that put at least "
        f"{FOCUSED:.0%} of their weight on one key after the first, what each source wrote at "
        "each key, above the average key, weighted by the attention the key gets. The first key "
        "is left out: heads park spare weight there, and its column would drown the others."
    )
    render.show(
        render.cached(figures.pattern_figure, render.digested(digest, reading),
                      figures.labels(tokens)),
        filename="attends-pattern", key="attends.pattern",
    )  # fmt: skip
    if previous:
        st.caption(
            "Previous-token heads of this model, by the heads page's probe (random tokens "
            f"repeated, score past {PREVIOUS_TOKEN_HEAD}): {plain(', '.join(previous))}."
        )


def question(view: PageState, reading: HeadReading, tokens: tuple[str, ...], key: int,
             head: str) -> None:  # fmt: skip
    ask(
        view,
        "attends",
        {
            "attends.source": lambda: attends.source_question(
                head, figures.token_label(tokens[reading.query]),
                figures.token_label(tokens[key]), reading.names, reading.key_above, key,
            )
        },
    )  # fmt: skip


def reading_digest(kind: str, ids: tuple[int, ...], layer: int, head: int, query: int) -> str:
    return digest_of("attends", kind, ids, layer, head, query)
