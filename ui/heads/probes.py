"""The heads page's probe section: every head's roles on a repeated random sequence, the
strongest heads named, the top induction head's stripe, MiniLM's [CLS], [SEP] and punctuation
heads on the prompt, and the causal check (the top induction heads removed)."""

from __future__ import annotations

import string

import numpy as np
import streamlit as st

from attention_core.head_roles import strongest_heads, token_share
from ui.heads import data, figures, inputs, tables
from ui.models import minilm
from ui.widgets import heatmaps, render, small_screens
from ui.widgets.layout import plain
from ui.widgets.state import PageState, write_url_after_fragment


@st.fragment
def section(view: PageState, kind: str, seed_key: str, length_key: str, text: str) -> None:
    seed_col, length_col = st.columns(2)
    seed = seed_col.number_input("Seed of the random tokens", 0, inputs.MAX_SEED, key=seed_key)
    length = length_col.slider("Tokens before the repeat (L)", *inputs.PROBE_LENGTHS,
                               key=length_key)  # fmt: skip
    if kind == "minilm" and minilm.load_model().model is None:
        st.error(minilm.load_model().error, icon=":material/cloud_off:")
        write_url_after_fragment(view)
        return
    if kind != "minilm" and 2 * length > (positions := data.model_of(kind).context_limit):
        length = positions // 2
        st.info(f"The model reads at most {positions} positions, so the probe is cut to L = "
                f"{length}: its tokens twice.", icon=":material/content_cut:")  # fmt: skip
    probe = data.probe_roles(kind, int(seed), int(length))
    drawn = render.digested(probe.digest, probe)  # the probe's roles, keyed by their digest
    render.show(render.cached(figures.roles_figure, drawn),
                filename=f"heads-roles-{figures.file_part(kind)}", key="heads.roles")  # fmt: skip
    small_screens.table(tables.strongest_roles(probe.roles), hide_index=True, key="heads.strongest")
    shown = " ".join(f"`{plain(figures.token_label(t))}`" for t in probe.tokens)
    st.markdown(f"The probe ({len(probe.tokens)} tokens, seed {seed}): {shown}")
    layer, head, score = strongest_heads(probe.roles.induction, 1)[0]
    st.markdown(f"The strongest induction head, layer {layer + 1} head {head + 1} "
                f"(score {score:.3f}), on the probe:")  # fmt: skip
    render.show(
        render.cached(figures.probe_head_figure, drawn, kind, layer, head),
        filename=f"heads-probe-L{layer + 1}H{head + 1}", key="heads.probe_head",
    )  # fmt: skip
    if kind == "minilm":
        special_heads(text)
    else:
        causal_check(view, kind, int(seed), int(length))
    write_url_after_fragment(view)


PUNCTUATION = set(string.punctuation)


def special_heads(text: str) -> None:
    """Clark et al. (2019): many of BERT's heads park their weight on [CLS], [SEP] or
    punctuation. The share of each head's weight there, on the prompt."""
    model = minilm.load_model().model
    trace = minilm.page_trace(model, text)
    tokens = trace.tokens
    places = {
        "[CLS]": [i for i, t in enumerate(tokens) if t == "[CLS]"],
        "[SEP]": [i for i, t in enumerate(tokens) if t == "[SEP]"],
        "punctuation": [i for i, t in enumerate(tokens) if t and set(t) <= PUNCTUATION],
    }
    st.markdown("On your prompt, the share of each MiniLM head's weight on special tokens "
                "(Clark et al. 2019):")  # fmt: skip
    shares = np.stack([token_share(trace.weights, at) for at in places.values()])
    layers, heads = shares.shape[1:]
    figure = heatmaps.heatmap_grid(
        shares, titles=list(places), row_labels=[f"layer {i + 1}" for i in range(layers)],
        col_labels=[f"h{h + 1}" for h in range(heads)], columns=3, row_title="layer",
        col_title="head",
    )  # fmt: skip
    render.show(figure, filename="heads-minilm-special", key="heads.special")
    if not places["punctuation"]:
        st.caption("This prompt has no punctuation: that map is all 0. Add a comma or a full stop.")


def causal_check(view: PageState, kind: str, seed: int, length: int) -> None:
    check = st.expander("Causal check: remove the induction heads", icon=":material/content_cut:",
                        key=view.bool_key("check", False), on_change="rerun")  # fmt: skip
    if not check.open:
        return
    with check:
        st.markdown(
            "Scores say where heads look; removing them says what they do. The loss of "
            "predicting the repeated half (after its first token), with the top-k induction "
            f"heads' outputs set to 0, against k heads drawn at random (seed {seed})."
        )
        with st.spinner("Running the probe again with heads removed…"):
            found = data.causal_check(kind, seed, length)
        render.show(render.cached(figures.causal_figure, render.digested(found.digest, found)),
                    filename="heads-causal-check", key="heads.causal")  # fmt: skip
        k = len(found.heads)
        st.caption(
            f"With every head: {found.ablated[0]:.3f} nats. Without the top {k} induction heads: "
            f"{found.ablated[-1]:.3f}; without {k} random heads: {found.random[-1]:.3f}."
        )
