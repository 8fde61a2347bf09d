"""A BERT encoder's architecture numbers, read and checked from its ``config.json``."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from attention_core.models.loading import CONFIG_FILE, ModelFileError, supported_activation

__all__ = ["BertConfig", "parameter_count"]


@dataclass(frozen=True)
class BertConfig:
    """The architecture numbers from a Hugging Face BERT ``config.json``.

    all-MiniLM-L6-v2: vocab 30522, d_model 384, 6 layers, 12 heads (d_head 32), d_ff 1536,
    512 positions, 2 token types, layer-norm eps 1e-12, GELU (erf).
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str = "gelu"
    pad_token_id: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, config: dict[str, Any], source: str = CONFIG_FILE) -> BertConfig:
        """Build and check a config from the parsed JSON; problems raise ``ModelFileError``."""
        if config.get("model_type", "bert") != "bert":
            raise ModelFileError(
                f"{source} describes a {config.get('model_type')!r} model; this page runs BERT "
                "encoders only (model_type 'bert')."
            )
        required = [f.name for f in fields(cls) if f.name not in ("hidden_act", "pad_token_id")]
        missing = [name for name in required if name not in config]
        if missing:
            raise ModelFileError(
                f"{source} has no {', '.join(missing)}: it is not a complete BERT configuration."
            )
        values: dict[str, Any] = {}
        for name in [*required, "pad_token_id"]:
            if name not in config:
                continue
            value = config[name]
            if name == "layer_norm_eps":
                ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
                ok = ok and (value > 0 or name == "pad_token_id")
            if not ok:
                raise ModelFileError(
                    f"{source}: {name} is {value!r}, which is not a valid size. The file is "
                    "damaged or not a BERT configuration."
                )
            values[name] = float(value) if name == "layer_norm_eps" else int(value)
        act = supported_activation(
            config,
            "hidden_act",
            ("gelu",),
            source=source,
            code="this BERT code",
            what="the exact GELU, with erf",
        )
        position_type = config.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ModelFileError(
                f"{source} uses {position_type!r} position embeddings; this implementation "
                "supports BERT's learned 'absolute' position embeddings only."
            )
        if values["hidden_size"] % values["num_attention_heads"]:
            raise ModelFileError(
                f"{source}: hidden_size {values['hidden_size']} is not divisible by "
                f"num_attention_heads {values['num_attention_heads']}, so the heads cannot "
                "split it evenly."
            )
        return cls(hidden_act=act, **values)


def parameter_count(config: BertConfig) -> int:
    """The numbers the encoder computes with, from its config alone (before any weight is
    read); the pooler, which no page uses, is not counted.

        embeddings (V + P + T)·d + LayerNorm 2d
        + L · (q, k, v, o: 4·(d·d + d) + LayerNorm 2d + d·f + f + f·d + d + LayerNorm 2d)
    """
    d, f = config.hidden_size, config.intermediate_size
    table_rows = config.vocab_size + config.max_position_embeddings + config.type_vocab_size
    layer = 4 * (d * d + d) + 2 * d + d * f + f + f * d + d + 2 * d
    return table_rows * d + 2 * d + config.num_hidden_layers * layer
