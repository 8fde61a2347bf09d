"""What BERT's WordPiece tokenizer makes of a text: the exact tokens the model reads.

The tokenizer is a ``tokenizers.Tokenizer`` read by ``loading.read_tokenizer`` (padding off,
truncation at the model's positions): these functions only call it, so they import nothing
beyond NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_core.validation import AttentionInputError

__all__ = ["TokenizedText", "leading_words", "tokenize"]


@dataclass(frozen=True)
class TokenizedText:
    """What the tokenizer made of a text: the exact tokens the model sees (no padding).

    tokens            e.g. ("[CLS]", "the", "animal", ..., "[SEP]")
    input_ids         `(q_pos,)` int64 vocabulary ids, one per token
    truncated         True if the text had more tokens than the model's positions (512) and
                      the end was cut off
    num_input_tokens  how many tokens the whole text would have had (== len(tokens) unless
                      truncated)
    """

    text: str
    tokens: tuple[str, ...]
    input_ids: np.ndarray
    truncated: bool
    num_input_tokens: int


def tokenize(tokenizer: Any, text: str) -> TokenizedText:
    """The exact tokens of ``text`` ([CLS] ... [SEP]), truncated to the model's positions.

    Raises ``AttentionInputError`` if ``text`` is not a string, or if it has no tokens
    besides [CLS] and [SEP] (empty or whitespace-only text): a trace of two special tokens
    attending to each other would teach nothing, so the page asks for a sentence instead.
    """
    if not isinstance(text, str):
        raise AttentionInputError(
            f"The text must be a string, got {type(text).__name__}: type a sentence."
        )
    try:
        encoding = tokenizer.encode(text)
    except Exception as exc:  # tokenizers raises bare Exceptions for odd input
        raise AttentionInputError(f"The tokenizer could not read this text ({exc}).") from exc
    special = tokenizer.num_special_tokens_to_add(False)
    if len(encoding.ids) <= special:
        raise AttentionInputError(
            "The text is empty (or only spaces and control characters), so there is nothing "
            "to attend to: type a sentence."
        )
    overflow = encoding.overflowing
    # With stride 0 the overflow pieces split the cut-off tokens without overlap; each piece
    # repeats the special tokens, which are counted once.
    num_input = len(encoding.ids) + sum(len(piece.ids) - special for piece in overflow)
    ids = np.asarray(encoding.ids, dtype=np.int64)
    ids.setflags(write=False)
    return TokenizedText(
        text=text,
        tokens=tuple(encoding.tokens),
        input_ids=ids,
        truncated=bool(overflow),
        num_input_tokens=int(num_input),
    )


def leading_words(tokenizer: Any, text: str, max_tokens: int) -> str:
    """The longest start of ``text`` that ends between words and that the model reads as
    at most ``max_tokens`` tokens, [CLS] and [SEP] included (``text`` itself if it fits).

    Cut between words because a word cut inside ("unbeliev") may split into other pieces
    than the whole word's first ones; only a first word longer than the budget is cut
    inside, piece by piece. Raises ``AttentionInputError`` for text ``tokenize`` refuses,
    or if ``max_tokens`` leaves no room for a word.
    """
    special = tokenizer.num_special_tokens_to_add(False)
    if max_tokens <= special:
        raise AttentionInputError(
            f"{max_tokens} tokens leave no room for a word besides [CLS] and [SEP]."
        )
    if len(tokenize(tokenizer, text).tokens) <= max_tokens:
        return text
    encoding = tokenizer.encode(text)
    tokens, offsets = encoding.tokens, encoding.offsets  # tokens[0] is [CLS]
    keep = max_tokens - special  # word pieces kept: tokens[1 : keep + 1]
    # WordPiece marks a piece that continues the previous one with "##".
    while keep > 1 and tokens[keep + 1].startswith("##"):
        keep -= 1
    if keep == 1 and tokens[2].startswith("##"):
        keep = max_tokens - special
    cut = text[: offsets[keep][1]]
    while len(tokenize(tokenizer, cut).tokens) > max_tokens:  # a re-split word: one piece fewer
        keep -= 1
        cut = text[: offsets[keep][1]]
    return cut
