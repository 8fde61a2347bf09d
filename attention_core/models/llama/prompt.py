"""What a GGUF decoder reads its text with: ``gguf_tokenizer``, a ``tokenizers.Tokenizer``
built from the file's vocabulary.

A prompt tokenized, raw or in SmolLM2's chat template, within limits (``Prompt``,
``tokenize_prompt``, ``chat_text``) is every decoder's (``attention_core.models.decoder``), named
here too.
"""

from __future__ import annotations

from typing import Any

from ..decoder import (
    DEFAULT_SYSTEM_PROMPT,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_TOKENS,
    Prompt,
    chat_text,
    tokenize_prompt,
)
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


def gguf_tokenizer(spec: TokenizerSpec) -> Any:
    """A ``tokenizers.Tokenizer`` built from a GGUF file's vocabulary and merges."""
    try:
        return build_tokenizer(spec)
    except ImportError:
        raise ModelFileError("Reading the tokenizer needs the package tokenizers.") from None
