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
from .chunked import (
    ChunkedAttention,
    DecodeStep,
    IncrementalDecoding,
    KVCache,
    OnlineSoftmaxBlock,
    chunked_attention,
    decode_step,
    incremental_causal_attention,
    online_softmax_weights,
)
from .masks import (
    causal_mask,
    combine_masks,
    mask_to_additive,
    padding_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from .multihead import (
    MultiHeadParams,
    MultiHeadSteps,
    init_multi_head_params,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from .positional import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    learned_encoding,
    rope_scores,
    sinusoid_shift_matrix,
    sinusoid_wavelengths,
    sinusoidal_encoding,
)
from .reference import (
    TORCH_INSTALL_COMMAND,
    TorchComparison,
    TorchNotInstalledError,
    TorchReference,
    compare_with_torch,
    token_embeddings,
    torch_multi_head_reference,
)
from .softmax import naive_softmax, softmax, softmax_jacobian
from .statistics import (
    HeadStatistics,
    ScalingExperiment,
    attention_entropy,
    head_statistics,
    scaling_experiment,
)
from .validation import MAX_ELEMENTS, AttentionInputError, max_elements

__all__ = [
    "MAX_ELEMENTS",
    "SCORING_FUNCTIONS",
    "TORCH_INSTALL_COMMAND",
    "AdditiveParams",
    "AttentionInputError",
    "AttentionSteps",
    "ChunkedAttention",
    "DecodeStep",
    "HeadStatistics",
    "IncrementalDecoding",
    "KVCache",
    "MultiHeadParams",
    "MultiHeadSteps",
    "OnlineSoftmaxBlock",
    "ScalingExperiment",
    "ScoringFunction",
    "TorchComparison",
    "TorchNotInstalledError",
    "TorchReference",
    "additive_attention",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "attend",
    "attention_entropy",
    "causal_mask",
    "chunked_attention",
    "combine_masks",
    "compare_with_torch",
    "cosine_attention",
    "decode_step",
    "dot_product_attention",
    "head_statistics",
    "incremental_causal_attention",
    "init_additive_params",
    "init_multi_head_params",
    "learned_encoding",
    "mask_to_additive",
    "max_elements",
    "merge_heads",
    "multi_head_attention",
    "naive_softmax",
    "online_softmax_weights",
    "padding_mask",
    "prefix_lm_mask",
    "rope_scores",
    "scaled_dot_product_attention",
    "scaling_experiment",
    "sinusoid_shift_matrix",
    "sinusoid_wavelengths",
    "sinusoidal_encoding",
    "sliding_window_mask",
    "softmax",
    "softmax_jacobian",
    "split_heads",
    "token_embeddings",
    "torch_multi_head_reference",
]
