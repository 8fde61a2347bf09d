"""attention_core: the attention math behind Attention Explorer, as pure NumPy functions.

Every function validates its input (raising `AttentionInputError`, a ValueError with a message
for learners) and returns its intermediate steps as frozen dataclasses. Shapes put heads before
positions: `(..., head, q_pos, d_head)`, patterns `(..., head, q_pos, k_pos)`. Boolean masks use
True = may attend. Importing this package loads NumPy only; the torch versions live in
`attention_core.torch_backend`, imported on request.
"""

from .attention import (
    SCORING_FUNCTIONS,
    AdditiveParams,
    AttentionSteps,
    ScoringFunction,
    additive_attention,
    attend,
    cosine_attention,
    dot_product_attention,
    init_additive_params,
    scaled_dot_product_attention,
)
from .masks import (
    causal_mask,
    combine_masks,
    mask_to_additive,
    padding_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from .softmax import naive_softmax, softmax, softmax_jacobian
from .validation import MAX_ELEMENTS, AttentionInputError, max_elements

__all__ = [
    "MAX_ELEMENTS",
    "SCORING_FUNCTIONS",
    "AdditiveParams",
    "AttentionInputError",
    "AttentionSteps",
    "ScoringFunction",
    "additive_attention",
    "attend",
    "causal_mask",
    "combine_masks",
    "cosine_attention",
    "dot_product_attention",
    "init_additive_params",
    "mask_to_additive",
    "max_elements",
    "naive_softmax",
    "padding_mask",
    "prefix_lm_mask",
    "scaled_dot_product_attention",
    "sliding_window_mask",
    "softmax",
    "softmax_jacobian",
]
