"""Which model the "why a head attends there" page reads: a decoder (the shipped SmolLM2 or a
listed one), MiniLM, or a model trained on the learning page (``?model=learning&run=<code>``,
the code of its settings, ``ui.models.toy.run_code``), and what the page needs to know of it.

    subject(view, kind)        the chosen model loaded (a training waited for, with a progress
                               bar), or the page stopped saying why there is none
    Subject.tokens(text)       the ids it reads and each token's text (the learning model reads
                               its held-out example, not the text)
    Subject.reading(...)       one head read for one query (``ui.attends.data``)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.presets import MAX_EXAMPLE_TOKENS
from attention_core.models.score_reading import HeadReading
from attention_core.models.score_sources import head_name, unsplittable
from attention_core.training.formation import PREVIOUS_TOKEN_HEAD
from ui.attends import data, inputs
from ui.models import head_link, minilm, page_model, toy
from ui.widgets.state import PageState

LEARNING = "learning"


@dataclass(frozen=True, eq=False)
class Subject:
    """kind ("minilm", LEARNING or a decoder's name), loaded (its load result; the finished
    TrainingRun for LEARNING), model (None for LEARNING), norm (what the split holds: "RMSNorm",
    "LayerNorm", "post-LN" or "none"), shape (layers, heads)."""

    kind: str
    loaded: object
    model: object
    norm: str
    shape: tuple[int, int]

    @property
    def identity(self) -> str:
        """What names the model in a figure's key: its kind, or the run it is."""
        return self.loaded.key if self.kind == LEARNING else self.kind

    def tokens(self, text: str) -> tuple[tuple[int, ...], tuple[str, ...], str]:
        if self.kind == LEARNING:
            ids = tuple(int(i) for i in toy.example_tokens(self.loaded.settings))
            return ids, tuple(toy.token_labels(ids)), ""
        return inputs.prompt_tokens(self.model, text)

    def reading(self, ids: tuple[int, ...], layer: int, head: int, query: int) -> HeadReading:
        if self.kind == LEARNING:
            return data.learning_reading(self.loaded, layer, head, query)
        return data.reading(self.kind, ids, layer, head, query)

    def editor_link(self, text: str, layer: int, head: int) -> None:
        """The link that opens head (`layer`, `head`), from 0, in the step-by-step editor."""
        if self.kind == "minilm":
            head_link.send_link(self.model, text, layer, head)
            return
        if self.kind == LEARNING:
            params = head_link.learning_params(toy.run_code(self.loaded.settings), layer, head)
        else:
            params = head_link.decoder_params(self.kind, text, layer, head)
        st.page_link(
            head_link.EDITOR_PAGE,
            label=f"Edit layer {layer + 1}, head {head + 1} in the step-by-step page",
            icon=":material/edit_note:",
            query_params=params,
            help="Its real Q, K and V rows go into the editable tables (the first "
            f"{MAX_EXAMPLE_TOKENS} tokens): change one number of a key and see what moves.",
        )

    def previous_heads(self) -> tuple[str, ...]:
        if self.kind == LEARNING:
            found = np.argwhere(self.loaded.final.evaluation.previous > PREVIOUS_TOKEN_HEAD)
            return tuple(head_name(int(layer), int(head)) for layer, head in found)
        return data.previous_heads(self.kind)


def subject(view: PageState, kind: str) -> Subject:
    """The model ``kind`` names, ready; the page stops with the reason when there is none."""
    if kind == LEARNING:
        run = _trained(view)
        config = run.settings.config
        return Subject(kind, run, None, "none", (config.n_layers, config.n_heads))
    if kind == "minilm":
        loaded = minilm.load_model()
        model = page_model.encoder_or_stop(view, loaded)
        norm = "post-LN"
    else:
        loaded = page_model.named_decoder(kind)
        model = page_model.decoder_or_stop(view, loaded)
        norm = page_model.final_norm_kind(loaded)
        if why := unsplittable(model):
            page_model.show_model_line(loaded, model)
            st.info(why, icon=":material/call_split:")
            view.sync_url()
            st.stop()
    page_model.show_model_line(loaded, model)
    return Subject(kind, loaded, model, norm, inputs.shape(model))


def _trained(view: PageState) -> toy.TrainingRun:
    code = view.value("run")
    try:
        settings = toy.settings_of(code) if code else None
        if settings is None:
            raise AttentionInputError(
                "The learning page's model comes with a link from that page (`run=`), which "
                "this one does not carry: open a trained head there and follow its link here."
            )
        bar = st.empty()
        run = toy.wait_for(settings, lambda done, text: bar.progress(done, text=text))
        bar.empty()
        if run.error:
            raise AttentionInputError(run.error)
    except AttentionInputError as error:
        st.error(str(error), icon=":material/error:")
        view.sync_url()
        st.stop()
    st.caption(
        f"The learning page's model ({settings.n_layers} layers × {settings.n_heads} heads, "
        f"d_model {settings.d_model}, seed {settings.seed}), trained {run.final.step:,} steps, "
        "on its held-out example: a segment of token ids and its copy. Its heads are counted "
        "from 1 here; the learning page counts them from 0."
    )
    return run
