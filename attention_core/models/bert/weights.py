"""A BERT encoder's weights, picked by name from a Hugging Face ``BertModel`` state dict,
checked against the config and kept read-only, every matrix in nn.Linear layout."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.models.checkpoint import TensorPicker
from attention_core.models.loading import WEIGHTS_FILE
from attention_core.multihead import MultiHeadParams

from .config import BertConfig

__all__ = [
    "WORD_TABLE",
    "BertEmbeddingWeights",
    "BertLayerWeights",
    "BertWeights",
    "LayerNormParams",
]

# The vocabulary's embedding table, as Hugging Face's BertModel names it.
WORD_TABLE = "embeddings.word_embeddings.weight"


@dataclass(frozen=True, eq=False)
class LayerNormParams:
    """γ (``weight``) and β (``bias``) of a LayerNorm, both `(d_model,)`."""

    weight: np.ndarray
    bias: np.ndarray


@dataclass(frozen=True, eq=False)
class BertEmbeddingWeights:
    """word `(vocab, d_model)`, position `(max_pos, d_model)`, token_type `(types, d_model)`."""

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    layer_norm: LayerNormParams


@dataclass(frozen=True, eq=False)
class BertLayerWeights:
    """One encoder layer, every matrix in nn.Linear layout (``y = x @ W.T + b``).

    attention            W_q, W_k, W_v, W_o `(d_model, d_model)` and their biases
    attention_norm       LayerNorm after the attention residual
    intermediate_weight  `(d_ff, d_model)`, intermediate_bias `(d_ff,)`
    output_weight        `(d_model, d_ff)`, output_bias `(d_model,)`
    output_norm          LayerNorm after the feed-forward residual
    """

    attention: MultiHeadParams
    attention_norm: LayerNormParams
    intermediate_weight: np.ndarray
    intermediate_bias: np.ndarray
    output_weight: np.ndarray
    output_bias: np.ndarray
    output_norm: LayerNormParams


@dataclass(frozen=True, eq=False)
class BertWeights:
    """All weights of a BERT encoder (the pooler is not used: the page shows token states)."""

    embeddings: BertEmbeddingWeights
    layers: tuple[BertLayerWeights, ...]

    @classmethod
    def from_state_dict(
        cls, state: dict[str, np.ndarray], config: BertConfig, source: str = WEIGHTS_FILE
    ) -> BertWeights:
        """Pick and check the tensors named like Hugging Face's ``BertModel`` state dict.

        Names may carry a ``bert.`` prefix (checkpoints saved from a task head). Every array is
        converted to float32 and made read-only, so a cached model cannot be changed by accident.
        """
        if state and all(name.startswith("bert.") for name in state if "embeddings" in name):
            state = {name.removeprefix("bert."): value for name, value in state.items()}
        d, d_ff = config.hidden_size, config.intermediate_size
        picker = TensorPicker(state, source)

        def take(name: str, shape: tuple[int, ...]) -> np.ndarray:
            out = picker.float32(name, shape, finite=True)
            # A stand-in lets the layers be built, so one load names every problem (check).
            return np.zeros(shape, dtype=np.float32) if out is None else out

        def norm(prefix: str) -> LayerNormParams:
            return LayerNormParams(take(f"{prefix}.weight", (d,)), take(f"{prefix}.bias", (d,)))

        embeddings = BertEmbeddingWeights(
            word=take(WORD_TABLE, (config.vocab_size, d)),
            position=take(
                "embeddings.position_embeddings.weight", (config.max_position_embeddings, d)
            ),
            token_type=take("embeddings.token_type_embeddings.weight", (config.type_vocab_size, d)),
            layer_norm=norm("embeddings.LayerNorm"),
        )
        layers = []
        for i in range(config.num_hidden_layers):
            p = f"encoder.layer.{i}"
            attn = f"{p}.attention.self"
            params = MultiHeadParams(
                w_q=take(f"{attn}.query.weight", (d, d)),
                w_k=take(f"{attn}.key.weight", (d, d)),
                w_v=take(f"{attn}.value.weight", (d, d)),
                w_o=take(f"{p}.attention.output.dense.weight", (d, d)),
                b_q=take(f"{attn}.query.bias", (d,)),
                b_k=take(f"{attn}.key.bias", (d,)),
                b_v=take(f"{attn}.value.bias", (d,)),
                b_o=take(f"{p}.attention.output.dense.bias", (d,)),
            )
            layers.append(
                BertLayerWeights(
                    attention=params,
                    attention_norm=norm(f"{p}.attention.output.LayerNorm"),
                    intermediate_weight=take(f"{p}.intermediate.dense.weight", (d_ff, d)),
                    intermediate_bias=take(f"{p}.intermediate.dense.bias", (d_ff,)),
                    output_weight=take(f"{p}.output.dense.weight", (d, d_ff)),
                    output_bias=take(f"{p}.output.dense.bias", (d,)),
                    output_norm=norm(f"{p}.output.LayerNorm"),
                )
            )
        picker.check(advice="The weights and config.json must come from the same model.")
        return cls(embeddings=embeddings, layers=tuple(layers))
