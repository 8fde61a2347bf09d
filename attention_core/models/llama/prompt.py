"""What the decoder reads: a prompt tokenized, raw or in the model's chat template, within limits.

Prompt            the ids, each token's text, and what was cut
tokenize_prompt   a text to a Prompt (``LlamaModel.prompt``), cut to MAX_PROMPT_CHARS
                  characters and ``max_tokens`` tokens
chat_text         SmolLM2's ChatML template for one user turn, written out (what its GGUF's
                  template renders, ``attention_core.models.chat``)
gguf_tokenizer    a ``tokenizers.Tokenizer`` built from a GGUF file's vocabulary

Text to ids and back is every decoder's (``attention_core.models.decoder``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_core.validation import AttentionInputError

from ..decoder import decode_ids, encode_prompt, encode_text, token_text
from ..loading import ModelFileError
from .files import TokenizerSpec, build_tokenizer

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "MAX_PROMPT_CHARS",
    "MAX_PROMPT_TOKENS",
    "Prompt",
    "chat_text",
    "gguf_tokenizer",
    "tokenize_prompt",
]

MAX_PROMPT_TOKENS = 192
# Longer texts are cut before tokenizing, so a pasted book costs no tokenizer time.
MAX_PROMPT_CHARS = 4000
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@dataclass(frozen=True)
class Prompt:
    """A tokenized prompt: ids `(n,)`, token strings as text pieces, and what was cut.

    text               the text that was tokenized (after any character cut)
    chat               True if wrapped in the model's chat template
    tokens             each id decoded alone ("Ġ" shown as a space; a piece of a multi-byte
                       character shows as "�")
    truncated          True if the text was cut (to MAX_PROMPT_CHARS characters or
                       MAX_PROMPT_TOKENS tokens)
    num_input_tokens   tokens of the (character-cut) text before the token cut
    """

    text: str
    chat: bool
    input_ids: np.ndarray
    tokens: tuple[str, ...]
    truncated: bool
    num_input_tokens: int
    notice: str = ""


def tokenize_prompt(
    tokenizer: Any,
    text: str,
    *,
    chat: Callable[[str], str] | None = None,
    max_tokens: int = MAX_PROMPT_TOKENS,
) -> Prompt:
    """Tokenize a prompt with ``tokenizer`` (a ``tokenizers.Tokenizer``), raw or framed as one
    user turn by ``chat`` (the model's chat template, ``LlamaModel.chat``; ``chat_text`` is
    SmolLM2's).

    Raises ``AttentionInputError`` for a non-string or empty text. A text longer than
    MAX_PROMPT_CHARS characters or ``max_tokens`` tokens is cut (its beginning is kept)
    and ``notice`` says so.
    """
    if not isinstance(text, str):
        raise AttentionInputError(f"The prompt must be text, got {type(text).__name__}.")
    if not text.strip():
        raise AttentionInputError(
            "The prompt is empty: type a few words for the model to continue."
        )
    notices = []
    if len(text) > MAX_PROMPT_CHARS:
        notices.append(f"the text was cut to its first {MAX_PROMPT_CHARS:,} characters")
        text = text[:MAX_PROMPT_CHARS]
    # The template's tokens (the chat template's, or a BOS the tokenizer adds as transformers'
    # tokenizer(text) does: Llama 2, TinyLlama, Llama 3) count against the limit; only the
    # user's words are cut.
    words = encode_text(tokenizer, text)
    framed = words if chat else encode_prompt(tokenizer, text)
    start = _start_of(words, framed)
    overhead = len(encode_text(tokenizer, chat(""))) if chat else len(framed) - len(words)
    num_input = len(words)
    room = max(max_tokens - overhead, 1)
    if len(words) > room:
        notices.append(f"the prompt was cut to its first {room} of {len(words)} tokens")
        text = decode_ids(tokenizer, words[:room])
        framed = framed[:start] + words[:room] + framed[start + len(words) :]
    ids = encode_text(tokenizer, chat(text)) if chat else framed
    arr = np.asarray(ids, dtype=np.int64)
    arr.setflags(write=False)
    notice = ""
    if notices:
        notice = (
            "Long prompt: "
            + " and ".join(notices)
            + (f" (at most {max_tokens} prompt tokens, so every step fits in memory).")
        )
    return Prompt(
        text=text,
        chat=chat is not None,
        input_ids=arr,
        tokens=tuple(token_text(tokenizer, i) for i in ids),
        truncated=bool(notices),
        num_input_tokens=num_input,
        notice=notice,
    )


def _start_of(words: list[int], framed: list[int]) -> int:
    """Where the text's own tokens begin among the ids its tokenizer's template frames them in
    (after a BOS: 1)."""
    for start in range(len(framed) - len(words) + 1):
        if framed[start : start + len(words)] == words:
            return start
    return 0


def chat_text(user: str, system: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """SmolLM2's ChatML chat template for one user turn, ending with the assistant's header:

    <|im_start|>system\\n{system}<|im_end|>\\n<|im_start|>user\\n{user}<|im_end|>\\n
    <|im_start|>assistant\\n

    (the GGUF's Jinja template with its default system prompt and add_generation_prompt=True).
    """
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def gguf_tokenizer(spec: TokenizerSpec) -> Any:
    """A ``tokenizers.Tokenizer`` built from a GGUF file's vocabulary and merges."""
    try:
        return build_tokenizer(spec)
    except ImportError:
        raise ModelFileError("Reading the tokenizer needs the package tokenizers.") from None
