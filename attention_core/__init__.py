"""attention_core: the attention math behind Attention Explorer.

Every function validates its input (raising `AttentionInputError`, a ValueError with a message
for learners) and returns its intermediate steps as frozen dataclasses. Shapes put heads before
positions: `(..., head, q_pos, d_head)`, patterns `(..., head, q_pos, k_pos)`. Boolean masks use
True = may attend. The formulas are written once against the array API, so the same function
runs on NumPy arrays and on torch tensors (CPU or CUDA). Importing this package loads NumPy
only; torch is looked at only when a tensor is passed in.

This namespace is the public API: the functions a user of the package calls. Everything else is
importable from its own module.

Contents, module by module:

    softmax        softmax (stable, fully masked rows -> 0), naive_softmax, softmax_jacobian
    masks          causal_mask, padding_mask, sliding_window_mask, sink_window_mask,
                   prefix_lm_mask, combine_masks, mask_to_additive
    attention      scaled_dot_product_attention, dot_product_attention, additive_attention
                   (AdditiveParams, init_additive_params), cosine_attention, attend,
                   SCORING_FUNCTIONS -> AttentionSteps
    multihead      multi_head_attention (nn.MultiheadAttention layout) -> MultiHeadSteps;
                   MultiHeadParams, init_multi_head_params, split_heads, merge_heads
    positional     sinusoidal_encoding, learned_encoding, apply_rotary (RoPE), rope_scores,
                   alibi_slopes, alibi_bias, sinusoid_wavelengths, sinusoid_shift_matrix
    chunked        chunked_attention (online softmax, FlashAttention's trick) ->
                   ChunkedAttention; online_softmax_weights
    decoding       a decoder's attention, one position at a time: KVCache, decode_step,
                   incremental_causal_attention
    summaries      attention_entropy, head_statistics (per-head averages of a pattern)
    validation     AttentionInputError, max_elements (the size cap) and the input checks
    torch_backend  torch only: to_torch / to_numpy, masks built on a device
    reference      torch.nn.MultiheadAttention on our parameters (compare_with_torch),
                   token_embeddings
    cost           FLOPs and bytes of attention, by formula
    kv_cache       the KV cache's bytes per token (MHA, GQA, MQA, MLA; known models' shapes),
                   absmax_quantize and pool_kv_heads (a smaller cache)
    measurement    the measurement harness: time and peak memory, measured per backend
    head_patterns  labels heads as previous-token, self, [CLS], ... from their patterns
    probing        attention_rollout (Abnar & Zuidema), joint_query_key_projection (AttentionViz's
                   PCA map), sentence_embedding: readings of arrays a model already produced
    compare        compare_patterns: two patterns' difference, per-row total variation, and the
                   sentence saying what differs most
    logit_lens     logit_lens (the residual stream read after every layer), head_writes,
                   direct_logit_attribution (a logit split by the writers of the stream)
    head_roles     previous-token, induction, duplicate-token and first-token scores of every
                   head on a repeated random probe
    losses         log_softmax, next_token_losses and token_losses (−log p of the next token),
                   kl_divergence (how far two next-token distributions are apart)
    sampling       choosing the next token: apply_temperature, top_k_filter, top_p_filter,
                   min_p_filter -> FilterSteps; sampling_steps (transformers' order) ->
                   SamplingSteps; sample_token, greedy_token, continuation_probability
    token_attribution   norm_contributions (‖α·v·W_O‖, Kobayashi et al.), rank_correlation
                   (Spearman's ρ): attention against attribution
    score_parts    one attention score split exactly into query part × key part terms (the
                   norm's scale held) and over RoPE's frequency pairs; models.score_sources
                   finds a real decoder's parts (embeddings, each earlier head and MLP)
    lessons/       content built from the formulas: the scaled dot-product presets, the masking
                   and positional experiments, the √d_k experiment, the quiz questions
    models         real checkpoints run by this code (a BERT-style encoder, llama-style and
                   GPT-2 decoders);
                   models.readouts takes what the formulas above read out of their traces;
                   models.hiding runs them again with a token, a key or a head hidden
"""

from .attention import (
    SCORING_FUNCTIONS,
    AdditiveParams,
    AttentionSteps,
    additive_attention,
    attend,
    cosine_attention,
    dot_product_attention,
    init_additive_params,
    scaled_dot_product_attention,
)
from .chunked import ChunkedAttention, chunked_attention
from .decoding import KVCache, decode_step, incremental_causal_attention
from .masks import (
    causal_mask,
    combine_masks,
    mask_to_additive,
    padding_mask,
    prefix_lm_mask,
    sink_window_mask,
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
from .softmax import naive_softmax, softmax, softmax_jacobian
from .summaries import attention_entropy, head_statistics
from .validation import AttentionInputError, max_elements

__all__ = [
    "SCORING_FUNCTIONS",
    "AdditiveParams",
    "AttentionInputError",
    "AttentionSteps",
    "ChunkedAttention",
    "KVCache",
    "MultiHeadParams",
    "MultiHeadSteps",
    "additive_attention",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "attend",
    "attention_entropy",
    "causal_mask",
    "chunked_attention",
    "combine_masks",
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
    "padding_mask",
    "prefix_lm_mask",
    "rope_scores",
    "scaled_dot_product_attention",
    "sink_window_mask",
    "sinusoid_shift_matrix",
    "sinusoid_wavelengths",
    "sinusoidal_encoding",
    "sliding_window_mask",
    "softmax",
    "softmax_jacobian",
    "split_heads",
]
