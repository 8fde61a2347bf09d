"""transformers 4's ``head_mask``, rebuilt for transformers 5 (which dropped the argument).

transformers 4's eager BERT attention did, per layer l (``modeling_bert.py``, v4.x):

    attention_probs = softmax(q kᵀ / √d + mask)
    attention_probs = attention_probs * head_mask[l]          # (head,) -> (1, head, 1, 1)
    context = attention_probs @ v

and returned the multiplied probs as ``attentions``. ``head_masked_eager`` is that function for
transformers 5's attention interface (grouped-query keys repeated as ``repeat_kv`` does), read
from the keyword argument ``head_mask`` `(layer, head)` passed to the model's forward.
"""

from __future__ import annotations

import torch

NAME = "head_masked_eager"


def head_masked_eager(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs
):
    groups = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(groups, dim=1)
    value = value.repeat_interleave(groups, dim=1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = query @ key.transpose(2, 3) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    head_mask = kwargs.get("head_mask")
    if head_mask is not None:
        probs = probs * head_mask[module.layer_idx][None, :, None, None]
    return (probs @ value).transpose(1, 2).contiguous(), probs


def use_head_mask(hf_model) -> None:
    """Switch ``hf_model`` to ``head_masked_eager`` (registered globally, by name), with eager
    attention's additive masks (a new name would otherwise get no causal mask at all)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(NAME, head_masked_eager)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, eager_mask)
    hf_model.set_attn_implementation(NAME)
