"""A real head in the step-by-step editor: the real-model page's link, and the head's arrival.

The link stays short and reproducible, `/scaled-dot-product?source=bert&text=…&layer=4&head=2`
(layer and head count from 1, as on the real-model page): the step-by-step page runs the model
on the text again (the model is loaded once per process and the trace cached per text, shared
with the real-model page) and puts that head's q, k, v rows `(tokens, d_head = 32)` into its
editors, token labels included. With the dot product divided by √32 its weights are then the
model's own. Edited numbers stay out of the link (3 × 16 × 32 numbers are too many for one); the
page's JSON download keeps them.

    send_link(model, text, layer, head)   the real-model page's link (layer and head from 0)
    decoder_params(name, text, layer, head)  a decoder head's link (`source=smollm2`, or a
                                          listed decoder's name), its q and k after RoPE
    bring_head(view, hand)                the step-by-step page, before its size sliders: load
                                          the head a link asks for, or say why not
    head_example(model, text, layer, head)  the head as an `Example`, and the text it read
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.presets import MAX_EXAMPLE_TOKENS, Example
from attention_core.models import BertModel, GPT2Model
from attention_core.models.decoder import DecoderModel
from attention_core.models.forward import run_decoder
from server.kept_process import run_where_idle
from ui.models import minilm, page_model, toy
from ui.pages import PAGES
from ui.widgets import layout
from ui.widgets.hand_made import HandMadeExample
from ui.widgets.state import PageState

SOURCE = "bert"
# A head of a model trained on the learning page: `?source=learning&run=<settings>&layer=1&head=2`
# (layer and head from 0, as that page names them).
LEARNING = "learning"
PARAMS = ("source", "text", "layer", "head", "run")
EDITOR_PAGE = next(page.path for page in PAGES if page.url_path == "scaled-dot-product")
# The settings under which the step-by-step page computes what the model computes.
MODEL_SETTINGS = {"scoring": "dot_product", "scaling": True, "causal": False, "tau": 1.0}
LEARNING_SETTINGS = {**MODEL_SETTINGS, "causal": True}
# (request, Example, (text read, note)) of the head on screen.
_LOADED = "scaled_dot_product.model_head"


def editor_params(text: str, layer: int, head: int) -> dict[str, str]:
    """The step-by-step page's query parameters for head (`layer`, `head`), from 0."""
    return {"source": SOURCE, "text": text, "layer": str(layer + 1), "head": str(head + 1)}


def learning_params(run: str, layer: int, head: int) -> dict[str, str]:
    """The step-by-step page's query parameters for head (`layer`, `head`), from 0, of the
    learning page's run `run` (`toy.run_code`)."""
    return {"source": LEARNING, "run": run, "layer": str(layer), "head": str(head)}


def decoder_params(name: str, text: str, layer: int, head: int) -> dict[str, str]:
    """The step-by-step page's query parameters for head (`layer`, `head`), from 0, of the
    decoder `name` (the shipped "smollm2" or a listed one) on `text`."""
    return {"source": name, "text": text, "layer": str(layer + 1), "head": str(head + 1)}


def decoder_example(model: DecoderModel, text: str, layer: int, head: int) -> Example:
    """Head (`layer`, `head`), from 0, of decoder `model` on the first MAX_EXAMPLE_TOKENS tokens
    of `text`: its q and k after the rotation (RoPE) and its v, as the model computed them (a
    query head reads its KV head), labelled with the tokens."""
    ids = np.asarray(model.prompt(text, max_tokens=MAX_EXAMPLE_TOKENS).input_ids)
    rotated = not isinstance(model, GPT2Model)
    keep = ("q_rot", "k_rot", "v") if rotated else ("q", "k", "v")
    trace = run_where_idle(run_decoder, model, ids, keep=keep)
    steps = trace.layers[layer]
    q, k = (steps.q_rot, steps.k_rot) if rotated else (steps.q, steps.k)
    kv_head = head * k.shape[0] // q.shape[0]  # GQA: a group of query heads reads one KV head
    labels = [model.token_text(int(i)) for i in ids]
    return Example(
        q=q[head], k=k[kv_head], v=steps.v[kv_head], query_labels=labels, key_labels=labels,
        title=f"of layer {layer + 1}, head {head + 1}",
    )  # fmt: skip


def send_link(model: BertModel, text: str, layer: int, head: int) -> None:
    """The real-model page's link that opens head (`layer`, `head`) in the editor."""
    cut = model.leading_words(text, MAX_EXAMPLE_TOKENS)
    st.page_link(
        EDITOR_PAGE,
        label=f"Edit layer {layer + 1}, head {head + 1} in the step-by-step page",
        icon=":material/edit_note:",
        query_params=editor_params(cut, layer, head),
        help="Its real Q, K and V rows go into the editable tables: change one number of BERT's "
        "attention and see what moves.",
    )
    if cut != text:
        st.caption(
            f"The step-by-step tables hold {MAX_EXAMPLE_TOKENS} tokens ([CLS] and [SEP] "
            f"included), so they get the start of this text, “{layout.plain(cut)}”, run through "
            "the model again: their weights are those of the shorter text."
        )


def head_example(model: BertModel, text: str, layer: int, head: int) -> tuple[Example, str]:
    """Head (`layer`, `head`), from 0, of the model run on the start of `text` that fits the
    editor: its q, k, v `(tokens, d_head)` as the model computed them (after W_Q, W_K, W_V and
    their biases), labelled with the tokens; and that start of the text."""
    cut = model.leading_words(text, MAX_EXAMPLE_TOKENS)
    trace = minilm.page_trace(model, cut)
    example = Example(
        q=trace.q_heads[layer, head], k=trace.k_heads[layer, head], v=trace.v_heads[layer, head],
        query_labels=trace.tokens, key_labels=trace.tokens,
        title=f"of BERT's layer {layer + 1}, head {head + 1}",
    )  # fmt: skip
    return example, cut


def requested_head(
    source: str, text: str, layer: str, head: str, shape: tuple[int, int, int]
) -> tuple[str, int, int]:
    """(text, layer, head) from a link's parameters, layer and head from 0; an
    AttentionInputError written for the reader of the link if they cannot be read."""
    if source != SOURCE:
        raise AttentionInputError(
            f"The link's `source={_short(source)}` is not a model this page can read (it reads "
            f"`source={SOURCE}`), so the preset is shown."
        )
    if not text.strip():
        raise AttentionInputError(
            "The link asks for a head of BERT but carries no text (`text=`), so the preset is "
            "shown. On the real-model page, type a sentence and follow its “Edit … in the "
            "step-by-step page” link."
        )
    num_layers, num_heads, _ = shape
    return text, _position(layer, "layer", num_layers), _position(head, "head", num_heads)


def _position(raw: str, name: str, count: int, model: str = minilm.MODEL_NAME) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= count:
        raise AttentionInputError(
            f"The link's `{name}={_short(raw)}` is not a {name} of {model}: it has "
            f"{name}s 1 to {count}. The preset is shown instead."
        )
    return value - 1


def _short(raw: str) -> str:
    return raw if len(raw) <= 40 else raw[:40] + "…"


def bring_head(view: PageState, hand: HandMadeExample) -> None:
    """Show the head a link asks for in the step-by-step editors, with a notice naming it.

    Call before the size sliders: the head sets the sizes. A link that cannot be followed
    (unknown source, no text, layer or head out of range, no model on this server) gets a
    notice and the page keeps its own example.
    """
    for name in PARAMS:
        view.text_key(name, "", max_chars=minilm.MAX_TEXT_CHARS)
    view.follow_link(PARAMS)  # a link from the real-model page, on a later visit
    wanted = tuple(view.value(name) for name in PARAMS)
    if not any(wanted):
        st.session_state.pop(_LOADED, None)
        return
    loaded = st.session_state.get(_LOADED)
    if loaded is not None and loaded[0] == wanted:
        if hand.custom() is loaded[1]:
            _arrival_notice(loaded[2])
        else:  # the reader chose a preset, a seed or an upload: the link forgets the head
            _forget(view)
        return
    try:
        if wanted[0] == LEARNING:
            example, said = _trained_head(*wanted[2:])
            settings = LEARNING_SETTINGS
        elif wanted[0] in _decoders():
            example, said = _decoder_head(*wanted[:4])
            settings = LEARNING_SETTINGS  # causal, divided by √d_head, as the decoder does
        else:
            example, said = _bert_head(*wanted[:4])
            settings = MODEL_SETTINGS
    except AttentionInputError as error:
        view.notices.append(str(error))
        _forget(view)
        return
    hand.replace(example)
    for name, value in settings.items():
        if name not in st.query_params:  # a link may still ask for other settings
            view.set(name, value)
    st.session_state[_LOADED] = (wanted, example, said)
    _arrival_notice(said)


def _forget(view: PageState) -> None:
    for name in PARAMS:
        view.set(name, "")
    st.session_state.pop(_LOADED, None)


def _bert_head(source: str, text: str, layer: str, head: str) -> tuple[Example, str]:
    """The BERT head a link asks for, and the notice that names it."""
    result = minilm.load_model()
    text, layer, head = requested_head(source, text, layer, head, shape=result.shape)
    if result.model is None:
        raise AttentionInputError(
            f"The link asks for layer {layer + 1}, head {head + 1} of {minilm.MODEL_NAME}, but "
            f"the model is not available on this server, so the preset is shown. "
            f"{result.error}"
        )
    example, cut = head_example(result.model, text, layer, head)
    note = ""
    if cut != text:
        n = result.model.tokenize(text).num_input_tokens
        note = (
            f" The link's text has {n} tokens and these tables hold {MAX_EXAMPLE_TOKENS}, so "
            "the model was run on its start only."
        )
    d_head = example.q.shape[1]
    return example, (
        f"**{minilm.MODEL_NAME}, {example.title.removeprefix('of ')}**, on “{layout.plain(cut)}”. "
        f"Q, K and V below are the rows this head computed, one per token, after the model's "
        f"projections (q = x W_Qᵀ + b_Q, cut to the head's {d_head} columns). Divided by "
        f"√d_k = √{d_head}, as the model does, the weights are the model's own (to float32 "
        f"rounding): change one number and see what moves.{note} The link reopens the model's "
        "numbers, not your edits (the JSON download under the tables keeps those)."
    )


def _decoders() -> tuple[str, ...]:
    """The decoders a link may name as its source: the shipped one and the listed ones."""
    return tuple(page_model.decoder_labels({page_model.SHIPPED_DECODER: ""}))


def _decoder_head(source: str, text: str, layer: str, head: str) -> tuple[Example, str]:
    """The decoder head a link asks for, and the notice that names it."""
    loaded = page_model.named_decoder(source)
    model = getattr(loaded, "model", None)
    if not isinstance(model, DecoderModel):
        raise AttentionInputError(
            f"The link asks for a head of {loaded.name}, but the model is not available on this "
            f"server, so the preset is shown. {getattr(loaded, 'error', '') or ''}".strip()
        )
    if not text.strip():
        raise AttentionInputError(
            f"The link asks for a head of {loaded.name} but carries no text (`text=`), so the "
            "preset is shown."
        )
    config = model.config
    layer_index = _position(layer, "layer", config.num_hidden_layers, loaded.name)
    head_index = _position(head, "head", config.num_attention_heads, loaded.name)
    example = decoder_example(model, text, layer_index, head_index)
    read = "".join(example.query_labels)
    d_head = example.q.shape[1]
    return example, (
        f"**{loaded.name}, {example.title.removeprefix('of ')}**, on “{layout.plain(read)}” "
        f"(its first {len(example.query_labels)} tokens at most). Q and K below are the rows "
        f"this head computed, one per token, after the model's projections and its rotation "
        f"(RoPE, where the model has it), V its values. Divided by √d_k = √{d_head} under the "
        "causal mask, as the model does, the weights are the model's own (to float32 "
        "rounding): change one number and see what moves. The link reopens the model's "
        "numbers, not your edits."
    )


def _trained_head(layer: str, head: str, run: str) -> tuple[Example, str]:
    """The head of a learning-page run a link asks for (trained again if this server has not
    kept the run: the same settings give the same weights), and the notice that names it."""
    settings = toy.settings_of(run)
    try:
        layer_index, head_index = int(layer), int(head)
    except ValueError:
        raise AttentionInputError(
            f"The link's layer `{_short(layer)}` and head `{_short(head)}` are not whole numbers."
        ) from None
    bar = st.empty()
    trained = toy.wait_for(settings, lambda done, text: bar.progress(done, text=text))
    bar.empty()
    if trained.error:
        raise AttentionInputError(trained.error)
    example = toy.head_example(trained, layer_index, head_index)
    d_head = example.q.shape[1]
    return example, (
        f"**Head {layer_index}.{head_index} of the learning page's model**, trained "
        f"{trained.final.step:,} steps (seed {settings.seed}), on its held-out example: a "
        f"segment of {len(example.query_labels) // 2} token ids and its copy. Q, K and V are "
        f"the rows this head computed (x W_Q + b_Q, its {d_head} columns); divided by "
        f"√{d_head} under the causal mask, as the model does, the weights are the model's own. "
        "Change one number and see the stripe move."
    )


def _arrival_notice(said: str) -> None:
    st.info(said, icon=":material/smart_toy:")
