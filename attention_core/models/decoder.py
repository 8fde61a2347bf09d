"""What every decoder family's loaded model is: a config, its weights and a tokenizer, and the
text turned into token ids and back exactly as transformers does it.

    Prompt            the ids, each token's text, and what was cut
    tokenize_prompt   a text to a Prompt (``DecoderModel.prompt``), raw or in the model's chat
                      template, cut to MAX_PROMPT_CHARS characters and ``max_tokens`` tokens
    chat_text         SmolLM2's ChatML template for one user turn, written out (what its GGUF's
                      template renders, ``attention_core.models.chat``)

A family's model (``LlamaModel``, ``GPT2Model``) inherits ``DecoderModel`` and adds what is its
own (the chat template, the learned position table, the final norm); its ``parameter_count``
comes from its config alone. ``MAX_CONTEXT_TOKENS`` bounds what one pass reads, in every family.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from attention_core.validation import AttentionInputError

from .chat import ChatTemplate
from .loading import ModelFileError

__all__ = [
    "MAX_CONTEXT_TOKENS",
    "MAX_PROMPT_CHARS",
    "MAX_PROMPT_TOKENS",
    "MAX_SCORED_TOKENS",
    "DecoderModel",
    "Prompt",
    "chat_text",
    "decode_ids",
    "encode_prompt",
    "encode_text",
    "token_text",
    "tokenize_prompt",
]

# A trace keeps every layer's (head, n, n) steps: 30 layers x 9 heads x 4 arrays at 256 tokens
# is ~280 MB, the most one pass should hold (a page keeps the weights alone: run_llama's keep).
# Prompts (MAX_PROMPT_TOKENS) leave room for 64 generated tokens.
MAX_CONTEXT_TOKENS = 256
# A text scored in one pass keeps no steps (``score_text``): its limit is time, not memory.
MAX_SCORED_TOKENS = 1024


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` exactly: control-token text such as ``<|im_end|>`` becomes the
    control token, as in transformers, and no BOS is added (SmolLM2 and GPT-2 use none)."""
    return list(tokenizer.encode(text, add_special_tokens=False).ids)


def encode_prompt(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a text the model starts from, as transformers' ``tokenizer(text)`` gives
    them: with the BOS a tokenizer's template adds (Llama 2, TinyLlama, Llama 3; SmolLM2 and
    GPT-2 add none)."""
    return list(tokenizer.encode(text, add_special_tokens=True).ids)


def decode_ids(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)


def token_text(tokenizer: Any, token_id: int) -> str:
    return decode_ids(tokenizer, [token_id])


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
    user turn by ``chat`` (the model's chat template, ``DecoderModel.chat``; ``chat_text`` is
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


@dataclass(frozen=True, eq=False)
class DecoderModel:
    """A loaded decoder. Load once per process and share it: nothing in it changes.

    ``saved_as`` says how the file held its numbers ("float32", "bfloat16", "Q4_1 (4-bit)
    layers…"): the model line every real-model page shows. ``chat_template`` is the one its
    files carry (None for a base model, which reads raw text).
    """

    config: Any
    weights: Any
    tokenizer: Any
    load_seconds: float = 0.0
    saved_as: str = ""
    chat_template: ChatTemplate | None = field(default=None, repr=False)
    # How positions enter: "rope" (q and k rotated in every layer: Llama, Qwen2) or "learned"
    # (a table of position vectors added to the embeddings once: GPT-2).
    positions: ClassVar[str] = "rope"

    @classmethod
    def loaded(cls, started: float, **parts: Any) -> Any:
        """The model made of ``parts``, its ``load_seconds`` counted from ``started`` (the
        ``time.perf_counter()`` taken before its files were read)."""
        return cls(load_seconds=time.perf_counter() - started, **parts)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` exactly (``encode_text``)."""
        return encode_text(self.tokenizer, text)

    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of a text the model starts from (``encode_prompt``: a BOS where the
        tokenizer adds one)."""
        return encode_prompt(self.tokenizer, text)

    def decode(self, ids: Sequence[int]) -> str:
        return decode_ids(self.tokenizer, ids)

    def token_text(self, token_id: int) -> str:
        return token_text(self.tokenizer, token_id)

    @property
    def context_limit(self) -> int:
        """The most tokens (prompt and generated together) one pass of this model reads here."""
        return MAX_CONTEXT_TOKENS

    @property
    def text_limit(self) -> int:
        """The most tokens of a text scored in one pass (``score_text``)."""
        return MAX_SCORED_TOKENS

    @property
    def prompt_limit(self) -> int:
        """The most prompt tokens: MAX_PROMPT_TOKENS, or three quarters of a shorter context
        (a quarter left for generated tokens)."""
        return min(MAX_PROMPT_TOKENS, self.context_limit * 3 // 4)

    def chat(self, user: str) -> str:
        """``user``'s turn framed by this model's chat template, up to the assistant's header.
        A ModelFileError for a model saved without one."""
        if self.chat_template is None:
            raise ModelFileError("This model was saved without a chat template: it reads raw text.")
        return self.chat_template.render(user)

    def prompt(self, text: str, *, chat: bool = False, max_tokens: int | None = None) -> Prompt:
        """``tokenize_prompt`` with this model's tokenizer, in its chat template if ``chat``, at
        most ``max_tokens`` tokens (``prompt_limit`` by default)."""
        limit = self.prompt_limit if max_tokens is None else max_tokens
        frame = self.chat if chat else None
        return tokenize_prompt(self.tokenizer, text, chat=frame, max_tokens=limit)
