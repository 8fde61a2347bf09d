"""The pretrained page's cached computation: one head's steps, rerun by our own attention, in the
byte-bounded cache (ui.widgets.byte_cache), read-only as every session shares it."""

from __future__ import annotations

import numpy as np

from attention_core import AttentionSteps, scaled_dot_product_attention
from ui.models import minilm
from ui.models.minilm import PageTrace
from ui.widgets.byte_cache import MB, bounded_by_bytes, read_only

# The five step heatmaps of one head are drawn for texts of at most this many tokens.
MAX_PIPELINE_TOKENS = 24


def head_steps(trace: PageTrace, layer: int, head: int) -> tuple[AttentionSteps, float]:
    """Head (`layer`, `head`), from 0, as 2-D AttentionSteps, and the largest difference between
    its weights and the model's own (the same computation, one head at a time)."""
    return _head_steps(trace.digest, layer, head, trace)


# A 512-token head's steps hold four (512, 512) float32 arrays, 4 MB: six heads.
@minilm.let_go_with_model
@bounded_by_bytes(24 * MB, name="pretrained.head_steps")
def _head_steps(digest: str, layer: int, head: int, _trace: PageTrace):
    q = _trace.q_heads[layer, head]
    k = _trace.k_heads[layer, head]
    v = _trace.v_heads[layer, head]
    steps = scaled_dot_product_attention(q, k, v)  # scores (n, n), output (n, d_head)
    difference = float(np.max(np.abs(steps.weights - _trace.weights[layer, head])))
    return read_only((steps, difference))
