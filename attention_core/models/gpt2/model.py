"""A loaded GPT-2 (config, weights, tokenizer) and ``load_gpt2``, which reads one from a Hugging
Face folder."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from attention_core.logit_lens import FinalNorm

from ..chat import read_chat_template
from ..decoder import MAX_CONTEXT_TOKENS, MAX_SCORED_TOKENS, DecoderModel
from ..folder import check_folder, read_tensors
from ..loading import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    number_format,
    read_config,
    read_tokenizer,
)
from .config import GPT2Config, parameter_count
from .weights import GPT2Weights

__all__ = ["GPT2Model", "load_gpt2"]


@dataclass(frozen=True, eq=False)
class GPT2Model(DecoderModel):
    """A loaded GPT-2: config, float32 weights, a ``tokenizers.Tokenizer``.

    ``saved_as`` is the number format the file held ("float32", "float16" or "bfloat16"),
    widened to float32 here.
    """

    config: GPT2Config
    weights: GPT2Weights
    path: Path | None = None
    positions: ClassVar[str] = "learned"

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

    @property
    def context_limit(self) -> int:
        """Positions past the learned table have no row to add: at most n_positions tokens."""
        return min(MAX_CONTEXT_TOKENS, self.config.n_positions)

    @property
    def text_limit(self) -> int:
        """A scored text, too, is at most n_positions tokens."""
        return min(MAX_SCORED_TOKENS, self.config.n_positions)

    @property
    def final_norm(self) -> FinalNorm:
        """ln_f, the LayerNorm the head reads the stream through (the lens and attribution)."""
        weights = self.weights
        return FinalNorm(
            "LayerNorm", weights.ln_f_weight, self.config.layer_norm_epsilon, weights.ln_f_bias
        )


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
    saved_as = ", ".join(sorted({number_format(a) for a in state.values() if a.ndim == 2}))
    weights = GPT2Weights.from_state_dict(state, config, str(folder))
    del state
    return GPT2Model.loaded(start, config=config, weights=weights, tokenizer=tokenizer,
                            path=folder, saved_as=saved_as,
                            chat_template=read_chat_template(folder))  # fmt: skip
