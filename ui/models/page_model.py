"""Which model a real-model page runs: the shipped one (SmolLM2, MiniLM) or one the server lists
(ui.models.chosen), chosen in the sidebar and carried by ``?model=``.

    choose_decoder(view)                      the sidebar's choice bound to ``?model=`` (its
                                              key), and the model it names, loaded (the
                                              shipped one's host, or the listed one's)
    load_encoder(encoder_key(view))           the same for an encoder
    decoder_or_stop(view, loaded), encoder_or_stop(view, loaded)
                                              the model; without one (or of a family the page
                                              does not run), the page ends saying why
    layer_head_keys(view, loaded)             ``?layer=`` and ``?head=`` bound to its shape
    show_model_line(loaded, model)            the caption under the title: which model, where
                                              from (naming no server path), its architecture

Every load result, shipped or listed, names its model (``loaded.name``).
"""

from __future__ import annotations

import streamlit as st

from attention_core.models import BertModel, GPT2Model
from attention_core.models.decoder import DecoderModel
from attention_core.models.families import family_of_model
from ui.models import chosen, minilm, smollm
from ui.widgets.layout import plain
from ui.widgets.state import PageState

SHIPPED_DECODER, SHIPPED_ENCODER = "smollm2", "minilm"


def decoder_key(view: PageState, also: tuple[str, ...] = ()) -> str:
    """The widget key of the page's decoder, bound to ``?model=`` (``also``: more names the
    link may carry, such as the heads page's "minilm" for its probes)."""
    return chosen.bind(view, "decoder", SHIPPED_DECODER, also)


def decoder_labels(shipped: dict[str, str]) -> dict[str, str]:
    """A radio's labels for the page's decoders: the ``shipped`` ones (name -> label), then each
    listed decoder by its name."""
    listed = chosen.options("decoder", SHIPPED_DECODER)
    return {**shipped, **{name: name for name in listed if name not in shipped}}


def encoder_key(view: PageState) -> str:
    return chosen.bind(view, "encoder", SHIPPED_ENCODER)


def choose_decoder(view: PageState) -> tuple[str, smollm.LoadResult | chosen.ChosenLoad]:
    """The widget key of the sidebar's decoder choice, bound to ``?model=``, and the decoder it
    names, loaded: a name of ``chosen.listed()``, or the shipped SmolLM2 for any other."""
    key = decoder_key(view)
    name = chosen.selector("decoder", key, SHIPPED_DECODER, smollm.MODEL_NAME)
    return key, named_decoder(name)


def load_encoder(key: str) -> minilm.LoadResult | chosen.ChosenLoad:
    name = chosen.selector("encoder", key, SHIPPED_ENCODER, minilm.MODEL_NAME)
    if name not in chosen.listed():
        return minilm.load_model()
    return chosen.load(name)


def decoder_shape(loaded: object) -> tuple[int, int]:
    """The loaded decoder's layers and query heads; SmolLM2's (30, 9) without one, so that a
    link's layer and head stay bound while the page says what is wrong."""
    model = getattr(loaded, "model", None)
    if not isinstance(model, DecoderModel):
        return 30, 9
    return model.config.num_hidden_layers, model.config.num_attention_heads


def layer_head_keys(
    view: PageState, loaded: object, layer: int = 1, head: int = 1
) -> tuple[str, str]:
    """The widget keys of a layer and a head (from 1), bound to ``?layer=`` and ``?head=``
    within the loaded decoder's shape; the defaults ``layer`` and ``head`` where it has them."""
    num_layers, num_heads = decoder_shape(loaded)
    return (
        view.int_key("layer", min(layer, num_layers), lo=1, hi=num_layers),
        view.int_key("head", min(head, num_heads), lo=1, hi=num_heads),
    )


def final_norm_kind(loaded: object) -> str:
    """The loaded decoder's final norm, "RMSNorm" (Llama, Qwen2; SmolLM2's without one) or
    "LayerNorm" (GPT-2)."""
    model = getattr(loaded, "model", None)
    return model.final_norm.kind if isinstance(model, DecoderModel) else "RMSNorm"


def named_decoder(name: str) -> smollm.LoadResult | chosen.ChosenLoad:
    """The decoder ``name`` names: a listed one, or the shipped SmolLM2 for any other name (a
    fragment passes the name, not the model: a session keeps a fragment's arguments)."""
    return chosen.load(name) if name in chosen.listed() else smollm.load_decoder()


def decoder_or_stop(view: PageState, loaded: object) -> DecoderModel:
    if isinstance(loaded, chosen.ChosenLoad):
        runs = "decoder pages run Llama, Qwen2 and GPT-2 decoders"
        return _listed_or_stop(view, loaded, DecoderModel, runs)
    return smollm.model_or_stop(view, loaded)


def encoder_or_stop(view: PageState, loaded: object) -> BertModel:
    if isinstance(loaded, chosen.ChosenLoad):
        return _listed_or_stop(view, loaded, BertModel, "encoder pages run BERT encoders")
    return minilm.model_or_stop(view, loaded)


def _listed_or_stop(view: PageState, loaded: chosen.ChosenLoad, kind: type, runs: str):
    model = loaded.model
    if model is None:
        st.error(loaded.error, icon=":material/cloud_off:")
    elif not isinstance(model, kind):
        family = family_of_model(model)
        st.error(
            f"{family.name} is a {family.kind}, and this page's {runs}: choose another model "
            "in the sidebar.",
            icon=":material/block:",
        )
    else:
        return model
    st.button("Try loading it again", icon=":material/refresh:", on_click=chosen.forget)
    view.sync_url()
    st.stop()


def architecture(model: object) -> str:
    """The numbers a reader needs of a model: layers, heads, widths."""
    config = model.config
    if isinstance(model, BertModel):
        return (
            f"{config.num_hidden_layers} layers, {config.num_attention_heads} heads, d_model "
            f"{config.hidden_size}, d_head {config.head_dim}, at most "
            f"{config.max_position_embeddings} tokens"
        )
    if isinstance(model, GPT2Model):
        return (
            f"{config.num_hidden_layers} layers, {config.num_attention_heads} heads each with "
            f"its own keys and values, d_head {config.head_dim}, {config.n_positions} learned "
            "positions"
        )
    return (
        f"{config.num_hidden_layers} layers, {config.num_attention_heads} query heads sharing "
        f"{config.num_key_value_heads} KV heads, d_head {config.head_dim}, RoPE base "
        f"{config.rope_theta:g}"
    )


def show_model_line(loaded: object, model: object, more: str = "") -> None:
    """The caption under the title: which model (a listed one's family, parameters, weights and
    origin; the shipped one's name and where it was found), its ``architecture`` and ``more``
    (a sentence the page adds for its shipped model)."""
    if isinstance(loaded, chosen.ChosenLoad):
        name, origin = plain(loaded.name), plain(loaded.origin)
    else:
        name, origin = loaded.name, plain(loaded.source)
    line = chosen.model_line(model, name, origin)
    st.caption(f"{line}{more}: {architecture(model)}.")
