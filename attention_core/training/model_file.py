"""A trained model as a file TransformerLens loads: an `.npz` of its state dict and its config.

    data = to_npz(config, params, about)      bytes of an .npz
    model = from_npz(data)                     a ModelFile, every array and name checked

The arrays sit under `HookedTransformer`'s state-dict names (`embed.W_E`, `blocks.0.attn.W_Q`,
…), with the buffers it keeps beside the weights (`blocks.{l}.attn.mask`, the causal mask,
and `blocks.{l}.attn.IGNORE`, the score a masked key gets), so that

    import json, numpy as np, torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    file = np.load("attention-only.npz")
    model = HookedTransformer(HookedTransformerConfig(**json.loads(str(file["config.json"]))))
    model.load_state_dict({k: torch.from_numpy(file[k]) for k in file.files
                           if not k.endswith(".json")})

gives the same logits. `config.json` holds the `HookedTransformerConfig` arguments;
`about.json` what this app knows of the run (its settings, the steps taken). No pickles: the
file is read with `allow_pickle=False`, so a file from a stranger can hold numbers and text only.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..validation import AttentionInputError
from .attn_only import AttnOnlyConfig, parameter_shapes
from .run import LIMITS

__all__ = ["MAX_FILE_BYTES", "ModelFile", "from_npz", "to_npz"]

MAX_FILE_BYTES = 32 * 2**20
CONFIG = "config.json"
ABOUT = "about.json"
# What TransformerLens's attention keeps as buffers: its causal mask (empty in 3.9, which builds
# it at each forward; a full one loads there too) and the value a masked score becomes.
IGNORE = -np.inf


@dataclass(frozen=True, eq=False)
class ModelFile:
    """What an .npz held: the model's config, its parameters (TransformerLens names, float32),
    and what the app wrote about the run (empty for a file from elsewhere)."""

    config: AttnOnlyConfig
    params: dict[str, np.ndarray]
    about: dict[str, Any]


def _buffers(config: AttnOnlyConfig) -> dict[str, np.ndarray]:
    causal = np.tril(np.ones((config.n_ctx, config.n_ctx), dtype=bool))
    buffers = {}
    for layer in range(config.n_layers):
        buffers[f"blocks.{layer}.attn.mask"] = causal
        buffers[f"blocks.{layer}.attn.IGNORE"] = np.array(IGNORE, dtype=np.float32)
    return buffers


def to_npz(
    config: AttnOnlyConfig, params: Mapping[str, np.ndarray], about: Mapping[str, Any]
) -> bytes:
    """The .npz of the module docstring: the parameters as float32, the buffers, the configs."""
    arrays = {name: np.asarray(params[name], dtype=np.float32) for name in parameter_shapes(config)}
    arrays |= _buffers(config)
    arrays[CONFIG] = np.array(json.dumps(config.transformer_lens()))
    arrays[ABOUT] = np.array(json.dumps(dict(about)))
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)
    return out.getvalue()


def _refuse(reason: str) -> AttentionInputError:
    return AttentionInputError(
        f"This file is not an attention-only model saved by this page: {reason} Download one "
        "from “Download the model” after a run."
    )


def from_npz(data: bytes) -> ModelFile:
    """The model in `data`, or an AttentionInputError that says what is wrong with the file."""
    if len(data) > MAX_FILE_BYTES:
        raise _refuse(
            f"it is {len(data) / 2**20:.1f} MB, more than the {MAX_FILE_BYTES // 2**20} MB a "
            "model here can be."
        )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as file:
            arrays = {name: file[name] for name in file.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError):
        raise _refuse("it is not an .npz archive of arrays.") from None
    if CONFIG not in arrays:
        raise _refuse(f"it has no {CONFIG}.")
    try:
        settings = json.loads(str(arrays[CONFIG]))
        about = json.loads(str(arrays.get(ABOUT, "{}")))
        if not isinstance(settings, dict) or not isinstance(about, dict):
            raise TypeError
        config = _config(settings)
    except (ValueError, TypeError, KeyError) as error:
        detail = str(error) if isinstance(error, AttentionInputError) else ""
        raise _refuse(
            f"its {CONFIG} is not an attention-only model's config. {detail}".strip()
        ) from None
    params = {}
    for name, shape in parameter_shapes(config).items():
        if name not in arrays:
            raise _refuse(f"it has no {name}.")
        value = arrays[name]
        if value.shape != shape or not np.issubdtype(value.dtype, np.floating):
            raise _refuse(f"its {name} has shape {value.shape} ({value.dtype}), not {shape}.")
        if not np.isfinite(value).all():
            raise _refuse(f"its {name} holds NaN or infinity.")
        params[name] = value.astype(np.float32)
    return ModelFile(config, params, about)


def _config(settings: Mapping[str, Any]) -> AttnOnlyConfig:
    """The AttnOnlyConfig of a HookedTransformerConfig's arguments, if it is one this app runs."""
    if settings.get("attn_only") is not True or settings.get("normalization_type") is not None:
        raise AttentionInputError("it must be attn_only, with no normalization.")
    if settings.get("positional_embedding_type", "standard") != "standard":
        raise AttentionInputError("its positions must be learned (“standard”).")
    config = AttnOnlyConfig(
        settings["n_layers"], settings["n_heads"], settings["d_model"], settings["d_vocab"],
        settings["n_ctx"],
    )  # fmt: skip
    if settings.get("d_head", config.d_head) != config.d_head:
        raise AttentionInputError("its d_head must be d_model / n_heads.")
    for name in ("n_layers", "n_heads", "d_model", "d_vocab", "n_ctx"):
        lo, hi = LIMITS[name]
        if not lo <= getattr(config, name) <= hi:
            raise AttentionInputError(
                f"its {name} = {getattr(config, name)} is past this page's {lo}..{hi}."
            )
    return config
