"""SmolLM2 with a smaller KV cache, and what that costs its predictions over a text.

SmolLM2-135M caches 3 KV heads per layer (9 query heads in groups of 3; GPT-2 one per query
head). Three smaller caches run here as ``read_text`` codecs (any decoder family's,
``read_decoder_text``), each replacing a layer's new keys and values before attention reads
them:

    mqa    the 3 KV heads mean-pooled into 1: multi-query attention       1/3 of the cache
    int8   every cached vector quantized to 8 bits (absmax, per token and head)
    int4   the same with 4 bits

``kv_experiment`` reads a text once with the full cache and once with each codec, and compares
the next-token distributions position by position (``llama.compare_next_tokens``, every
stream's logits made together): KL(full ‖ smaller) and whether the most
likely token is the same. The bytes are computed from the shapes and the bits
(``kv_cache.kv_bytes_per_token``), not measured: the codecs return float32 arrays, which is
what the smaller cache would give back to attention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention_core.kv_cache import absmax_quantize, kv_bytes_per_token, pool_kv_heads
from attention_core.validation import AttentionInputError, check_int

from .decoder import DecoderModel
from .forward import read_decoder_text
from .scoring import compare_next_tokens

__all__ = [
    "CACHE_BITS",
    "KV_VARIANTS",
    "SCALE_BITS",
    "KVExperiment",
    "KVVariant",
    "VariantEffect",
    "kv_experiment",
    "mean_pooled_kv",
    "quantized_kv",
    "variant_cache_bytes",
]

Codec = Callable[[int, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

# Our cache holds float32 numbers (``LlamaCache.bytes_used``).
CACHE_BITS = 32
# A quantized vector keeps its scale as the float32 it was computed in. (A float16 scale, as
# KIVI stores, would save 2 bytes of a vector's 34 at 4 bits, and round the scale.)
SCALE_BITS = 32


def mean_pooled_kv(layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The codec of multi-query attention made from SmolLM2's grouped-query attention: every
    layer's KV heads `(kv_head, n, d_head)` replaced by their mean, broadcast back.

    This is exactly SmolLM2 with W_k and W_v mean-pooled across KV heads (Ainslie et al. 2023
    turn MHA checkpoints into MQA and GQA so), although the keys arrive after RoPE:

        mean_g RoPE_p(x W_k,gᵀ) = RoPE_p(x (mean_g W_k,g)ᵀ)

    because RoPE rotates each key by a matrix R_p that depends only on its position p, the same
    for every head, and the mean and x ↦ x W_kᵀ are linear: the mean of R_p k_g is R_p times
    the mean of k_g. Values get no RoPE, so for them it is linearity alone.
    """
    return pool_kv_heads(k), pool_kv_heads(v)


def quantized_kv(bits: int) -> Codec:
    """The codec of a cache quantized to `bits` bits: every key and value vector (one token of
    one KV head, d_head numbers) gets its own absmax scale (``kv_cache.absmax_quantize``), and
    attention reads the dequantized numbers.

    Per (token, head) rather than one scale per head: a cache appends one token at a time, and
    a per-head scale would depend on tokens not yet seen (or force re-quantizing the cache when
    a larger one arrives); a scale per vector also keeps one large token from coarsening the
    steps of all the others.
    """
    bits = check_int(bits, "bits", minimum=2)

    def codec(layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return absmax_quantize(k, bits).dequantized, absmax_quantize(v, bits).dequantized

    return codec


@dataclass(frozen=True)
class KVVariant:
    """A smaller cache: its name, its codec, the KV heads it keeps per layer, the bits of each
    number and of each vector's scale."""

    name: str
    label: str
    codec: Codec
    kv_heads: int | None  # None: all of the model's
    bits: int = CACHE_BITS
    scale_bits: int = 0


KV_VARIANTS = {
    "mqa": KVVariant("mqa", "MQA (the KV heads pooled into 1)", mean_pooled_kv, kv_heads=1),
    "int8": KVVariant("int8", "8-bit cache", quantized_kv(8), None, 8, SCALE_BITS),
    "int4": KVVariant("int4", "4-bit cache", quantized_kv(4), None, 4, SCALE_BITS),
}


@dataclass(frozen=True, eq=False)
class VariantEffect:
    """One smaller cache over a text of n tokens.

    kl            `(n,)` KL(full ‖ smaller) of the distribution of the token after each
                  position, in nats
    top1_agrees   `(n,)` whether both give the same most likely next token
    mean_loss     mean −log p of the text's next tokens with the smaller cache, in nats
    cache_bytes   the smaller cache for the n tokens
    """

    name: str
    label: str
    kl: np.ndarray
    top1_agrees: np.ndarray
    mean_loss: float
    cache_bytes: int

    @property
    def mean_kl(self) -> float:
        return float(self.kl.mean())

    @property
    def agreement(self) -> float:
        """The share of positions whose most likely next token did not change."""
        return float(self.top1_agrees.mean())


@dataclass(frozen=True, eq=False)
class KVExperiment:
    """A text read with the full cache (its mean loss, its cache's bytes) and with smaller ones."""

    ids: tuple[int, ...]
    mean_loss: float
    cache_bytes: int
    effects: tuple[VariantEffect, ...]


def variant_cache_bytes(model: DecoderModel, variant: KVVariant | None, n_tokens: int) -> int:
    """The cache of `n_tokens` tokens with `variant` (None: the full float32 cache), from the
    shapes and the bits: ``kv_bytes_per_token`` · n."""
    config = model.config
    kv_heads = config.num_key_value_heads
    bits, scale_bits = CACHE_BITS, 0
    if variant is not None:
        kv_heads = variant.kv_heads or kv_heads
        bits, scale_bits = variant.bits, variant.scale_bits
    per_token = kv_bytes_per_token(
        config.num_hidden_layers, kv_heads, config.head_dim, bits=bits, scale_bits=scale_bits
    )
    return per_token * n_tokens


def kv_experiment(
    model: DecoderModel,
    input_ids: object,
    variants: tuple[str, ...] = tuple(KV_VARIANTS),
    *,
    full: np.ndarray | None = None,
) -> KVExperiment:
    """Read a text once with the full cache and once with each of `variants` (names in
    KV_VARIANTS), and compare each one's next-token distributions with the full cache's.

    ``full`` `(n, d_model)`, given, is the full cache's read already made: the stream after the
    final RMSNorm (``read_text``) at the text's n positions. It may be the first n rows of a
    longer text's pass that starts with these ids: under the causal mask position i reads
    only positions 0..i, so they are the same numbers up to float32 rounding.
    """
    unknown = [name for name in variants if name not in KV_VARIANTS]
    if unknown:
        raise AttentionInputError(
            f"{unknown[0]!r} is not a KV-cache variant; choose from {', '.join(KV_VARIANTS)}."
        )
    if full is None:
        ids, full, _ = read_decoder_text(model, input_ids)
    else:
        ids, full = np.asarray(input_ids), np.asarray(full)
        expected = (ids.shape[0], model.config.hidden_size)
        if full.shape != expected:
            # Checked before the smaller caches' reads, not after them.
            raise AttentionInputError(
                f"The full cache's read must be {expected}, a row per token of the text: got "
                f"{full.shape}."
            )
    smaller = tuple(
        read_decoder_text(model, ids, kv_codec=KV_VARIANTS[name].codec)[1] for name in variants
    )
    compared = compare_next_tokens(model, ids, full, smaller)
    n = ids.shape[0]
    effects = tuple(
        VariantEffect(
            name=name,
            label=KV_VARIANTS[name].label,
            kl=compared.kl[index],
            top1_agrees=compared.top1_agrees[index],
            mean_loss=float(compared.losses[1 + index].mean()),
            cache_bytes=variant_cache_bytes(model, KV_VARIANTS[name], n),
        )
        for index, name in enumerate(variants)
    )
    return KVExperiment(
        ids=tuple(int(i) for i in ids),
        mean_loss=float(compared.losses[0].mean()),
        cache_bytes=variant_cache_bytes(model, None, n),
        effects=effects,
    )
