"""What a decoder's trace reads from the fields it holds, whatever the family.

A family's trace (``LlamaTrace``, ``GPT2Trace``) is a frozen dataclass holding ``embeddings``
(resid.0), ``layers`` (one steps object each) and ``logits``; it inherits ``DecoderTrace``.
Every family names its layer's steps alike (``attn_output``, ``ffn_output``, ``hidden``…), so
each kind of named point is read from the same step (``POINT_STEPS``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import ClassVar

import numpy as np

from . import points

__all__ = ["POINT_STEPS", "DecoderTrace"]

# The layer step each kind of named point is read from (resid.{l+1} is layer l's `hidden`,
# resid.0 the trace's `embeddings`): what ``run_llama(keep=...)`` must keep to read it.
POINT_STEPS = {
    "resid": "hidden",
    "heads": "head_outputs",
    "attn_out": "attn_output",
    "mlp_out": "ffn_output",
}


class DecoderTrace:
    """The next token's logits, a named point and every layer's weights of a pass."""

    point_steps: ClassVar[Mapping[str, str]] = POINT_STEPS
    embeddings: np.ndarray
    layers: Sequence[object]
    logits: np.ndarray

    @property
    def next_token_logits(self) -> np.ndarray:
        """`(vocab,)` the logits that predict the token after the last position."""
        return self.logits[-1]

    def point(self, name: str) -> np.ndarray:
        """The activation at the named point (``points.resid(3)``, ``points.heads(7)``…) for
        this pass's n positions, as the pass went on with it (after its edit, if any):
        resid `(n, d_model)`, heads `(head, n, d_head)`, attn_out and mlp_out `(n, d_model)`."""
        return points.read(name, self.embeddings, self.layers, self.point_steps)

    @cached_property
    def attention_weights(self) -> np.ndarray:
        """`(layer, head, n, k_pos)` every layer's weights, stacked once on first use."""
        stacked = np.stack([layer.weights for layer in self.layers])
        stacked.setflags(write=False)
        return stacked
