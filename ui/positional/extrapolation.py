"""Beyond the training length: each family's same-content scores past the length L it was
trained on (the trained square outlined), and the share of sinusoid angles never seen in
training, position by position.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.position_experiments import POSITION_FAMILIES
from ui.positional.data import FamilySetting, family_spread, unseen_share
from ui.positional.figures import family_figure, show
from ui.widgets import lines, theme
from ui.widgets.state import PageState, write_url_after_fragment

# Near-black: the training edge stays visible over both ends of the diverging scale.
TRAINING_EDGE_COLOR = "#111111"


def trained_family_figure(setting: FamilySetting, train_length: int) -> go.Figure:
    """Same-content scores of one family, the square of positions seen in training outlined."""
    fig = family_figure(setting, height=380)
    _mark_training_length(fig, train_length, setting.num_positions)
    return fig


def _mark_training_length(fig: go.Figure, train_length: int, total: int) -> None:
    """Outline the square of positions seen in training (0 .. L-1) on a position heatmap."""
    edge = train_length - 0.5
    fig.add_shape(
        type="rect",
        x0=-0.5,
        y0=-0.5,
        x1=edge,
        y1=edge,
        line={"color": TRAINING_EDGE_COLOR, "width": 3, "dash": "dash"},
    )
    if total > train_length:
        fig.add_annotation(
            x=edge,
            y=edge,
            text="trained up to here",
            showarrow=True,
            arrowhead=2,
            ax=40,
            ay=30,
            font={"size": theme.font_size()},
        )


def unseen_figure(train_length: int, num_positions: int, d_model: int, base: float) -> go.Figure:
    """The share of (sin, cos) pairs at an angle training never reached, position by position."""
    share = unseen_share(train_length, num_positions, d_model, base)
    fig = lines.line_plot(
        np.arange(share.size),
        {"sinusoidal at position p  =  RoPE at offset p": 100 * share},
        x_title="position p (sinusoidal) or offset p (RoPE)",
        y_title="% of (sin, cos) pairs at a new angle",
        title="Angles never seen in training",
    )
    fig.add_vline(
        x=train_length - 1,
        line={"dash": "dash", "color": TRAINING_EDGE_COLOR},
        annotation_text=f"training length {train_length}",
    )
    return fig


@st.fragment
def beyond_training_length(
    view: PageState, d_model: int, seed: int, base: float, heads: int, head: int
) -> None:
    st.header("Beyond the training length", divider="gray")
    st.markdown(
        "A model trained on sequences of length L meets longer inputs. The dashed square marks "
        "the positions it was trained on."
    )
    train = st.slider("Training length L", 4, 256, key=view.int_key("train", 32, lo=4, hi=256))
    columns = st.columns(2)
    for index, family in enumerate(POSITION_FAMILIES):
        length = train if family == "learned" else 2 * train
        setting = FamilySetting(family, length, d_model, seed, base, heads, head - 1)
        with columns[index % 2]:
            try:
                family_spread(setting)
            except AttentionInputError as error:
                st.error(str(error))
                continue
            show(trained_family_figure, setting, train, filename=f"extrapolation-{family}")
            if family == "learned":
                st.caption(
                    f"The table has {train} rows: position {train} has no vector at all, so the "
                    "model cannot even be run on a longer input."
                )
    share = unseen_share(train, 8 * train, d_model, base)
    show(unseen_figure, train, 8 * train, d_model, base, filename="unseen-angles")
    st.markdown(
        f"Sinusoidal and rotary encodings are defined everywhere, but the slow pairs, whose "
        f"wavelength exceeds L, never complete a turn in training. Past L they reach angles the "
        f"model has never seen: {100 * share[-1]:.0f}% of the pairs at position {8 * train - 1}. "
        "That is why RoPE models are stretched with position interpolation or a larger base "
        "before long inputs. ALiBi only adds a straight line: far keys get ever larger penalties "
        "and fade out, so it degrades gently (its paper trains on 1024 tokens and tests on 2048)."
    )
    write_url_after_fragment(view)
