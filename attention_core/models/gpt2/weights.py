"""A GPT-2 checkpoint's weights in float32, in torch's ``nn.Linear`` layout, kept read-only.

GPT-2 was written with OpenAI's ``Conv1D``, which stores each matrix as `(in, out)` and computes
``y = x W + b``. Here every matrix is turned once, at load, into the `(out, in)` layout of
``nn.Linear`` (``y = x Wᵀ + b``), the layout the rest of the project uses: the transposed view
of the stored array, so no copy is made and ``x @ W.T`` reads the stored bytes in order.
The fused ``c_attn`` `(d, 3d)` becomes ``w_qkv`` `(3d, d)`: W_q, W_k, W_v stacked, one product
for all three, with ``w_q``, ``w_k``, ``w_v`` views of its thirds.

float16 and bfloat16 files are widened to float32 here (every product is computed in float32);
``GPT2Model.saved_as`` keeps what the file held. Names are read with or without the
``transformer.`` prefix (``GPT2LMHeadModel`` saves it, the Hub's ``gpt2`` has none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checkpoint import TensorPicker
from .config import GPT2Config

__all__ = ["GPT2LayerWeights", "GPT2Weights"]

PREFIX = "transformer."


def _third(stacked: str, i: int) -> property:
    """Rows i·d .. (i+1)·d of the layer's field ``stacked`` (q, k, v side by side): a view."""

    def read(layer: GPT2LayerWeights) -> np.ndarray:
        d = layer.w_o.shape[0]
        return getattr(layer, stacked)[i * d : (i + 1) * d]

    return property(read)


@dataclass(frozen=True, eq=False)
class GPT2LayerWeights:
    """One block, nn.Linear layout (``y = x @ W.T + b``), float32, read-only.

    ln_1_weight, ln_1_bias  `(d_model,)`   LayerNorm γ, β before attention
    w_qkv   `(3·d_model, d_model)`, b_qkv `(3·d_model,)`   W_q, W_k, W_v stacked (c_attn)
    w_o     `(d_model, d_model)`, b_o `(d_model,)`         the heads' mix (attn.c_proj)
    ln_2_weight, ln_2_bias  `(d_model,)`   LayerNorm γ, β before the MLP
    w_fc    `(d_ff, d_model)`, b_fc `(d_ff,)`              the MLP's widening (mlp.c_fc)
    w_proj  `(d_model, d_ff)`, b_proj `(d_model,)`         back to the stream (mlp.c_proj)
    """

    ln_1_weight: np.ndarray
    ln_1_bias: np.ndarray
    w_qkv: np.ndarray
    b_qkv: np.ndarray
    w_o: np.ndarray
    b_o: np.ndarray
    ln_2_weight: np.ndarray
    ln_2_bias: np.ndarray
    w_fc: np.ndarray
    b_fc: np.ndarray
    w_proj: np.ndarray
    b_proj: np.ndarray

    # W_q, W_k, W_v and their biases, each a view of a third of the stacked one.
    w_q, w_k, w_v = _third("w_qkv", 0), _third("w_qkv", 1), _third("w_qkv", 2)
    b_q, b_k, b_v = _third("b_qkv", 0), _third("b_qkv", 1), _third("b_qkv", 2)


@dataclass(frozen=True, eq=False)
class GPT2Weights:
    """wte `(vocab, d_model)` token embeddings, wpe `(n_positions, d_model)` the learned position
    table (row p is what position p adds), layers, ln_f's γ and β `(d_model,)`, and lm_head
    `(vocab, d_model)`: wte itself when tied (GPT-2 reads its embedding matrix backwards)."""

    wte: np.ndarray
    wpe: np.ndarray
    layers: tuple[GPT2LayerWeights, ...]
    ln_f_weight: np.ndarray
    ln_f_bias: np.ndarray
    lm_head: np.ndarray
    storage = "float32"  # every matrix held (and computed) in float32

    @property
    def unembedding(self) -> np.ndarray:
        """`(vocab, d_model)` the head's matrix (every family's name for it)."""
        return self.lm_head

    @property
    def nbytes(self) -> int:
        arrays = {id(a): a for a in (self.wte, self.wpe, self.ln_f_weight, self.ln_f_bias)}
        arrays[id(self.lm_head)] = self.lm_head  # counted once when tied
        for layer in self.layers:
            arrays.update(
                (id(a), a) for a in (getattr(layer, f) for f in layer.__dataclass_fields__)
            )
        return sum(a.nbytes for a in arrays.values())

    @classmethod
    def from_state_dict(
        cls, state: dict[str, np.ndarray], config: GPT2Config, source: str = "the model file"
    ) -> GPT2Weights:
        """Pick the tensors named like ``GPT2LMHeadModel``'s state dict (with or without the
        ``transformer.`` prefix), Conv1D matrices turned to `(out, in)`. Missing or mis-shaped
        tensors raise ``ModelFileError`` naming them."""
        d, f, vocab = config.n_embd, config.n_inner, config.vocab_size
        picker = TensorPicker(
            {name.removeprefix(PREFIX): arr for name, arr in state.items()}, source
        )

        def take(name: str, shape: tuple[int, ...], conv1d: bool = False) -> Any:
            wide = picker.float32(name, shape)
            # Conv1D's (in, out) as nn.Linear's (out, in): a view, so W.T is the stored bytes.
            return wide.T if conv1d and wide is not None else wide

        def block(p: str) -> GPT2LayerWeights:  # p = "h.{i}"
            return GPT2LayerWeights(
                ln_1_weight=take(f"{p}.ln_1.weight", (d,)),
                ln_1_bias=take(f"{p}.ln_1.bias", (d,)),
                w_qkv=take(f"{p}.attn.c_attn.weight", (d, 3 * d), conv1d=True),
                b_qkv=take(f"{p}.attn.c_attn.bias", (3 * d,)),
                w_o=take(f"{p}.attn.c_proj.weight", (d, d), conv1d=True),
                b_o=take(f"{p}.attn.c_proj.bias", (d,)),
                ln_2_weight=take(f"{p}.ln_2.weight", (d,)),
                ln_2_bias=take(f"{p}.ln_2.bias", (d,)),
                w_fc=take(f"{p}.mlp.c_fc.weight", (d, f), conv1d=True),
                b_fc=take(f"{p}.mlp.c_fc.bias", (f,)),
                w_proj=take(f"{p}.mlp.c_proj.weight", (f, d), conv1d=True),
                b_proj=take(f"{p}.mlp.c_proj.bias", (d,)),
            )

        wte = take("wte.weight", (vocab, d))
        # A tied head is not saved (save_pretrained drops it): the embedding matrix serves.
        lm_head = wte if config.tie_word_embeddings else take("lm_head.weight", (vocab, d))
        weights = cls(
            wte=wte,
            wpe=take("wpe.weight", (config.n_positions, d)),
            layers=picker.layers("h", config.n_layer, block),
            ln_f_weight=take("ln_f.weight", (d,)),
            ln_f_bias=take("ln_f.bias", (d,)),
            lm_head=lm_head,
        )
        picker.check("its GPT-2 configuration")
        return weights
