"""The heads page's controls and what they say when the input needs a word: the prompt, the token
read (a word the tokenizer cuts in pieces is read by its first piece, and the page says so), the
head, the probe.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from attention_core import AttentionInputError
from attention_core.models.decoder import DecoderModel
from ui.heads.data import MAX_PROMPT_TOKENS
from ui.heads.figures import token_label
from ui.widgets.state import PageState

DEFAULT_PROMPT = "The capital of France is"
# Layer 24, head 5 writes most of " Paris" after the default prompt (from 1, as the page counts).
DEFAULT_LAYER, DEFAULT_HEAD = 24, 5
MAX_SEED = 9999
PROBE_LENGTHS = (5, 64)
DEFAULT_LENGTH = 20
MAX_TOKEN_CHARS = 40
# Longer prompts are cut to MAX_PROMPT_TOKENS tokens anyway; the link stays short.
MAX_PROMPT_CHARS = 1_000
# The explanation's token, from 1 (0: the last): MiniLM's tokens of a 1,000-character prompt.
MAX_QUERY = 512


def token_choice_label(shown: tuple[str, ...]) -> Callable[[int], str]:
    """How a token selectbox names its options: 0 is the last token, p ≥ 1 the p-th.

    Made here, not in the page: a session keeps a widget's format function as long as it keeps
    the widget's value, and a function defined in the page would keep the page's globals (the
    model) alive after the model has been let go."""
    return functools.partial(_token_choice, tuple(shown))


def _token_choice(shown: tuple[str, ...], position: int) -> str:
    return f"the last ({shown[-1]})" if position == 0 else shown[position - 1]


@dataclass(frozen=True)
class ChosenToken:
    """A token the page reads: its id, its text, and a note when the word was cut in pieces."""

    id: int
    text: str
    note: str = ""


def chosen_token(model: DecoderModel, typed: str, what: str) -> ChosenToken:
    """The token of `typed`: its only piece, or its first piece with a note saying so.

    Raises AttentionInputError (with what to type instead) for text with no token at all.
    """
    ids = model.encode(typed)
    if not ids:
        raise AttentionInputError(
            f"The {what} is empty: type a word, with its leading space if it follows one "
            "(“ Paris”, not “Paris”)."
        )
    first = model.token_text(ids[0])
    if len(ids) == 1:
        return ChosenToken(ids[0], first)
    pieces = " + ".join(f"“{token_label(model.token_text(i))}”" for i in ids)
    note = (
        f"“{token_label(typed)}” is {len(ids)} tokens for this model ({pieces}): the {what} "
        f"reads its first piece, “{token_label(first)}”, the token the model would write first."
    )
    return ChosenToken(ids[0], first, note)


def prompt_ids(model: DecoderModel, text: str) -> tuple[tuple[int, ...], str]:
    """The prompt's token ids (cut to MAX_PROMPT_TOKENS, or the positions a GPT-2 learned) and
    the notice if it was cut."""
    prompt = model.prompt(text, max_tokens=min(MAX_PROMPT_TOKENS, model.context_limit))
    return tuple(int(i) for i in prompt.input_ids), prompt.notice


def fit_position(view: PageState, name: str, count: int) -> None:
    """Keep a 1-based position control inside a text of `count` tokens; 0 means the last."""
    if view.value(name) > count:
        if name in st.query_params:
            view.notices.append(
                f"The link's `{name}={view.value(name)}` is past the end of this text ({count} "
                "tokens); the last token is read instead."
            )
        view.set(name, 0)
