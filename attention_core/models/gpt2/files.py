"""Read a GPT-2 checkpoint from a Hugging Face folder: what ``save_pretrained`` writes, or a copy
of the Hub repository ``openai-community/gpt2`` (or ``distilgpt2``, ``gpt2-medium``…).

    config.json          the architecture (``config.GPT2Config``)
    model.safetensors    the weights: float32, float16 or bfloat16 (kept as its bits, uint16,
                         by ``loading.read_weights``); or model.safetensors.index.json and the
                         shards it names
    tokenizer.json       the byte-level BPE tokenizer, read with the ``tokenizers`` library

safetensors and tokenizers are imported when a folder is read, never at import time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..loading import ModelFileError, ModelNotFoundError, open_tokenizer, read_weights

__all__ = ["CONFIG", "GPT2_FILES", "TOKENIZER", "check_folder", "read_tensors", "read_tokenizer"]

CONFIG, WEIGHTS, INDEX, TOKENIZER = (
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
)
GPT2_FILES = (CONFIG, WEIGHTS, TOKENIZER)


def check_folder(path: Path | str) -> Path:
    """``path`` as a folder holding a GPT-2 checkpoint's three files, or a ``ModelNotFoundError``
    saying which are missing."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ModelNotFoundError(
            f"{folder} is not a folder: a GPT-2 checkpoint is a folder holding "
            f"{', '.join(GPT2_FILES)} (what save_pretrained writes)."
        )
    missing = [name for name in (CONFIG, TOKENIZER) if not (folder / name).is_file()]
    hint = ""
    if not (folder / WEIGHTS).is_file() and not (folder / INDEX).is_file():
        missing.insert(0, f"{WEIGHTS} (its weights)")
        other = sorted(
            p.name for pattern in ("*.bin", "*.h5", "*.msgpack") for p in folder.glob(pattern)
        )
        if other:
            hint = (
                f" It holds {', '.join(other)}, a format this code does not read: save the "
                "model again with save_pretrained, which writes safetensors."
            )
    if missing:
        raise ModelNotFoundError(
            f"The folder {folder} has no {' and no '.join(missing)}: a GPT-2 checkpoint needs "
            f"{', '.join(GPT2_FILES)}, as save_pretrained writes them.{hint}"
        )
    return folder


def read_tensors(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint by name: one file, or the shards an index names."""
    if (folder / WEIGHTS).is_file():
        return read_weights(folder / WEIGHTS)
    try:
        shards = sorted(set(json.loads((folder / INDEX).read_text())["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelFileError(
            f"The weight index {folder / INDEX} cannot be read ({exc}): save the model again."
        ) from exc
    state: dict[str, np.ndarray] = {}
    for shard in shards:
        state.update(read_weights(folder / shard))
    return state


def read_tokenizer(path: Path) -> Any:
    """tokenizer.json as a ``tokenizers.Tokenizer`` giving exactly the text's tokens: no padding,
    no truncation (the forward pass says when a text is longer than the model's positions)."""
    tokenizer = open_tokenizer(path)
    tokenizer.no_truncation()
    return tokenizer
