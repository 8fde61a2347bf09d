"""A loaded llama-style decoder (config, weights, tokenizer) and ``load_llama``, which reads one
from a GGUF file or a Hugging Face directory."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..chat import ChatTemplate, read_chat_template
from ..decoder import DecoderModel
from ..loading import ModelFileError
from .config import LlamaConfig, parameter_count
from .files import BFLOAT16, LLMLocation, find_llm, location_of, read_gguf, read_hf_dir
from .prompt import MAX_PROMPT_TOKENS, Prompt, gguf_tokenizer, tokenize_prompt
from .weights import LlamaWeights

__all__ = ["LlamaModel", "load_llama"]


@dataclass(frozen=True, eq=False)
class LlamaModel(DecoderModel):
    """A loaded decoder: config, weights (bfloat16, float16 or float32), a
    ``tokenizers.Tokenizer``, and the chat template its files carry (None for a base model)."""

    config: LlamaConfig
    weights: LlamaWeights
    location: LLMLocation | None = None
    chat_template: ChatTemplate | None = field(default=None, repr=False)

    @property
    def parameter_count(self) -> int:
        """Learned numbers in the checkpoint, a tied head counted once (from the config)."""
        return parameter_count(self.config)

    @property
    def eos_token_id(self) -> int:
        return self.config.eos_token_id if self.config.eos_token_id is not None else 2

    def chat(self, user: str) -> str:
        """``user``'s turn framed by this model's chat template, up to the assistant's header.
        A ModelFileError for a model saved without one (a base model reads raw text)."""
        if self.chat_template is None:
            raise ModelFileError("This model was saved without a chat template: it reads raw text.")
        return self.chat_template.render(user)

    def prompt(
        self, text: str, *, chat: bool = False, max_tokens: int = MAX_PROMPT_TOKENS
    ) -> Prompt:
        """``tokenize_prompt`` with this model's tokenizer, in its chat template if ``chat``."""
        frame = self.chat if chat else None
        return tokenize_prompt(self.tokenizer, text, chat=frame, max_tokens=max_tokens)


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
    return LlamaModel(
        config=config,
        weights=weights,
        tokenizer=tokenizer,
        location=location,
        load_seconds=time.perf_counter() - start,
        chat_template=template,
        saved_as=file_formats,
    )


def _token_text(tokenizer: Any, token_id: object) -> str:
    """A special token's text, as a chat template names it (``bos_token``); "" for none."""
    token = tokenizer.id_to_token(int(token_id)) if isinstance(token_id, int) else None
    return token or ""
