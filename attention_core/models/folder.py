"""A checkpoint folder as Hugging Face's ``save_pretrained`` writes it, whatever the family:
config.json, model.safetensors (or model.safetensors.index.json and its shards), tokenizer.json.

    check_folder(path, family)    the folder, or a ModelNotFoundError naming the missing files
    read_tensors(folder)          every tensor by name, from one file or from the shards
    saved_matrix_format(folder)   "float32", "float16" or "bfloat16", from the headers alone
    hub_folder(repo_id, check, …) a Hub repository's files in huggingface_hub's cache (fetched
                                  if allowed), config.json checked before any weight is fetched
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .loading import (
    CONFIG_FILE,
    INDEX_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    ModelFileError,
    ModelNotFoundError,
    read_config,
    read_weights,
    safetensors_header,
)

__all__ = ["check_folder", "hub_folder", "read_tensors", "saved_matrix_format"]


def saved_matrix_format(folder: Path | str) -> str:
    """How a Hugging Face folder's checkpoint stores its matrices, "float32", "float16" or
    "bfloat16", read from the safetensors headers alone (the first shard's, when sharded)."""
    folder = Path(folder)
    path = folder / WEIGHTS_FILE
    if not path.is_file():
        try:
            path = folder / min(
                json.loads((folder / INDEX_FILE).read_text())["weight_map"].values()
            )
            _size, header = safetensors_header(path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelFileError(f"The weights in {folder} cannot be read ({exc}).") from exc
    else:
        try:
            _size, header = safetensors_header(path)
        except (OSError, ValueError) as exc:
            raise ModelFileError(f"The weights file {path} cannot be read ({exc}).") from exc
    kinds = {
        info.get("dtype")
        for name, info in header.items()
        if name != "__metadata__" and isinstance(info, dict) and len(info.get("shape", ())) == 2
    }
    named = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
    return next((named[k] for k in ("BF16", "F16", "F32") if k in kinds), "float32")


def check_folder(path: Path | str, family: str) -> Path:
    """``path`` as a folder holding a checkpoint as ``save_pretrained`` writes it (config.json,
    model.safetensors or its shards, tokenizer.json), or a ``ModelNotFoundError`` saying which
    files are missing; ``family`` names the kind of model in the message ("GPT-2")."""
    folder = Path(path).expanduser()
    needs = f"{CONFIG_FILE}, {WEIGHTS_FILE} and {TOKENIZER_FILE}"
    if not folder.is_dir():
        raise ModelNotFoundError(
            f"{folder} is not a folder: a {family} checkpoint is a folder holding {needs} "
            "(what save_pretrained writes)."
        )
    has_weights = (folder / WEIGHTS_FILE).is_file() or (folder / INDEX_FILE).is_file()
    missing = [
        name
        for name, there in (
            (CONFIG_FILE, (folder / CONFIG_FILE).is_file()),
            (f"{WEIGHTS_FILE} (its weights)", has_weights),
            (TOKENIZER_FILE, (folder / TOKENIZER_FILE).is_file()),
        )
        if not there
    ]
    hint = ""
    other = sorted(
        p.name for pattern in ("*.bin", "*.h5", "*.msgpack") for p in folder.glob(pattern)
    )
    if not has_weights and other:
        hint = (
            f" It holds {', '.join(other)}, a format this code does not read: save the model "
            "again with save_pretrained, which writes safetensors."
        )
    if missing:
        raise ModelNotFoundError(
            f"The folder {folder} has no {' and no '.join(missing)}: a {family} checkpoint "
            f"needs {needs}, as save_pretrained writes them.{hint}"
        )
    return folder


def read_tensors(folder: Path | str) -> dict[str, np.ndarray]:
    """Every tensor of a Hugging Face folder's checkpoint by name: model.safetensors, or the
    shards its model.safetensors.index.json names (save_pretrained shards a large model)."""
    folder = Path(folder)
    if (folder / WEIGHTS_FILE).is_file():
        return read_weights(folder / WEIGHTS_FILE)
    try:
        shards = sorted(set(json.loads((folder / INDEX_FILE).read_text())["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelFileError(
            f"The weight index {folder / INDEX_FILE} cannot be read ({exc}): save the model again."
        ) from exc
    state: dict[str, np.ndarray] = {}
    for shard in shards:
        state.update(read_weights(folder / shard))
    return state


def hub_folder(
    repo_id: str, check: Callable[[dict[str, Any], str], object], allow_download: bool
) -> Path:
    """The local folder of the Hub repository ``repo_id``'s checkpoint files, each taken from
    huggingface_hub's cache when it holds it and downloaded (if allowed) when not; config.json
    first, so that ``check(config, where)`` refuses a model before its weights are fetched."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ModelNotFoundError(
            f"{repo_id} is a Hugging Face Hub id, and fetching it needs the package "
            "huggingface_hub, which is not installed."
        ) from None

    def fetch(name: str) -> Path:
        try:
            return Path(hf_hub_download(repo_id, name, local_files_only=True))
        except Exception:  # not in the cache: the network, if this server may use it
            if not allow_download:
                raise ModelNotFoundError(
                    f"{repo_id} is not in this machine's Hugging Face cache, and cannot be "
                    "downloaded here (no connection to the Hub, or downloads are off)."
                ) from None
        try:
            return Path(hf_hub_download(repo_id, name))
        except Exception as exc:  # network, HTTP and cache errors all mean "not available"
            raise ModelNotFoundError(
                f"{name} of the Hugging Face Hub repository {repo_id} could not be fetched "
                f"({type(exc).__name__}): check the id and this machine's connection."
            ) from exc

    config_path = fetch(CONFIG_FILE)
    check(read_config(config_path), f"{repo_id}/{CONFIG_FILE}")
    try:
        fetch(WEIGHTS_FILE)
    except ModelNotFoundError:
        index = read_config(fetch(INDEX_FILE))  # a sharded checkpoint: its index, its shards
        for shard in sorted(set((index.get("weight_map") or {}).values())):
            fetch(shard)
    fetch(TOKENIZER_FILE)
    # hf_hub_download puts every file of one revision in the same snapshot folder.
    return config_path.parent
