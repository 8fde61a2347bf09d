"""The long-context page's controls and what they say when they cannot be followed: a window
longer than the text, more sinks than the window, an empty text, a text over the limit."""

from __future__ import annotations

import streamlit as st

from attention_core.models.decoder import MAX_SCORED_TOKENS, DecoderModel
from ui.widgets.state import PageState

DEFAULT_WINDOW, DEFAULT_SINKS = 64, 4
WINDOWS = (4, 512)
MAX_SINKS = 16
# A link may carry a long text; 6,000 characters are ~1,400 tokens, cut to the model's
# text_limit (MAX_SCORED_TOKENS, or a GPT-2's positions).
MAX_TEXT_CHARS = 6_000


def text_ids(model: DecoderModel, text: str) -> tuple[tuple[int, ...], str]:
    """The text's token ids, cut to the model's ``text_limit``, and what to say if it was cut."""
    ids = model.encode_prompt(text)
    limit = model.text_limit
    if len(ids) <= limit:
        return tuple(ids), ""
    why = (
        "three passes over a longer one would keep every viewer waiting"
        if limit == MAX_SCORED_TOKENS
        else "the model learned no more positions"
    )
    return tuple(ids[:limit]), (
        f"The text is {len(ids):,} tokens: the page reads its first {limit:,} ({why})."
    )


def fitted(view: PageState, n: int) -> tuple[int, int, list[str]]:
    """The window and sinks the page uses for a text of `n` tokens, and why they differ from
    the controls, if they do (the controls keep what the reader chose)."""
    window, sinks = view.value("window"), view.value("sinks")
    notes = []
    if window >= n - 1:
        window = max(1, (n - 1) // 2)
        notes.append(
            f"The window ({view.value('window')}) is as long as the text ({n} tokens), so it "
            f"would hide nothing: the page uses {window}, half the text, until the text is "
            "longer or the window shorter."
        )
    if sinks >= window:
        kept = min(DEFAULT_SINKS, window - 1)
        notes.append(
            f"{sinks} first tokens kept with a window of {window}: the sinks would fill the "
            f"window, so the page keeps {kept} (the default, or fewer than the window)."
        )
        sinks = kept
    return window, sinks, notes


def show_notes(notes: list[str]) -> None:
    for note in notes:
        st.warning(note, icon=":material/tune:")


def local_layers_note(name: str, model: DecoderModel, window: int) -> str:
    """What the model's own local layers already hide (Gemma's sliding-window layers), and how
    the page's window adds to them; "" for a model whose layers all read the whole text."""
    config = model.config
    windows = getattr(config, "windows", ())  # GPT-2's layers have none
    local = [layer for layer, own in enumerate(windows) if own is not None]
    if not local:
        return ""
    own = windows[local[0]]
    layers = config.num_hidden_layers
    global_ = layers - len(local)
    effect = (
        f"so the window W = {window} changes only what its {global_} global "
        f"layer{'s' if global_ != 1 else ''} read{'' if global_ != 1 else 's'}"
        if window >= own
        else f"and W = {window} narrows them further, in every layer"
    )
    return (
        f"{name} already reads through a window of its own: {len(local)} of its {layers} "
        f"layers are local, each query there seeing only its last {own} tokens, even in the "
        f"full pass; {effect}. Its cache for those layers need never hold more than {own} "
        "positions."
    )
