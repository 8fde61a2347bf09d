"""A loaded llama-style decoder (config, weights, tokenizer) and ``load_llama``, which reads one
from a GGUF file or a Hugging Face directory."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attention_core.logit_lens import FinalNorm

from ..chat import ChatTemplate, read_chat_template
from ..decoder import DecoderModel
from ..loading import ModelFileError
from .config import LlamaConfig, parameter_count
from .files import BFLOAT16, LLMLocation, find_llm, location_of, read_gguf, read_hf_dir
from .prompt import gguf_tokenizer
from .weights import LlamaWeights

__all__ = ["LlamaModel", "load_llama"]


@dataclass(frozen=True, eq=False)
class LlamaModel(DecoderModel):
    """A loaded decoder: config, weights (bfloat16, float16 or float32), a
    ``tokenizers.Tokenizer``, and the chat template its files carry (None for a base model)."""

    config: LlamaConfig
    weights: LlamaWeights
    location: LLMLocation | None = None

    @property
    def parameter_count(self) -> int:
        """Learned numbers in the checkpoint, a tied head counted once (from the config)."""
        return parameter_count(self.config)

    @property
    def eos_token_id(self) -> int:
        return self.config.eos_token_id if self.config.eos_token_id is not None else 2

    @property
    def final_norm(self) -> FinalNorm:
        """The RMSNorm the head reads the stream through (the lens and attribution)."""
        return FinalNorm("RMSNorm", self.weights.final_norm, self.config.rms_norm_eps)


def load_llama(
    path: Path | str | None = None,
    *,
    allow_download: bool = False,
    weights_dtype: np.dtype | type | str = BFLOAT16,
    progress: Callable[[int, int], None] | None = None,
    max_parameters: int | None = None,
) -> LlamaModel:
    """Load a decoder (SmolLM2 by default; a Llama or Qwen2 checkpoint given its ``path``) from
    a ``.gguf`` file or a Hugging Face directory (found by ``find_llm`` when ``path`` is None).
    Raises ``ModelNotFoundError`` with the install command, or ``ModelFileError`` for a damaged
    file or a model our code does not run; both are ``AttentionInputError``.
    ``progress(done, total)`` follows the GGUF file's tensors as they are unpacked. A model of
    more than ``max_parameters`` parameters (``config.parameter_count``) is refused from its
    config, before any weight is read.
    """
    start = time.perf_counter()
    location = find_llm(allow_download=allow_download) if path is None else location_of(path)
    source = str(location.path)

    def check(raw_config: dict[str, Any]) -> None:
        # Refusals come from the config alone: no weight is read for a model we would refuse.
        count = parameter_count(LlamaConfig.from_dict(raw_config, source=source))
        if max_parameters is not None and count > max_parameters:
            raise ModelFileError(
                f"{source} holds {count:,} parameters (counted from its configuration), more "
                f"than the {max_parameters:,} this app runs: choose a smaller checkpoint."
            )

    if location.layout == "gguf":
        raw_config, state, spec, template, file_formats = read_gguf(
            location.path, weights_dtype, progress, check
        )
        tokenizer = gguf_tokenizer(spec)
        if template is not None:
            template = ChatTemplate(
                template,
                _token_text(tokenizer, raw_config.get("bos_token_id")),
                _token_text(tokenizer, raw_config.get("eos_token_id")),
            )
    else:
        raw_config, state, tokenizer, file_formats = read_hf_dir(location.path, check)
        template = read_chat_template(location.path)
    config = LlamaConfig.from_dict(raw_config, source=source)
    weights = LlamaWeights.from_state_dict(state, config, weights_dtype, str(location.path))
    del state
    parts = {"tokenizer": tokenizer, "location": location, "chat_template": template}
    return LlamaModel.loaded(start, config=config, weights=weights, saved_as=file_formats, **parts)


def _token_text(tokenizer: Any, token_id: object) -> str:
    """A special token's text, as a chat template names it (``bos_token``); "" for none."""
    token = tokenizer.id_to_token(int(token_id)) if isinstance(token_id, int) else None
    return token or ""
