"""The families section: same-content scores of the five ways to give attention positions
(sinusoidal and learned tables added to the input, RoPE rotating q and k, ALiBi biasing the
score, NoPE giving none), a tab for each of learned, RoPE, ALiBi and NoPE, and, nested, beyond
the training length.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError, alibi_slopes, learned_encoding
from attention_core.lessons.position_experiments import (
    LEARNED_STD,
    POSITION_FAMILIES,
    causal_alibi,
    offset_profile,
)
from ui.positional import extrapolation
from ui.positional.data import FamilySetting, family_scores, family_spread, slopes_frame
from ui.positional.figures import (
    FAMILY_TITLES,
    family_figure,
    position_labels,
    profile_figure,
    show,
    table_heatmap,
)
from ui.positional.inputs import keep
from ui.widgets import heatmaps, small_screens
from ui.widgets.state import PageState, write_url_after_fragment


def rope_profile_figure(num_positions: int, d_model: int, seed: int, base: float) -> go.Figure:
    """Mean, smallest and largest RoPE score at each offset, for identical content."""
    scores = family_scores(FamilySetting("rotary", num_positions, d_model, seed, base))
    return profile_figure(
        offset_profile(scores),
        title="RoPE score by offset: one line, whatever the positions",
        y_title="score / √d",
    )


def learned_figure(num_positions: int, d_model: int, seed: int) -> go.Figure:
    table = learned_encoding(num_positions, d_model, seed=seed, std=LEARNED_STD)
    return table_heatmap(
        table, f"A random 'learned' table: {num_positions} positions × {d_model} dimensions"
    )


def alibi_grid(num_heads: int, num_positions: int) -> go.Figure:
    """The causal bias of every head, one small heatmap each, on one colour scale."""
    labels = position_labels(num_positions)
    slopes = alibi_slopes(num_heads)
    return heatmaps.heatmap_grid(
        causal_alibi(num_heads, num_positions),  # (head, query position, key position)
        titles=[f"head {h + 1}: m = {m:.4g}" for h, m in enumerate(slopes)],
        row_labels=labels,
        col_labels=labels,
        kind="scores",
        columns=4,
    )


@st.fragment
def compare_families(view: PageState, n: int, d_model: int, seed: int, base: float) -> None:
    """Same-content scores of the five families, their tabs, and (nested) the extrapolation."""
    a, b, c = st.columns(3)
    compare_n = a.slider(
        "Positions to compare", 4, 64, key=view.int_key("compare_n", 16, lo=4, hi=64)
    )
    heads = b.slider("ALiBi heads", 1, 16, key=view.int_key("heads", 8, lo=1, hi=16))
    head_key = keep(view.int_key("head", 1, lo=1, hi=heads))
    if heads > 1:
        head = c.slider("ALiBi head shown", 1, heads, key=head_key)
    else:
        head = 1
        c.caption("One head: its slope is 2⁻⁸.")
    columns = st.columns(2)
    for index, family in enumerate(POSITION_FAMILIES):
        setting = FamilySetting(family, compare_n, d_model, seed, base, heads, head - 1)
        with columns[index % 2]:
            try:
                spread = family_spread(setting)
            except AttentionInputError as error:
                st.error(str(error))
                continue
            show(family_figure, setting, filename=f"same-content-{family}")
            st.metric(f"{FAMILY_TITLES[family]}: largest spread along a diagonal", f"{spread:.1e}")
    st.caption(
        "Sinusoidal and learned: (c + P[m])·(c + P[n]) contains c·P[n], which depends on where "
        "the key is, not only on n − m. Rotary: rotating q by m·θ and k by n·θ leaves an angle "
        "(m − n)·θ between them. ALiBi: c·c plus m_h·(n − m), with the later keys masked (−∞) "
        "as in a causal model. NoPE: c·c for every key a query may see, nothing past it. All "
        "scores are divided by √d_model."
    )
    learned_tab, rope_tab, alibi_tab, nope_tab = st.tabs(
        [
            ":material/grid_on: Learned",
            ":material/rotate_right: Rotary (RoPE)",
            ":material/trending_down: ALiBi",
            ":material/block: None (NoPE)",
        ]
    )
    with learned_tab:
        st.markdown(
            "BERT and GPT-2 keep a table with one trainable row per position. Here it is random "
            f"(N(0, ½), the sinusoids' size), {n} × {d_model} like the table above. Trained tables "
            "look much smoother: neighbouring rows become similar, and GPT-2's even show "
            "wave-like patterns. Nothing links row p to row p + k, and there is no row past "
            "the last one."
        )
        show(learned_figure, n, d_model, seed, filename=f"learned-pe-{n}x{d_model}")
    with rope_tab:
        st.markdown(
            "RoPE (Llama, Mistral, GPT-NeoX) rotates q and k instead of adding anything: each pair "
            "of dimensions turns by p·θᵢ. The score rot(q, m)·rot(k, n) depends on m − n only. "
            "Below, the score at each offset for identical content, over every pair of positions."
        )
        st.latex(r"\mathrm{rot}(q, m)^\top \mathrm{rot}(k, n) = q^\top R_{(n-m)\theta}\, k")
        show(rope_profile_figure, compare_n, d_model, seed, base, filename="rope-score-by-offset")
    with alibi_tab:
        st.markdown(
            "ALiBi (BLOOM, MPT) adds nothing to the tokens: each head adds m_h·(j − i) to the "
            "score of query i and key j ≤ i, a penalty growing with distance, steep for the first "
            "heads and gentle for the last. For 2ⁿ heads the slopes are 2^(−8/n), 2^(−16/n), …"
        )
        small_screens.table(
            slopes_frame(heads),
            hide_index=True,
            column_config={"slope m": st.column_config.NumberColumn(format="%.8g")},
        )
        show(alibi_grid, heads, compare_n, filename=f"alibi-bias-{heads}-heads")
    with nope_tab:
        st.markdown(
            "A decoder can leave positions out of some layers altogether: SmolLM3 rotates q and k "
            "in three layers of every four and in the fourth does nothing (NoPE). With the same "
            "content everywhere its scores are one number, yet the causal mask still tells "
            "query m that it sees m + 1 keys, so a softmax average over them changes with m: "
            "order leaks in through the mask. A NoPE layer matches a word however far back it "
            "is, with no rotation to wear the match down over distance; the RoPE layers around "
            "it keep the sense of nearness."
        )
    # Nested: the training length reruns only its own section; the ALiBi head reruns both.
    extrapolation.beyond_training_length(view, d_model, seed, base, heads, head)
    write_url_after_fragment(view)
