"""What every decoder family's loaded model is: a config, its weights and a tokenizer, and the
text turned into token ids and back exactly as transformers does it.

A family's model (``LlamaModel``, ``GPT2Model``) inherits ``DecoderModel`` and adds what is its
own (the chat template, the learned position table); its ``parameter_count`` comes from its
config alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DecoderModel", "decode_ids", "encode_prompt", "encode_text", "token_text"]


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


@dataclass(frozen=True, eq=False)
class DecoderModel:
    """A loaded decoder. Load once per process and share it: nothing in it changes.

    ``saved_as`` says how the file held its numbers ("float32", "bfloat16", "Q4_1 (4-bit)
    layers…"): the model line every real-model page shows.
    """

    config: Any
    weights: Any
    tokenizer: Any
    load_seconds: float = 0.0
    saved_as: str = ""

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
