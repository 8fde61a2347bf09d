"""A llama checkpoint's architecture numbers, read from its config (or a GGUF's metadata)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..loading import ModelFileError

__all__ = ["LlamaConfig"]


@dataclass(frozen=True)
class LlamaConfig:
    """Architecture numbers. SmolLM2-135M: vocab 49152, d_model 576, 30 layers, 9 query heads
    sharing 3 KV heads (d_head 64), FFN 1536, RoPE base 100000, RMSNorm eps 1e-5, tied head."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def group_size(self) -> int:
        """Query heads per KV head (H / KV)."""
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_dict(cls, config: dict[str, Any], source: str = "config.json") -> LlamaConfig:
        if config.get("model_type", "llama") != "llama":
            raise ModelFileError(
                f"{source} describes a {config.get('model_type')!r} model; the decoder page runs "
                "llama-style models only."
            )
        theta = config.get("rope_theta")
        if theta is None:  # transformers >= 5 nests it under rope_parameters
            theta = (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        try:
            made = cls(
                vocab_size=int(config["vocab_size"]),
                hidden_size=int(config["hidden_size"]),
                num_hidden_layers=int(config["num_hidden_layers"]),
                num_attention_heads=int(config["num_attention_heads"]),
                num_key_value_heads=int(
                    config.get("num_key_value_heads", config["num_attention_heads"])
                ),
                intermediate_size=int(config["intermediate_size"]),
                rope_theta=float(theta),
                rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
                bos_token_id=_optional_id(config.get("bos_token_id")),
                eos_token_id=_optional_id(config.get("eos_token_id")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(
                f"{source} is not a complete llama configuration ({exc})."
            ) from exc
        if made.hidden_size % made.num_attention_heads or (
            made.num_attention_heads % made.num_key_value_heads
        ):
            raise ModelFileError(
                f"{source}: {made.num_attention_heads} heads do not split d_model "
                f"{made.hidden_size} evenly, or do not group into {made.num_key_value_heads} "
                "KV heads."
            )
        return made


def _optional_id(value: Any) -> int | None:
    if isinstance(value, list):  # some configs list several end-of-sequence ids
        value = value[0] if value else None
    return None if value is None else int(value)
