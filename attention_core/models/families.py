"""The model families our code runs, and any checkpoint of them opened by where it is.

    FAMILIES                     each family: its name, decoder or encoder, the ``model_type``
                                 values of its config.json, what it shows, how it counts its
                                 parameters and how it is loaded
    family_of(config)            the family of a parsed config.json, or a ``ModelFileError``
                                 naming the families that are supported
    checkpoint_kind(source)      "gguf", "folder" or "hub": how ``source`` names a checkpoint
    listed_checkpoints(text)     a server's comma-separated list of checkpoints, by name: a
                                 folder or file by its name without extension, a Hub id by the id
    open_checkpoint(source, …)   a ``.gguf`` file, a Hugging Face folder or a Hub id, loaded;
                                 refused from its config alone (before any weight is read, and
                                 before any weight is downloaded) when it is too large or of a
                                 family we do not run

Nothing is read at import: the families' loaders import what they need when they run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .bert import BertConfig, BertModel, load_bert
from .bert.config import parameter_count as bert_parameter_count
from .folder import hub_folder, saved_matrix_format
from .gpt2 import GPT2Model, load_gpt2
from .gpt2.config import GPT2Config
from .gpt2.config import parameter_count as gpt2_parameter_count
from .llama import LlamaConfig, LlamaModel, load_llama
from .llama import parameter_count as llama_parameter_count
from .loading import (
    BFLOAT16,
    CONFIG_FILE,
    ModelFileError,
    ModelNotFoundError,
    read_config,
)

__all__ = [
    "FAMILIES",
    "CheckpointKind",
    "Family",
    "checkpoint_kind",
    "checkpoint_name",
    "family_of",
    "family_of_model",
    "listed_checkpoints",
    "open_checkpoint",
    "parameter_count_of",
]

Model = LlamaModel | GPT2Model | BertModel
CheckpointKind = Literal["gguf", "folder", "hub"]
# A Hub id as the Hub spells one: owner/name, letters, digits, "-", "_" and ".", no "..".
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


@dataclass(frozen=True)
class Family:
    """One architecture our forward pass runs. ``count(config, source)`` is its parameter
    count from a parsed config.json; ``load(path, **options)`` reads a checkpoint of it."""

    name: str
    kind: Literal["decoder", "encoder"]
    model_types: tuple[str, ...]
    examples: str
    count: Callable[[dict[str, Any], str], int]
    load: Callable[..., Model]

    @property
    def label(self) -> str:
        return f"{self.name} ({self.examples})"


def _llama_count(config: dict[str, Any], source: str) -> int:
    return llama_parameter_count(LlamaConfig.from_dict(config, source=source))


def _gpt2_count(config: dict[str, Any], source: str) -> int:
    return gpt2_parameter_count(GPT2Config.from_dict(config, source=source))


def _bert_count(config: dict[str, Any], source: str) -> int:
    return bert_parameter_count(BertConfig.from_dict(config, source=source))


def _load_llama(
    path: Path, *, weights_dtype: Any = None, progress: Any = None, max_parameters: Any = None
) -> Model:
    if weights_dtype is None:
        # As the file stores them: a float32 checkpoint computes exactly as transformers does,
        # a 16-bit one takes half the memory, and GGUF's quantized blocks widen to bfloat16.
        saved = "bfloat16" if path.suffix == ".gguf" else saved_matrix_format(path)
        weights_dtype = {"float32": np.float32, "float16": "float16"}.get(saved, BFLOAT16)
    return load_llama(
        path,
        weights_dtype=weights_dtype,
        progress=progress,
        max_parameters=max_parameters,
    )


def _load_gpt2(path: Path, **_options: Any) -> Model:
    return load_gpt2(path)


def _load_bert(path: Path, **_options: Any) -> Model:
    return load_bert(path)


FAMILIES: tuple[Family, ...] = (
    Family("Llama", "decoder", ("llama",), "SmolLM2, Llama 3.2", _llama_count, _load_llama),
    Family("Qwen2", "decoder", ("qwen2",), "Qwen2, Qwen2.5", _llama_count, _load_llama),
    Family(
        "Mistral", "decoder", ("mistral",), "Mistral, no short window", _llama_count, _load_llama
    ),
    Family("Qwen3", "decoder", ("qwen3",), "Qwen3-0.6B", _llama_count, _load_llama),
    Family("SmolLM3", "decoder", ("smollm3",), "SmolLM3", _llama_count, _load_llama),
    Family("OLMo 2", "decoder", ("olmo2",), "OLMo 2", _llama_count, _load_llama),
    Family("Gemma 2", "decoder", ("gemma2",), "Gemma 2", _llama_count, _load_llama),
    Family(
        "Gemma 3",
        "decoder",
        ("gemma3_text", "gemma3"),
        "Gemma 3 270M, a Gemma 3's text part",
        _llama_count,
        _load_llama,
    ),
    Family("GPT-2", "decoder", ("gpt2",), "GPT-2, DistilGPT2", _gpt2_count, _load_gpt2),
    Family("BERT", "encoder", ("bert",), "BERT, MiniLM", _bert_count, _load_bert),
)


def supported() -> str:
    """The families in one phrase, for a refusal: "Llama (SmolLM2, …), Qwen2 (…) …"."""
    return ", ".join(family.label for family in FAMILIES)


def family_of(config: dict[str, Any], source: str = CONFIG_FILE) -> Family:
    """The family whose ``model_type`` the parsed config.json names."""
    model_type = config.get("model_type")
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    architecture = config.get("architectures") or [model_type]
    raise ModelFileError(
        f"{source} describes a {architecture[0]!r} model, an architecture this app does not "
        f"run: it runs {supported()}."
    )


def family_of_model(model: Model) -> Family:
    """The family of a loaded model."""
    if isinstance(model, BertModel):
        model_type = "bert"
    elif isinstance(model, GPT2Model):
        model_type = "gpt2"
    else:
        model_type = model.config.model_type
    return next(family for family in FAMILIES if model_type in family.model_types)


def parameter_count_of(model: Model) -> int:
    """The learned numbers of a loaded model, counted from its config (a tied head once)."""
    if isinstance(model, BertModel):
        return bert_parameter_count(model.config)
    return model.parameter_count


def checkpoint_kind(source: str) -> CheckpointKind:
    """How ``source`` names a checkpoint: a ``.gguf`` file, a folder, or a Hub id (owner/name,
    when no such folder exists here). Reads nothing but whether the folder exists."""
    text = source.strip()
    if text.endswith(".gguf"):
        return "gguf"
    if _HUB_ID.fullmatch(text) and ".." not in text and not Path(text).expanduser().exists():
        return "hub"
    return "folder"


def checkpoint_name(source: str) -> str:
    """The name a listed checkpoint goes by in a link (``?model=``): a Hub id as it is, a folder
    or file by its last part without the extension."""
    text = source.strip()
    if checkpoint_kind(text) == "hub":
        return text
    return Path(text.rstrip("/\\")).stem or text


def listed_checkpoints(text: str) -> dict[str, str]:
    """``{name: source}`` for a comma-separated list of folders, GGUF files and Hub ids (the
    first of two sources with one name keeps it)."""
    listed: dict[str, str] = {}
    for source in (part.strip() for part in text.split(",")):
        if source:
            listed.setdefault(checkpoint_name(source), source)
    return listed


def open_checkpoint(
    source: str,
    *,
    max_parameters: int | None = None,
    allow_download: bool = False,
    weights_dtype: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> Model:
    """Load the checkpoint ``source`` names (``checkpoint_kind``) with its family's code.

    A folder's (or a Hub repository's) config.json decides the family and the parameter
    count before any weight is read or downloaded; a GGUF file is a Llama-family decoder
    whose header says the same. ``allow_download`` lets a Hub id be fetched (into
    huggingface_hub's cache, which is read first, so a fetched model needs no network again).
    ``weights_dtype`` is how a Llama-family model stores its matrices (None: as the file
    stores them); the other families compute in float32. Raises ``ModelNotFoundError`` or
    ``ModelFileError`` (both ``AttentionInputError``).
    """
    options = {"weights_dtype": weights_dtype, "progress": progress,
               "max_parameters": max_parameters}  # fmt: skip
    kind = checkpoint_kind(source)
    if kind == "gguf":
        return _load_llama(Path(source).expanduser(), **options)

    def check(config: dict[str, Any], where: str) -> Family:
        family = family_of(config, where)
        count = family.count(config, where)
        if max_parameters is not None and count > max_parameters:
            raise ModelFileError(
                f"{source} holds {count:,} parameters (counted from its configuration), more "
                f"than the {max_parameters:,} this app runs: choose a smaller checkpoint."
            )
        return family

    if kind == "hub":
        folder = hub_folder(source, check, allow_download)
        family = check(read_config(folder / CONFIG_FILE), f"{source}/{CONFIG_FILE}")
    else:
        folder = Path(source).expanduser()
        if not (folder / CONFIG_FILE).is_file():
            raise ModelNotFoundError(
                f"{source} is neither a .gguf file nor a folder with a {CONFIG_FILE}: a "
                "checkpoint is what save_pretrained writes, or a GGUF file."
            )
        family = check(read_config(folder / CONFIG_FILE), str(folder / CONFIG_FILE))
    return family.load(folder, **options)
