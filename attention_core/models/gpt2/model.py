"""A loaded GPT-2 (config, weights, tokenizer) and ``load_gpt2``, which reads one from a Hugging
Face folder."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..loading import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    check_folder,
    number_format,
    read_config,
    read_tensors,
    read_tokenizer,
)
from .config import GPT2Config, parameter_count
from .weights import GPT2Weights

__all__ = ["GPT2Model", "load_gpt2"]


@dataclass(frozen=True, eq=False)
class GPT2Model:
    """A loaded GPT-2: config, float32 weights, a ``tokenizers.Tokenizer``.

    Load once per process and share it: nothing in it changes. ``saved_as`` is the number
    format the file held ("float32", "float16" or "bfloat16"), widened to float32 here.
    """

    config: GPT2Config
    weights: GPT2Weights
    tokenizer: Any
    path: Path | None = None
    load_seconds: float = 0.0
    saved_as: str = "float32"

    @property
    def parameter_count(self) -> int:
        """Learned numbers in the checkpoint, the tied head counted once (from the config)."""
        return parameter_count(self.config)

    @property
    def position_table(self) -> np.ndarray:
        """`(n_positions, d_model)` the learned position embeddings: row p is added to the
        token embedding of every token at position p."""
        return self.weights.wpe

    @property
    def eos_token_id(self) -> int | None:
        return self.config.eos_token_id

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` exactly (GPT-2 adds no BOS of its own)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_text(self, token_id: int) -> str:
        return self.decode([token_id])


def load_gpt2(path: Path | str) -> GPT2Model:
    """Load a GPT-2 from a Hugging Face folder (config.json, model.safetensors, tokenizer.json).

    The configuration is read and checked first (an unsupported activation is refused before
    any weight is read). Raises ``ModelNotFoundError`` for a folder missing a file and
    ``ModelFileError`` for one that cannot be read; both are ``AttentionInputError``.
    """
    start = time.perf_counter()
    folder = check_folder(path, "GPT-2")
    config = GPT2Config.from_dict(
        read_config(folder / CONFIG_FILE), source=str(folder / CONFIG_FILE)
    )
    tokenizer = read_tokenizer(folder / TOKENIZER_FILE)
    state = read_tensors(folder)
    formats = sorted({number_format(a) for a in state.values() if a.ndim == 2})
    weights = GPT2Weights.from_state_dict(state, config, str(folder))
    del state
    return GPT2Model(
        config=config,
        weights=weights,
        tokenizer=tokenizer,
        path=folder,
        load_seconds=time.perf_counter() - start,
        saved_as=", ".join(formats),
    )
