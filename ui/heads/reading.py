"""The heads page's first sections: when the answer appears (the logit lens), who writes it
(direct logit attribution), and where a chosen head looks.

Fragments live here, not in the page: a session keeps its fragments until its next full run
(a closed tab's, until the session expires), and a function defined in the page would keep the
page's globals (the model, its arrays) alive that long after the model has been let go. So each
takes only small values and finds the model and the prompt's pass in their caches.
"""

from __future__ import annotations

import streamlit as st

from attention_core import AttentionInputError
from ui.heads import data, figures, inputs, tables
from ui.models import page_model
from ui.widgets import render, small_screens
from ui.widgets.byte_cache import digest_of
from ui.widgets.state import PageState, write_url_after_fragment


@st.fragment
def section(
    view: PageState, decoder: str, ids: tuple[int, ...], at: int, keys: dict[str, str]
) -> None:
    """The logit lens and the attribution of the token at `at` + 1, read at position `at`, by
    the decoder named `decoder` (``page_model.named_decoder``)."""
    model = page_model.named_decoder(decoder).model
    readout = data.prompt_readout(model, ids, at)
    best = int(readout.next_logits.argmax())
    st.header(":material/visibility: When does the answer appear? The logit lens")
    left, right = st.columns(2)
    typed = left.text_input(
        "Token to follow (empty: the likeliest next token)", key=keys["token"],
        help="A word after a space starts with one: “ Paris”, not “Paris”.",
    )  # fmt: skip
    other = right.text_input("…minus this token (optional: a logit difference)", key=keys["vs"])
    try:
        token = (
            inputs.chosen_token(model, typed, "token")
            if typed
            else inputs.ChosenToken(best, model.token_text(best))
        )
        versus = inputs.chosen_token(model, other, "second token") if other else None
    except AttentionInputError as error:
        st.error(str(error), icon=":material/edit_off:")
        write_url_after_fragment(view)
        return
    for note in (token.note, versus.note if versus else ""):
        if note:
            st.info(note, icon=":material/call_split:")
    names = tuple(f"“{figures.token_label(t.text)}”" for t in (token, versus) if t)
    vs_id = versus.id if versus else None
    drawn = render.digested(readout.digest, readout)  # the readout, keyed by its digest
    render.show(render.cached(figures.lens_figure, drawn, token.id, vs_id, names),
                filename="heads-logit-lens", key="heads.lens")  # fmt: skip
    small_screens.table(tables.lens_table(readout, token.id, model), hide_index=True,
                 key="heads.lens_table", height=280)  # fmt: skip
    st.caption(tables.lens_sentence(readout.lens, token.id, names[0]))

    st.header(":material/group_work: Who writes it? Direct logit attribution")
    split = data.attribution(model, readout, token.id, vs_id)
    what = f"logit({names[0]})" + (f" − logit({names[1]})" if versus else "")
    split_drawn = render.digested(digest_of(readout.digest, token.id, vs_id), split)
    render.show(render.cached(figures.attribution_figure, split_drawn,
                              f"Each writer's share of {what}"),
                filename="heads-attribution", key="heads.attribution")  # fmt: skip
    st.caption(tables.attribution_sentence(split, what, model.final_norm.kind))
    if note := tables.family_sentence(model.config):
        st.caption(note)
    small_screens.table(tables.top_writers(split), hide_index=True, key="heads.top_writers")
    chosen_head(view, decoder, ids, at, (token.id, vs_id), keys)
    write_url_after_fragment(view)


@st.fragment
def chosen_head(
    view: PageState, decoder: str, ids: tuple[int, ...], at: int,
    tokens: tuple[int, int | None], keys: dict[str, str],
) -> None:  # fmt: skip
    """One head's share of the logit and its attention pattern over the prompt."""
    model = page_model.named_decoder(decoder).model
    readout = data.prompt_readout(model, ids, at)
    split = data.attribution(model, readout, *tokens)
    layer_col, head_col = st.columns(2)
    config = model.config
    layer = layer_col.slider("Layer", 1, config.num_hidden_layers, key=keys["layer"])
    head = head_col.slider("Head", 1, config.num_attention_heads, key=keys["head"])
    st.markdown(f"**Layer {layer}, head {head}** adds {split.heads[layer - 1, head - 1]:+.3f} to "
                "the logit. Where it looks, from every token of the prompt:")  # fmt: skip
    drawn = render.digested(readout.digest, readout)
    render.show(render.cached(figures.head_pattern_figure, drawn, layer - 1, head - 1),
                filename=f"heads-L{layer}H{head}", key="heads.pattern")  # fmt: skip
    write_url_after_fragment(view)
