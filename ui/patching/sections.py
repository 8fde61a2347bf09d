"""The patching page's sections: the pair's numbers and the residual map, the attention and MLP
maps, the head maps, and the chosen head's attention on both prompts.

Fragments live here, not in the page: a session keeps its fragments until its next full run,
and a function defined in the page would keep the page's globals (the model) alive that long
after the model has been let go. So each takes only small values (the pair, widget keys) and
finds the model and the passes in their caches.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_core.models.decoder import DecoderModel
from attention_core.models.patching import restored
from ui.models import page_model
from ui.patching import data, figures, questions, tables
from ui.patching.inputs import shown
from ui.widgets import render, small_screens
from ui.widgets.byte_cache import digest_of
from ui.widgets.layout import labelled_radio
from ui.widgets.state import PageState, write_url_after_fragment

# Layer 24, head 4 restores the most of the default pair (from 1, as the page counts).
DEFAULT_LAYER, DEFAULT_HEAD = 24, 4
BLOCK_KINDS = {"attn_out": data.KINDS["attn_out"], "mlp_out": data.KINDS["mlp_out"]}


def _names(found: data.PairRuns, model: DecoderModel) -> tuple[str, str]:
    runs = found.runs
    return shown(model.token_text(runs.answer)), shown(model.token_text(runs.wrong))


def pair_and_residual(view: PageState, model: DecoderModel, pair: data.Pair) -> np.ndarray:
    """The pair's LDs and probabilities, then the residual map; returns its restored shares
    `(L + 1, n)`."""
    found = data.pair_runs(model, pair)
    runs = found.runs
    answer, wrong = _names(found, model)
    small_screens.table(
        tables.pair_table(runs, answer, wrong), hide_index=True, key="patching.pair"
    )
    st.markdown(tables.pair_sentence(runs, answer, wrong))

    st.header(":material/stacked_line_chart: Where the answer sits: the residual stream")
    st.markdown(
        "Each cell is one run of the corrupted prompt with the residual stream at one layer "
        "boundary and one token replaced by the clean run's. Tokens before the first one where "
        "the prompts differ hold the same vector in both runs, so patching them restores 0."
    )
    shares = restored(data.stream_map(model, pair, "resid"), runs)
    rows = figures.row_labels("resid", shares.shape[0])
    columns = figures.position_labels(found.clean_tokens, found.corrupt_tokens)
    drawn = render.digested(digest_of(found.digest, "resid"), shares)
    title = "Residual stream: share restored"
    render.show(render.cached(figures.stream_figure, drawn, rows, columns, title),
                filename="patching-residual", key="patching.resid")  # fmt: skip
    st.caption(tables.carriers(shares, rows, columns))
    return shares


@st.fragment
def blocks(view: PageState, pair: data.Pair, keys: dict[str, str]) -> None:
    """The attention or the MLP map, when asked for (a few seconds more of passes)."""
    st.header(":material/call_merge: Who writes it: attention and MLP outputs")
    if not st.toggle("Patch each layer's attention and MLP outputs too", key=keys["blocks"]):
        st.caption("Off: these maps take as many passes again as the residual map.")
        write_url_after_fragment(view)
        return
    model = page_model.named_decoder(st.session_state[keys["model"]]).model
    found = data.pair_runs(model, pair)
    kind = labelled_radio("Patch", BLOCK_KINDS, keys["kind"])
    shares = restored(data.stream_map(model, pair, kind), found.runs)
    rows = figures.row_labels(kind, shares.shape[0])
    columns = figures.position_labels(found.clean_tokens, found.corrupt_tokens)
    drawn = render.digested(digest_of(found.digest, kind), shares)
    title = f"{BLOCK_KINDS[kind].capitalize()}: share restored"
    render.show(render.cached(figures.stream_figure, drawn, rows, columns, title),
                filename=f"patching-{kind}", key="patching.block_map")  # fmt: skip
    st.caption(tables.carriers(shares, rows, columns))
    write_url_after_fragment(view)


def heads(view: PageState, pair: data.Pair, keys: dict[str, str]) -> None:
    """Both head maps, the top heads, then the chosen head's attention."""
    model = page_model.named_decoder(st.session_state[keys["model"]]).model
    found = data.pair_runs(model, pair)
    every = restored(data.head_map(model, pair, False), found.runs)
    last = restored(data.head_map(model, pair, True), found.runs)
    places = (("every", every, "every position"), ("last", last, "the last position only"))
    for column, (name, shares, where) in zip(st.columns(2), places, strict=True):
        drawn = render.digested(digest_of(found.digest, "heads", name), shares)
        figure = render.cached(figures.head_figure, drawn, f"Heads patched at {where}")
        with column:
            render.show(figure, filename=f"patching-heads-{name}", key=f"patching.heads_{name}")
    st.caption(tables.heads_sentence(every, last))
    small_screens.table(tables.top_heads(every, last), hide_index=True, key="patching.top_heads")
    chosen_head(view, pair, keys)


@st.fragment
def chosen_head(view: PageState, pair: data.Pair, keys: dict[str, str]) -> None:
    """One head's share and its attention on both prompts."""
    model = page_model.named_decoder(st.session_state[keys["model"]]).model
    found = data.pair_runs(model, pair)
    runs = found.runs
    layer_col, head_col = st.columns(2)
    layer = layer_col.slider("Layer", 1, runs.num_layers, key=keys["layer"])
    head = head_col.slider("Head", 1, runs.num_heads, key=keys["head"])
    every = restored(data.head_map(model, pair, False), runs)[layer - 1, head - 1]
    last = restored(data.head_map(model, pair, True), runs)[layer - 1, head - 1]
    st.markdown(f"**Layer {layer}, head {head}** restores {every:.1%} patched at every "
                f"position, {last:.1%} at the last position only. Where it looks:")  # fmt: skip
    weights = np.stack([runs.clean_weights[layer - 1, head - 1],
                        runs.corrupt_weights[layer - 1, head - 1]])  # fmt: skip
    tokens = (found.clean_tokens, found.corrupt_tokens)
    for column, name, pattern, prompt in zip(st.columns(2), ("clean", "corrupted"), weights,
                                             tokens, strict=True):  # fmt: skip
        labels = [f"{i + 1} {shown(t)}" for i, t in enumerate(prompt)]
        drawn = render.digested(digest_of(found.digest, layer, head, name), pattern)
        title = f"Layer {layer}, head {head} on the {name} prompt"
        with column:
            render.show(render.cached(figures.head_attention_figure, drawn, labels, title),
                        filename=f"patching-L{layer}H{head}-{name}",
                        key=f"patching.head_{name}")  # fmt: skip
    st.caption(tables.looked_at(weights, tokens))
    write_url_after_fragment(view)


def ask(view: PageState, shares: np.ndarray) -> None:
    questions.ask_questions(view, shares[:, -1])
