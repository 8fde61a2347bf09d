"""A GPT-2 checkpoint's architecture numbers, read from its ``config.json``, and its size."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ..checkpoint import config_errors, optional_id
from ..loading import ModelFileError, supported_activation

__all__ = ["ACTIVATIONS", "GPT2Config", "parameter_count"]

# transformers' names for the MLP's activation that this code runs (models/layers.py has each).
ACTIVATIONS = ("gelu_new", "gelu")


@dataclass(frozen=True)
class GPT2Config:
    """Architecture numbers, named as in ``config.json``. GPT-2 small: vocab 50257, 1024
    learned positions, d_model (n_embd) 768, 12 layers of 12 heads (d_head 64), MLP 3072
    (4·n_embd), LayerNorm eps 1e-5, "gelu_new", tied head.

    ``layer_scaled`` is ``scale_attn_by_inverse_layer_idx``: layer l's scores are divided by
    l + 1 on top of √d_head (off in GPT-2, on in some of its descendants).
    """

    vocab_size: int
    n_positions: int
    n_embd: int
    n_layer: int
    n_head: int
    n_inner: int
    layer_norm_epsilon: float
    activation_function: str = "gelu_new"
    scale_attn_weights: bool = True
    layer_scaled: bool = False
    tie_word_embeddings: bool = True
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    # Every decoder family's names for the same numbers, as transformers' GPT2Config maps
    # them (``attribute_map``): what the pages and the shared pass code read.
    num_hidden_layers = property(attrgetter("n_layer"))
    num_attention_heads = property(attrgetter("n_head"))
    num_key_value_heads = property(attrgetter("n_head"))  # each query head its own K and V
    hidden_size = property(attrgetter("n_embd"))
    max_position_embeddings = property(attrgetter("n_positions"))
    group_size = 1  # query heads per KV head: none share (multi-head attention)

    def attention_scale(self, layer: int) -> float:
        """The factor layer ``layer``'s scores q·k are multiplied by before the softmax."""
        scale = self.head_dim**-0.5 if self.scale_attn_weights else 1.0
        return scale / (layer + 1) if self.layer_scaled else scale

    @classmethod
    def from_dict(cls, config: dict[str, Any], source: str = "config.json") -> GPT2Config:
        kind = config.get("model_type", "gpt2")
        if kind != "gpt2":
            raise ModelFileError(
                f"{source} describes a {kind!r} model, not a GPT-2 one (model_type 'gpt2')."
            )
        activation = supported_activation(
            config,
            "activation_function",
            ACTIVATIONS,
            source=source,
            code="this GPT-2 code",
            what="GELU, tanh-approximated or exact",
        )
        if config.get("add_cross_attention"):
            raise ModelFileError(
                f"{source} describes a GPT-2 with cross-attention (an encoder-decoder's "
                "decoder); this code runs the plain decoder only."
            )
        with config_errors(source, "GPT-2"):
            n_embd = int(config["n_embd"])
            inner = config.get("n_inner")
            made = cls(
                vocab_size=int(config["vocab_size"]),
                n_positions=int(config["n_positions"]),
                n_embd=n_embd,
                n_layer=int(config["n_layer"]),
                n_head=int(config["n_head"]),
                n_inner=4 * n_embd if inner is None else int(inner),
                layer_norm_epsilon=float(config.get("layer_norm_epsilon", 1e-5)),
                activation_function=activation,
                scale_attn_weights=bool(config.get("scale_attn_weights", True)),
                layer_scaled=bool(config.get("scale_attn_by_inverse_layer_idx", False)),
                tie_word_embeddings=bool(config.get("tie_word_embeddings", True)),
                bos_token_id=optional_id(config.get("bos_token_id")),
                eos_token_id=optional_id(config.get("eos_token_id")),
            )
        if min(made.vocab_size, made.n_positions, made.n_embd, made.n_layer, made.n_head) < 1:
            raise ModelFileError(f"{source} gives a GPT-2 size of zero or less.")
        if made.n_embd % made.n_head:
            raise ModelFileError(
                f"{source}: {made.n_head} heads do not split n_embd {made.n_embd} evenly."
            )
        return made


def parameter_count(config: GPT2Config) -> int:
    """The number of learned numbers a checkpoint of ``config`` holds, from the config alone
    (before any weight is read); the tied head is counted once, as the embedding.

        wte V·d + wpe P·d + L · (ln_1 2d + c_attn d·3d + 3d + c_proj d·d + d + ln_2 2d
                                 + c_fc d·f + f + c_proj f·d + d) + ln_f 2d  (+ lm_head V·d)
    """
    d, f, vocab = config.n_embd, config.n_inner, config.vocab_size
    attention = d * 3 * d + 3 * d + d * d + d
    mlp = d * f + f + f * d + d
    layer = 2 * d + attention + 2 * d + mlp
    head = 0 if config.tie_word_embeddings else vocab * d
    return vocab * d + config.n_positions * d + config.n_layer * layer + 2 * d + head
