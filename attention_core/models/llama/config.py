"""A decoder checkpoint's architecture numbers, read from its config (or a GGUF's metadata).

One forward pass runs two families, as Hugging Face's ``modeling_qwen2.py`` is
``modeling_llama.py`` with three biases: the family is named by ``model_type``.

    llama   RMSNorm, RoPE (rotate_half), grouped-query attention, SwiGLU; no biases
    qwen2   the same, plus biases on the q, k and v projections (none on o)

RoPE runs unscaled, or with Llama 3.1's "llama3" scaling (Llama 3.1 and 3.2 checkpoints).
What the forward does not run is refused here, by name, before any weight is read: another
``model_type``, another RoPE scaling (``rope_scaling`` / ``rope_parameters.rope_type``), llama's
``attention_bias`` or ``mlp_bias``, an activation other than SiLU, Qwen2's sliding window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..checkpoint import config_errors, optional_id
from ..decoder import MAX_SCORED_TOKENS
from ..loading import ModelFileError, supported_activation

__all__ = ["SUPPORTED_FAMILIES", "LlamaConfig", "parameter_count"]

# model_type -> what the family adds to llama's architecture.
SUPPORTED_FAMILIES = {
    "llama": "no biases",
    "qwen2": "biases on q, k and v",
    "mistral": "a sliding window, run when it is at least as long as any text read here",
}
# The most tokens a pass reads here (MAX_SCORED_TOKENS): a sliding window at least this long
# hides no key, so the model computes exactly as with full causal attention.
LONGEST_PASS = MAX_SCORED_TOKENS


@dataclass(frozen=True)
class LlamaConfig:
    """Architecture numbers. SmolLM2-135M: vocab 49152, d_model 576, 30 layers, 9 query heads
    sharing 3 KV heads (d_head 64), FFN 1536, RoPE base 100000, RMSNorm eps 1e-5, tied head.

    head_dim             d_head: the config's ``head_dim`` when given, else d_model / heads
    qkv_bias             q, k and v projections carry biases (Qwen2)
    tie_word_embeddings  the output head is the embedding matrix; None when the file does not
                         say (a GGUF without an output tensor says True): the weights decide
    rope_llama3          Llama 3.1's RoPE scaling (factor, low_freq_factor, high_freq_factor,
                         original_max_position_embeddings), or None: unscaled
    """

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
    model_type: str = "llama"
    head_dim: int = None  # type: ignore[assignment]  # filled in: d_model / heads
    qkv_bias: bool = False
    tie_word_embeddings: bool | None = None
    rope_llama3: tuple[float, float, float, float] | None = None

    def __post_init__(self) -> None:
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)

    @property
    def group_size(self) -> int:
        """Query heads per KV head (H / KV)."""
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_dict(cls, config: dict[str, Any], source: str = "config.json") -> LlamaConfig:
        family = config.get("model_type", "llama")
        if family not in SUPPORTED_FAMILIES:
            raise ModelFileError(
                f"{source} describes a {family!r} model; our decoder code runs "
                f"{' and '.join(repr(name) for name in SUPPORTED_FAMILIES)} models only."
            )
        _refuse_what_the_forward_does_not_run(config, family, source)
        scaling = _rope_scaling(config)
        with config_errors(source, family):
            made = cls(
                vocab_size=int(config["vocab_size"]),
                hidden_size=int(config["hidden_size"]),
                num_hidden_layers=int(config["num_hidden_layers"]),
                num_attention_heads=int(config["num_attention_heads"]),
                num_key_value_heads=int(
                    config.get("num_key_value_heads") or config["num_attention_heads"]
                ),
                intermediate_size=int(config["intermediate_size"]),
                rope_theta=float(_rope_theta(config)),
                rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
                bos_token_id=optional_id(config.get("bos_token_id")),
                eos_token_id=optional_id(config.get("eos_token_id")),
                model_type=family,
                head_dim=None if config.get("head_dim") is None else int(config["head_dim"]),
                qkv_bias=family == "qwen2",
                tie_word_embeddings=(
                    None
                    if config.get("tie_word_embeddings") is None
                    else bool(config["tie_word_embeddings"])
                ),
                rope_llama3=None
                if scaling is None
                else (
                    float(scaling["factor"]),
                    float(scaling["low_freq_factor"]),
                    float(scaling["high_freq_factor"]),
                    # transformers falls back on the model's context when it is not given
                    float(
                        scaling.get("original_max_position_embeddings")
                        or config["max_position_embeddings"]
                    ),
                ),
            )
        if made.head_dim % 2 or made.num_attention_heads % made.num_key_value_heads:
            raise ModelFileError(
                f"{source}: d_head {made.head_dim} is odd (RoPE turns pairs), or "
                f"{made.num_attention_heads} heads do not group into {made.num_key_value_heads} "
                "KV heads."
            )
        if config.get("head_dim") is None and made.hidden_size % made.num_attention_heads:
            raise ModelFileError(
                f"{source}: {made.num_attention_heads} heads do not split d_model "
                f"{made.hidden_size} evenly, and the configuration gives no head_dim."
            )
        return made


def parameter_count(config: LlamaConfig) -> int:
    """How many numbers the checkpoint holds, from its config alone (no weight read), counted
    as ``sum(p.numel() for p in model.parameters())`` counts transformers' model: a tied head
    once. A config that does not say whether the head is tied counts it untied, as
    transformers' default builds it, so a cap errs on the safe side."""
    d, dh, ff = config.hidden_size, config.head_dim, config.intermediate_size
    q_rows, kv_rows = config.num_attention_heads * dh, config.num_key_value_heads * dh
    attention = d * q_rows + 2 * d * kv_rows + q_rows * d
    if config.qkv_bias:
        attention += q_rows + 2 * kv_rows
    layer = 2 * d + attention + 3 * d * ff  # two RMSNorm gains, attention, gate/up/down
    embedding = config.vocab_size * d
    head = 0 if config.tie_word_embeddings else embedding
    return embedding + config.num_hidden_layers * layer + d + head


def _rope_theta(config: dict[str, Any]) -> Any:
    theta = config.get("rope_theta")
    if theta is None:  # transformers >= 5 nests it under rope_parameters
        theta = (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    return theta


def _rope_scaling(config: dict[str, Any]) -> dict[str, Any] | None:
    """The RoPE scaling's settings with its type under "rope_type" (transformers 4's
    ``rope_scaling``, or 5's ``rope_parameters``), or None when RoPE is unscaled."""
    for key in ("rope_scaling", "rope_parameters"):
        scaling = config.get(key)
        if isinstance(scaling, dict):
            rope_type = scaling.get("rope_type", scaling.get("type"))
            if rope_type not in (None, "default"):
                return {**scaling, "rope_type": rope_type}
    return None


def _refuse_what_the_forward_does_not_run(config: dict[str, Any], family: str, source: str):
    """A ModelFileError naming the first setting of ``config`` that our forward would ignore
    (and so compute other numbers than the checkpoint's own code)."""
    scaling = _rope_scaling(config)
    if scaling is not None and scaling["rope_type"] != "llama3":
        raise ModelFileError(
            f"{source} scales RoPE ({scaling['rope_type']!r}); our decoder code runs unscaled "
            "RoPE or Llama 3's 'llama3' scaling only."
        )
    partial = (config.get("rope_parameters") or {}).get("partial_rotary_factor")
    partial = config.get("partial_rotary_factor", partial)
    if partial not in (None, 1, 1.0):
        raise ModelFileError(
            f"{source} rotates a part of each head ({partial!r}); our decoder code rotates "
            "whole heads only (partial_rotary_factor 1)."
        )
    if family == "llama" and (config.get("attention_bias") or config.get("mlp_bias")):
        which = "attention_bias" if config.get("attention_bias") else "mlp_bias"
        raise ModelFileError(
            f"{source} sets {which}: our llama code runs projections without biases (the "
            "qwen2 family's q, k and v biases are the only ones it adds)."
        )
    supported_activation(
        config, "hidden_act", ("silu",), source=source, code="our decoder code", what="SwiGLU"
    )
    window = config.get("sliding_window")
    if family == "mistral" and window is not None and int(window) < LONGEST_PASS:
        raise ModelFileError(
            f"{source} slides a window of {window} tokens; our decoder code runs full causal "
            f"attention, the same as a window of at least {LONGEST_PASS} (the most it reads)."
        )
    if config.get("use_sliding_window"):
        raise ModelFileError(
            f"{source} turns on a sliding attention window; our decoder code runs full causal "
            "attention only (use_sliding_window false)."
        )
