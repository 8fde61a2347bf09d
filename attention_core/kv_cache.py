"""The KV cache by formula: its bytes for MHA, GQA, MQA and MLA, and the two ways of shrinking it
that run on SmolLM2 here (one KV head for all, fewer bits per number).

A decoder keeps every past token's keys and values, so that a new token costs one row of
attention (`decoding.decode_step`) instead of the whole prefix again. Per token, every layer
stores for each KV head a key and a value of d_head numbers of b bits:

    MHA   2 · layers · heads · d_head · b/8      each query head has its own K and V
    GQA   2 · layers · g     · d_head · b/8      heads/g query heads share one K and V
    MQA   2 · layers · 1     · d_head · b/8      every query head shares one K and V
    MLA   layers · (d_c + d_rope) · b/8          DeepSeek-V2: a latent c_KV (d_c numbers) from
                                                 which every head's K and V are re-made, plus
                                                 one RoPE key (d_rope) all heads share

A model with a sliding window of w keys (Mistral-7B) never needs more than the last w tokens:
at a context of n tokens the cache holds min(n, w) of them.

Quantized to b bits, each cached vector (one token's key or value of one head) also stores
the scale that turns its integer codes back into numbers: `scale_bits` more per vector.

    absmax_quantize   symmetric absmax quantization of each vector -> Quantized
    pool_kv_heads     every KV head replaced by the heads' mean (MQA made from GQA)
    KNOWN_SHAPES      SmolLM2-135M, Llama-3-8B, Mistral-7B, DeepSeek-V2, from their config.json
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .validation import AttentionInputError, check_int

__all__ = [
    "DEEPSEEK_V2",
    "KNOWN_SHAPES",
    "LLAMA_3_8B",
    "MISTRAL_7B",
    "SMOLLM2_135M",
    "VARIANTS",
    "AttentionShape",
    "Quantized",
    "absmax_quantize",
    "cache_bytes",
    "cached_tokens",
    "kv_bytes_per_token",
    "latent_bytes_per_token",
    "pool_kv_heads",
    "variant_bytes_per_token",
]

VARIANTS = ("MHA", "GQA", "MQA", "MLA")


def kv_bytes_per_token(
    layers: int, kv_heads: int, d_head: int, *, bits: int = 16, scale_bits: int = 0
) -> int:
    """Bytes one token adds to a cache of keys and values:

        2 · layers · kv_heads · (d_head · bits + scale_bits) / 8

    The 2 is K and V. kv_heads = the query heads for MHA, the groups for GQA, 1 for MQA.
    `scale_bits` is what each cached vector stores besides its numbers (a quantized vector's
    scale; 0 for plain floats). Rounded up to whole bytes.
    """
    layers = check_int(layers, "layers", minimum=1)
    kv_heads = check_int(kv_heads, "kv_heads", minimum=1)
    d_head = check_int(d_head, "d_head", minimum=1)
    bits = check_int(bits, "bits", minimum=1)
    scale_bits = check_int(scale_bits, "scale_bits", minimum=0)
    vector_bits = d_head * bits + scale_bits  # one key or one value of one head
    token_bits = 2 * layers * kv_heads * vector_bits
    return (token_bits + 7) // 8  # whole bytes: a cache cannot store a fraction of one


def latent_bytes_per_token(layers: int, latent_dim: int, rope_dim: int, *, bits: int = 16) -> int:
    """Bytes one token adds to a multi-head latent attention (MLA) cache:

        layers · (d_c + d_rope) · bits / 8

    DeepSeek-V2 caches, per layer, one compressed latent c_KV = W_DKV x (d_c numbers) from
    which every head's keys and values are re-made by up-projections (absorbed into W_Q and
    W_O at inference), and one decoupled key k_R (d_rope numbers) that carries RoPE and is
    shared by all heads: RoPE between two matrices would stop W_UK from being absorbed.
    """
    layers = check_int(layers, "layers", minimum=1)
    latent_dim = check_int(latent_dim, "latent_dim", minimum=1)
    rope_dim = check_int(rope_dim, "rope_dim", minimum=0)
    bits = check_int(bits, "bits", minimum=1)
    token_bits = layers * (latent_dim + rope_dim) * bits
    return (token_bits + 7) // 8


def cached_tokens(context: int, window: int | None = None) -> int:
    """Tokens a cache holds at `context` tokens: min(context, window) with a sliding window of
    `window` keys (older tokens can never be attended to again, so they are dropped)."""
    context = check_int(context, "context", minimum=0)
    if window is None:
        return context
    return min(context, check_int(window, "window", minimum=1))


def cache_bytes(per_token: int, context: int, window: int | None = None) -> int:
    """The whole cache at `context` tokens: per_token · min(context, window)."""
    per_token = check_int(per_token, "per_token", minimum=0)
    return per_token * cached_tokens(context, window)


# ------------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class AttentionShape:
    """The numbers of a model that size its KV cache.

    layers, heads (query heads), d_head; kv_heads: the KV heads of its grouped-query attention
    (None if it has none); bits of each cached number; window: its sliding window in tokens
    (None: attends to everything); latent_dim, rope_dim: its MLA latent and RoPE key widths
    (latent_dim None: not MLA); published: which variant the model itself uses.
    """

    name: str
    layers: int
    heads: int
    d_head: int
    published: str
    kv_heads: int | None = None
    bits: int = 16
    window: int | None = None
    latent_dim: int | None = None
    rope_dim: int = 0


def variant_bytes_per_token(shape: AttentionShape, variant: str) -> int | None:
    """Bytes per token of `variant` ("MHA", "GQA", "MQA", "MLA") on `shape`'s layers and
    heads; None when the shape does not define it (GQA without groups, MLA without a latent).
    """
    if variant not in VARIANTS:
        raise AttentionInputError(f"{variant!r} is not one of {', '.join(VARIANTS)}.")
    if variant == "MLA":
        if shape.latent_dim is None:
            return None
        return latent_bytes_per_token(
            shape.layers, shape.latent_dim, shape.rope_dim, bits=shape.bits
        )
    kv_heads = {"MHA": shape.heads, "GQA": shape.kv_heads, "MQA": 1}[variant]
    if kv_heads is None:
        return None
    return kv_bytes_per_token(shape.layers, kv_heads, shape.d_head, bits=shape.bits)


# The config.json of each model on the Hugging Face Hub; bits = 16 for their torch_dtype
# "bfloat16" (the format they were published and are usually served in).
# HuggingFaceTB/SmolLM2-135M(-Instruct): num_hidden_layers 30, num_attention_heads 9,
# num_key_value_heads 3, hidden_size 576 (d_head = 576 / 9 = 64). This app caches float32.
SMOLLM2_135M = AttentionShape(
    "SmolLM2-135M", layers=30, heads=9, d_head=64, kv_heads=3, published="GQA"
)
# meta-llama/Meta-Llama-3-8B: num_hidden_layers 32, num_attention_heads 32,
# num_key_value_heads 8, hidden_size 4096 (d_head 128).
LLAMA_3_8B = AttentionShape(
    "Llama-3-8B", layers=32, heads=32, d_head=128, kv_heads=8, published="GQA"
)
# mistralai/Mistral-7B-v0.1: the same layers and heads as Llama-3-8B, and sliding_window 4096
# (each layer attends to the last 4096 tokens; its rolling-buffer cache keeps only those).
# v0.2 and later dropped the window (sliding_window null).
MISTRAL_7B = AttentionShape(
    "Mistral-7B-v0.1", layers=32, heads=32, d_head=128, kv_heads=8, window=4096, published="GQA"
)
# deepseek-ai/DeepSeek-V2: num_hidden_layers 60, num_attention_heads 128, kv_lora_rank 512,
# qk_rope_head_dim 64, v_head_dim = qk_nope_head_dim 128 (the d_h the paper's Table 1
# compares MHA, GQA and MQA with). Its cache: (512 + 64) · 60 numbers per token.
DEEPSEEK_V2 = AttentionShape(
    "DeepSeek-V2",
    layers=60,
    heads=128,
    d_head=128,
    latent_dim=512,
    rope_dim=64,
    published="MLA",
)
KNOWN_SHAPES = (SMOLLM2_135M, LLAMA_3_8B, MISTRAL_7B, DEEPSEEK_V2)


# ------------------------------------------------------------------------------- smaller caches


@dataclass(frozen=True)
class Quantized:
    """A symmetric absmax quantization of vectors along the last axis.

    codes        `(..., d)` int8 integers in [-q_max, q_max], q_max = 2^(bits-1) - 1
    scale        `(..., 1)` float32, one per vector: max|x| / q_max
    dequantized  `(..., d)` float32 codes · scale: what attention reads back
    """

    codes: np.ndarray
    scale: np.ndarray
    dequantized: np.ndarray


def absmax_quantize(x: object, bits: int) -> Quantized:
    """Quantize each vector along the last axis to `bits`-bit integers, symmetric around 0:

        q_max = 2^(bits-1) - 1,   s = max_i |x_i| / q_max,   codes = round(x / s),   x̂ = codes · s

    The largest entry lands on ±q_max, so nothing is clipped, and every entry is off by
    at most half a step: |x - x̂| ≤ s / 2. A zero vector keeps s = 0 and x̂ = 0. (A vector of
    subnormal numbers, all |x| < 1.2e-38, may leave its codes short of ±q_max: its scale is
    below what float32 resolves. No key or value is that small.) 8 bits give 255 levels
    (q_max = 127), 4 bits 15 (q_max = 7). For a KV cache `x` is `(kv_head, n, d_head)`:
    one scale per token and head, so a new token is quantized when it is appended, without
    knowing the tokens that come later and without re-quantizing the ones before.
    """
    bits = check_int(bits, "bits", minimum=2)
    if bits > 8:
        raise AttentionInputError(f"bits must be 2 to 8 (the codes are int8), got {bits}.")
    x = np.asarray(x, dtype=np.float32)
    q_max = 2 ** (bits - 1) - 1
    scale = np.abs(x).max(axis=-1, keepdims=True) / np.float32(q_max)  # (..., 1)
    # A zero vector (s = 0) is left at the 0 it starts as instead of dividing 0 by 0.
    steps = np.divide(x, scale, out=np.zeros_like(x), where=scale > 0)
    # x / s puts the largest entry on ±q_max; the clip only guards int8 against a subnormal s,
    # too imprecise to put it there exactly.
    codes = np.clip(np.rint(steps), -q_max, q_max).astype(np.int8)
    return Quantized(codes=codes, scale=scale, dequantized=codes * scale)


def pool_kv_heads(x: object) -> np.ndarray:
    """Every KV head replaced by the mean of all of them: `(kv_head, n, d)` -> same shape.

        x̄ = (1/G) Σ_g x_g,   out_g = x̄ for every g

    Done to the keys and values of grouped-query attention, every query head reads the same
    K and V: multi-query attention, stored as one head (what the GQA paper, Ainslie et al.
    2023, starts from when it converts MHA checkpoints: the heads' projections mean-pooled).
    """
    x = np.asarray(x)
    if x.ndim != 3:
        raise AttentionInputError(
            f"Keys or values must be (kv_head, n, d_head) to pool their heads, got {x.shape}."
        )
    # A read-only view of one head's numbers that every head reads: what MQA stores once.
    return np.broadcast_to(x.mean(axis=0), x.shape)
