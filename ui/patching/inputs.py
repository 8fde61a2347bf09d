"""The patching page's inputs: two prompts of one length and two single-token answers, read
from what the learner typed, with a sentence for every way they can be wrong (never a
traceback): an empty prompt, prompts of different lengths (both token lists shown), identical
prompts, an answer of several tokens (its first piece is used, and the page says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from attention_core import AttentionInputError
from attention_core.models.decoder import DecoderModel
from ui.patching.data import MAX_PROMPT_TOKENS, Pair
from ui.widgets.tokens import token_label

# The indirect-object pair (Wang et al. 2022): SmolLM2 gives " Mary" p = 0.92 after the clean
# prompt, and " John" p = 0.75 after the corrupted one (LD +6.14 and −5.51).
DEFAULT_CLEAN = "When Mary and John went to the store, John gave a drink to"
DEFAULT_CORRUPT = "When Mary and John went to the store, Mary gave a drink to"
DEFAULT_ANSWER, DEFAULT_WRONG = " Mary", " John"
DEFAULTS = {"clean": DEFAULT_CLEAN, "corrupt": DEFAULT_CORRUPT, "answer": DEFAULT_ANSWER,
            "wrong": DEFAULT_WRONG}  # fmt: skip
MAX_PROMPT_CHARS = 400
MAX_ANSWER_CHARS = 40


def shown(text: str) -> str:
    """A token as the page writes it: whitespace visible, quoted."""
    return "“" + token_label(text) + "”"


@dataclass(frozen=True)
class ReadPair:
    """The pair to patch, or the sentences saying why there is none: ``problems`` by input
    ("clean", "corrupt", "answer", "wrong"), ``notes`` (a cut prompt, a split answer)."""

    pair: Pair | None
    problems: dict[str, str]
    notes: dict[str, str]


def prompt_ids(model: DecoderModel, text: str, which: str) -> tuple[tuple[int, ...], str]:
    """A prompt's ids (cut to MAX_PROMPT_TOKENS, or the positions a GPT-2 learned) and the note
    saying it was cut."""
    if not text.strip():
        raise AttentionInputError(f"The {which} prompt is empty: type a sentence to complete.")
    prompt = model.prompt(text, max_tokens=min(MAX_PROMPT_TOKENS, model.context_limit))
    return tuple(int(i) for i in prompt.input_ids), prompt.notice


def answer_id(model: DecoderModel, text: str, which: str) -> tuple[int, str]:
    """An answer's token id: its only piece, or its first piece and a note saying so."""
    ids = model.encode(text)
    if not ids:
        raise AttentionInputError(
            f"The {which} is empty: type one token, with its leading space if it follows one "
            "(“ Mary”, not “Mary”)."
        )
    if len(ids) == 1:
        return ids[0], ""
    pieces = " + ".join(shown(model.token_text(i)) for i in ids)
    return ids[0], (
        f"{shown(text)} is {len(ids)} tokens for this model ({pieces}): the {which} is its first "
        f"piece, {shown(model.token_text(ids[0]))}, the token the model would write first."
    )


def read_pair(model: DecoderModel, texts: dict[str, str]) -> ReadPair:
    """The pair of `texts` (keys "clean", "corrupt", "answer", "wrong")."""
    problems, notes, ids = {}, {}, {}
    readers = {
        "clean": lambda: prompt_ids(model, texts["clean"], "clean"),
        "corrupt": lambda: prompt_ids(model, texts["corrupt"], "corrupted"),
        "answer": lambda: answer_id(model, texts["answer"], "answer"),
        "wrong": lambda: answer_id(model, texts["wrong"], "wrong answer"),
    }
    for which, reader in readers.items():
        try:
            ids[which], note = reader()
        except AttentionInputError as error:
            problems[which] = str(error)
            continue
        if note:
            notes[which] = note
    if "clean" in ids and "corrupt" in ids:
        clean, corrupt = ids["clean"], ids["corrupt"]
        if len(clean) != len(corrupt):
            problems["corrupt"] = (
                f"The clean prompt has {len(clean)} tokens and the corrupted one {len(corrupt)}: "
                "a patch puts token p of one into token p of the other, so they need the same "
                f"number. Clean: {_listed(model, clean)}. Corrupted: {_listed(model, corrupt)}."
            )
        elif clean == corrupt:
            problems["corrupt"] = (
                "The two prompts are the same, so LD_clean = LD_corrupt and nothing can be "
                "restored: change a word of the corrupted prompt (a name, a city)."
            )
    if ids.get("answer") is not None and ids.get("answer") == ids.get("wrong"):
        problems["wrong"] = (
            "The answer and the wrong answer are the same token, so their logit difference is "
            "always 0: give two different tokens."
        )
    if problems:
        return ReadPair(None, problems, notes)
    pair = Pair(ids["clean"], ids["corrupt"], ids["answer"], ids["wrong"])
    return ReadPair(pair, problems, notes)


def _listed(model: DecoderModel, ids: tuple[int, ...]) -> str:
    return " · ".join(shown(model.token_text(i)) for i in ids)
