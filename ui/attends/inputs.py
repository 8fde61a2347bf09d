"""The "why a head attends there" page's controls: the model, the prompt cut to the page's
tokens, the head, the query and the key, each bound to the link.

Layer, head, query and key count from 1 on the page and in the link (0 for the query is the
last token, 0 for the key the one the head attends most), as the other real-model pages count.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from attention_core import AttentionInputError
from attention_core.models import BertModel
from ui.attends.data import MAX_PROMPT_TOKENS
from ui.attends.figures import token_label
from ui.widgets.state import PageState

DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the"
# SmolLM2's strongest induction head (layer 19, head 7 from 1), found by the heads page's probe.
DEFAULT_LAYER, DEFAULT_HEAD = 19, 7
# Longer prompts are cut to MAX_PROMPT_TOKENS tokens anyway; the link stays short.
MAX_PROMPT_CHARS = 1_000


def shape(model: object) -> tuple[int, int]:
    """The model's layers and (query) heads."""
    config = model.config
    return config.num_hidden_layers, config.num_attention_heads


def layer_head_keys(view: PageState, model_shape: tuple[int, int]) -> tuple[str, str]:
    """``?layer=`` and ``?head=`` bound within the model's (layers, heads), from 1."""
    layers, heads = model_shape
    return (
        view.int_key("layer", min(DEFAULT_LAYER, layers), lo=1, hi=layers),
        view.int_key("head", min(DEFAULT_HEAD, heads), lo=1, hi=heads),
    )


def prompt_tokens(model: object, text: str) -> tuple[tuple[int, ...], tuple[str, ...], str]:
    """The ids the model reads of ``text`` (cut to MAX_PROMPT_TOKENS), each token's text, and a
    notice if it was cut; an AttentionInputError for a text with no token."""
    if isinstance(model, BertModel):
        cut = model.leading_words(text, MAX_PROMPT_TOKENS)
        tokenized = model.tokenize(cut)
        ids, tokens = tuple(int(i) for i in tokenized.input_ids), tokenized.tokens
        notice = (
            ""
            if cut == text
            else f"This page reads the first {len(ids)} tokens of the text ([CLS] and [SEP] "
            f"included): “…{cut[-30:]}”."
        )
    else:
        prompt = model.prompt(text, max_tokens=min(MAX_PROMPT_TOKENS, model.context_limit))
        ids = tuple(int(i) for i in prompt.input_ids)
        tokens, notice = tuple(model.token_text(i) for i in ids), prompt.notice
    if len(ids) < 2:
        raise AttentionInputError(
            "A head needs at least two tokens to choose between: type a sentence or two."
        )
    return ids, tokens, notice


def fit_position(view: PageState, name: str, count: int) -> None:
    """Keep a position control (from 1; 0 its default) inside a text of `count` tokens."""
    if view.value(name) > count:
        view.notices.append(
            f"The link's `{name}={view.value(name)}` is past the end of this text ({count} "
            f"tokens): the page's own choice is shown instead."
        )
        view.set(name, 0)


def query_label(tokens: tuple[str, ...]) -> Callable[[int], str]:
    """How the query box names its options: 0 is the last token, p ≥ 1 the p-th.

    Made here, not in the page: a session keeps a widget's format function as long as it keeps
    the widget's value, and one defined in the page would keep the page's globals alive."""
    return functools.partial(_label, tuple(tokens), True)


def key_label(tokens: tuple[str, ...]) -> Callable[[int], str]:
    """How the key box names its options: 0 is the key the head attends most."""
    return functools.partial(_label, tuple(tokens), False)


def _label(tokens: tuple[str, ...], query: bool, position: int) -> str:
    if position == 0:
        return f"the last ({token_label(tokens[-1])})" if query else "the one it attends most"
    return f"{position} · {token_label(tokens[position - 1])}"
