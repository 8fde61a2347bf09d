"""A llama-style decoder (SmolLM2-135M-Instruct) run by our own NumPy attention code.

The forward pass of Hugging Face ``LlamaForCausalLM`` in eval mode, for `n` new tokens at
positions p .. p+n-1 after a cache holding positions 0 .. p-1 (p = 0 for a fresh prompt):

    h_0 = E[ids]                                                           (n, d_model)
    for each layer:
        x   = RMSNorm(h)                      RMSNorm(x) = x / sqrt(mean(x²) + eps) · γ
        q   = x W_qᵀ  -> (head, n, d_head)     k, v = x W_kᵀ, x W_vᵀ -> (kv_head, n, d_head)
        q,k = RoPE(q, positions), RoPE(k, positions)            rotate_half convention
        K,V = cache.append(k, v)                                  (kv_head, p+n, d_head)
        o_h = softmax(q_h K_gᵀ / √d_head + causal) V_g   head h reads KV head g = h // (H/KV)
        h   = h + concat(o_h) W_oᵀ
        h   = h + W_down (SiLU(RMSNorm(h) W_gateᵀ) ⊙ (RMSNorm(h) W_upᵀ))        SwiGLU
    logits = RMSNorm(h) Eᵀ                      tied head: the embedding matrix read backwards

Grouped-query attention (GQA) is a broadcast, not a copy: queries are shaped
`(kv_head, group, n, d_head)` and keys `(kv_head, 1, k_pos, d_head)`, so the shared
`chunked.decode_step` / `attention.scaled_dot_product_attention` give each group of H/KV query
heads the same keys and values, exactly what ``transformers``' ``repeat_kv`` builds.

Weights are stored bfloat16 (257 MiB instead of 513; the format SmolLM2 was published in) and
every product is computed in float32: a matrix is widened (a 16-bit shift) just before it is
used. ``load_llama(weights_dtype=np.float32)`` keeps float32 weights instead, trading memory for
speed (no widening per step); bench/README.md measures both. The offline package's file is
llama.cpp's 4-bit Q4_1 (8-bit Q8_0 embedding), so those are the numbers a page shows, and
``LlamaModel.saved_as`` says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from attention_core.attention import AttentionSteps
from attention_core.chunked import KVCache, decode_step
from attention_core.positional import rotary_tables, rotate_half_pairs
from attention_core.probing import kl_divergence
from attention_core.sampling import greedy_token, sample_token, sampling_steps
from attention_core.validation import AttentionInputError, check_int

from .layers import rms_norm, silu
from .llama_files import (
    BFLOAT16,
    LLMLocation,
    TokenizerSpec,
    build_tokenizer,
    find_llm,
    location_of,
    read_gguf,
    read_hf_dir,
    to_storage,
    widen,
)
from .loading import ModelFileError, number_format

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "MAX_CONTEXT_TOKENS",
    "MAX_PROMPT_CHARS",
    "MAX_PROMPT_TOKENS",
    "MAX_SCORED_TOKENS",
    "Generation",
    "GenerationStep",
    "KeptSteps",
    "LlamaCache",
    "LlamaConfig",
    "LlamaLayerSteps",
    "LlamaModel",
    "LlamaTrace",
    "LlamaWeights",
    "NextTokenComparison",
    "Prompt",
    "TextScore",
    "chat_text",
    "compare_next_tokens",
    "first_token_share",
    "generate",
    "load_llama",
    "next_token_losses",
    "next_token_probabilities",
    "read_text",
    "rms_norm",
    "run_llama",
    "sample_next_token",
    "score_llama",
    "silu",
]

# A trace keeps every layer's (head, n, n) steps: 30 layers x 9 heads x 4 arrays at 256 tokens
# is ~280 MB, the most one pass should hold (a page keeps the weights alone: run_llama's keep).
# Prompts leave room for 64 generated tokens.
MAX_CONTEXT_TOKENS = 256
# A text scored in one pass keeps no steps (score_llama): its limit is time, not memory.
MAX_SCORED_TOKENS = 1024
MAX_PROMPT_TOKENS = 192
# Longer texts are cut before tokenizing, so a pasted book costs no tokenizer time.
MAX_PROMPT_CHARS = 4000
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


# ------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class LlamaConfig:
    """Architecture numbers. SmolLM2-135M: vocab 49152, d_model 576, 30 layers, 9 query heads
    sharing 3 KV heads (d_head 64), FFN 1536, RoPE base 100000, RMSNorm eps 1e-5, tied head."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def group_size(self) -> int:
        """Query heads per KV head (H / KV)."""
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_dict(cls, config: dict[str, Any], source: str = "config.json") -> LlamaConfig:
        if config.get("model_type", "llama") != "llama":
            raise ModelFileError(
                f"{source} describes a {config.get('model_type')!r} model; the decoder page runs "
                "llama-style models only."
            )
        theta = config.get("rope_theta")
        if theta is None:  # transformers >= 5 nests it under rope_parameters
            theta = (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        try:
            made = cls(
                vocab_size=int(config["vocab_size"]),
                hidden_size=int(config["hidden_size"]),
                num_hidden_layers=int(config["num_hidden_layers"]),
                num_attention_heads=int(config["num_attention_heads"]),
                num_key_value_heads=int(
                    config.get("num_key_value_heads", config["num_attention_heads"])
                ),
                intermediate_size=int(config["intermediate_size"]),
                rope_theta=float(theta),
                rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
                bos_token_id=_optional_id(config.get("bos_token_id")),
                eos_token_id=_optional_id(config.get("eos_token_id")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(
                f"{source} is not a complete llama configuration ({exc})."
            ) from exc
        if made.hidden_size % made.num_attention_heads or (
            made.num_attention_heads % made.num_key_value_heads
        ):
            raise ModelFileError(
                f"{source}: {made.num_attention_heads} heads do not split d_model "
                f"{made.hidden_size} evenly, or do not group into {made.num_key_value_heads} "
                "KV heads."
            )
        return made


def _optional_id(value: Any) -> int | None:
    if isinstance(value, list):  # some configs list several end-of-sequence ids
        value = value[0] if value else None
    return None if value is None else int(value)


# ------------------------------------------------------------------------------- weights


@dataclass(frozen=True, eq=False)
class LlamaLayerWeights:
    """One decoder layer, nn.Linear layout (``y = x @ W.T``), no biases, matrices as stored
    (``llama_files.to_storage``: bfloat16 bits, float16 or float32).

    attn_norm, ffn_norm  `(d_model,)` float32 RMSNorm gains γ
    w_qkv      `(H·d_head + 2·KV·d_head, d_model)`  W_q, W_k, W_v stacked: one product, not three
    w_o        `(d_model, H·d_head)`
    w_gate_up  `(2·d_ff, d_model)`  W_gate over W_up: one product, not two
    w_down     `(d_model, d_ff)`
    The single matrices (w_q ... w_up) are views into the stacked ones; float32 ones are kept
    column-major (same shapes, a faster product).
    """

    attn_norm: np.ndarray
    w_qkv: np.ndarray
    w_o: np.ndarray
    ffn_norm: np.ndarray
    w_gate_up: np.ndarray
    w_down: np.ndarray

    @property
    def w_q(self) -> np.ndarray:
        return self.w_qkv[: self.w_o.shape[1]]

    @property
    def w_k(self) -> np.ndarray:
        q_rows, kv_rows = self.w_o.shape[1], (self.w_qkv.shape[0] - self.w_o.shape[1]) // 2
        return self.w_qkv[q_rows : q_rows + kv_rows]

    @property
    def w_v(self) -> np.ndarray:
        return self.w_qkv[self.w_o.shape[1] + self.w_k.shape[0] :]

    @property
    def w_gate(self) -> np.ndarray:
        return self.w_gate_up[: self.w_down.shape[1]]

    @property
    def w_up(self) -> np.ndarray:
        return self.w_gate_up[self.w_down.shape[1] :]


@dataclass(frozen=True, eq=False)
class LlamaWeights:
    """embed `(vocab, d_model)`, layers, final_norm `(d_model,)`, lm_head (None when tied)."""

    embed: np.ndarray
    layers: tuple[LlamaLayerWeights, ...]
    final_norm: np.ndarray
    lm_head: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        arrays = [self.embed, self.final_norm, self.lm_head]
        arrays += [getattr(layer, f) for layer in self.layers for f in layer.__dataclass_fields__]
        return sum(a.nbytes for a in arrays if a is not None)

    @property
    def storage(self) -> str:
        """How the matrices are stored: "bfloat16", "float16" or "float32"."""
        return number_format(self.embed)

    @classmethod
    def from_state_dict(
        cls,
        state: dict[str, np.ndarray],
        config: LlamaConfig,
        dtype: np.dtype | type | str = BFLOAT16,
        source: str = "the model file",
    ) -> LlamaWeights:
        """Pick the tensors named like ``LlamaForCausalLM``'s state dict; matrices stored as
        ``dtype`` (already stored ones are kept), norms as float32, all read-only. A uint16
        tensor is bfloat16 bits (``read_weights``). Missing or mis-shaped tensors raise
        ModelFileError."""
        d, h, kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
        dh, ff = config.head_dim, config.intermediate_size
        stored = np.uint16 if dtype == BFLOAT16 else np.dtype(dtype)
        problems: list[str] = []

        def take(name: str, shape: tuple[int, ...], optional: bool = False) -> Any:
            arr = state.get(name)
            if arr is None:
                if not optional:
                    problems.append(f"{name} is missing")
                return None
            if tuple(arr.shape) != shape:
                problems.append(f"{name} has shape {tuple(arr.shape)}, expected {shape}")
                return None
            if len(shape) == 1:
                return read_only(np.ascontiguousarray(widen(arr), dtype=np.float32))
            return read_only(arr if arr.dtype == stored else to_storage(widen(arr), dtype))

        def stack(*parts: Any) -> Any:
            return None if any(p is None for p in parts) else read_only(np.concatenate(parts))

        def for_products(w: Any) -> Any:
            # y = x Wᵀ reads Wᵀ: a float32 W kept column-major makes Wᵀ contiguous, and OpenBLAS
            # runs the 120 products of a 128-token prompt ~5% faster so (234 -> 223 ms measured).
            # A bfloat16 W stays row-major: _linear widens it a block of rows at a time.
            if w is None or w.dtype != np.float32:
                return w
            return read_only(np.asfortranarray(w))

        layers = []
        for i in range(config.num_hidden_layers):
            p = f"model.layers.{i}"
            layers.append(
                LlamaLayerWeights(
                    attn_norm=take(f"{p}.input_layernorm.weight", (d,)),
                    w_qkv=for_products(
                        stack(
                            take(f"{p}.self_attn.q_proj.weight", (h * dh, d)),
                            take(f"{p}.self_attn.k_proj.weight", (kv * dh, d)),
                            take(f"{p}.self_attn.v_proj.weight", (kv * dh, d)),
                        )
                    ),
                    w_o=for_products(take(f"{p}.self_attn.o_proj.weight", (d, h * dh))),
                    ffn_norm=take(f"{p}.post_attention_layernorm.weight", (d,)),
                    w_gate_up=for_products(
                        stack(
                            take(f"{p}.mlp.gate_proj.weight", (ff, d)),
                            take(f"{p}.mlp.up_proj.weight", (ff, d)),
                        )
                    ),
                    w_down=for_products(take(f"{p}.mlp.down_proj.weight", (d, ff))),
                )
            )
        weights = cls(
            embed=take("model.embed_tokens.weight", (config.vocab_size, d)),
            layers=tuple(layers),
            final_norm=take("model.norm.weight", (d,)),
            lm_head=take("lm_head.weight", (config.vocab_size, d), optional=True),
        )
        if problems:
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise ModelFileError(
                f"The weights in {source} do not match the configuration: "
                f"{'; '.join(problems[:5])}{more}."
            )
        return weights


def read_only(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


# ------------------------------------------------------------------------------- products


def _linear(x: np.ndarray, w: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """y = x Wᵀ `(n, out)` in float32, W stored `(out, in)`.

    A bfloat16 (or float16) W is widened a block of rows at a time into ``scratch`` (a float32
    buffer; its size over W's width sets the rows per block), just before their product: no
    float32 copy of W is ever made (for the tied head a 113 MB temporary), and the buffer is
    allocated once per forward pass, not once per matrix.
    """
    if w.dtype == np.float32:
        return x @ w.T
    if scratch is None:  # 512 rows at a time, as a prompt's pass does (`_start`)
        scratch = np.empty(min(w.shape[0], 512) * w.shape[1], dtype=np.float32)
    rows = max(1, min(w.shape[0], scratch.size // w.shape[1]))
    out = np.empty((x.shape[0], w.shape[0]), dtype=np.float32)
    for start in range(0, w.shape[0], rows):
        part = w[start : start + rows]
        wide = widen(part, out=scratch[: part.size].reshape(part.shape))
        np.matmul(x, wide.T, out=out[:, start : start + part.shape[0]])
    return out


# ------------------------------------------------------------------------------- cache


@dataclass(frozen=True, eq=False)
class LlamaCache:
    """The KV cache: one ``chunked.KVCache`` per layer, keys and values `(kv_head, 1, pos,
    d_head)` (the 1 broadcasts over the query heads of a group). Immutable: ``append`` in the
    forward pass returns a new cache, so a page can keep the old one.

    ``bytes_used`` counts K and V of every layer; ``mha_bytes`` is what the same cache would take
    if every query head had its own K and V (multi-head attention): H/KV times more.
    ``bytes_reserved`` is what is allocated: each layer's rows sit in a buffer with room to grow
    (up to twice ``bytes_used``), shared with the caches of earlier steps, so a step writes only
    its new K and V rows instead of copying the whole cache.
    """

    layers: tuple[KVCache, ...]
    num_query_heads: int

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0

    @property
    def num_kv_heads(self) -> int:
        return int(self.layers[0].keys.shape[0])

    @property
    def head_dim(self) -> int:
        return int(self.layers[0].keys.shape[-1])

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """(layer, K and V, kv_head, pos, d_head)."""
        return (len(self.layers), 2, self.num_kv_heads, self.length, self.head_dim)

    @property
    def bytes_used(self) -> int:
        return sum(c.keys.nbytes + c.values.nbytes for c in self.layers)

    @property
    def bytes_reserved(self) -> int:
        return sum(c.reserved_bytes for c in self.layers)

    @property
    def mha_bytes(self) -> int:
        return self.bytes_used * self.num_query_heads // self.num_kv_heads

    def keys(self, layer: int) -> np.ndarray:
        """`(kv_head, pos, d_head)` cached (rotated) keys of one layer."""
        return self.layers[layer].keys[:, 0]

    def values(self, layer: int) -> np.ndarray:
        """`(kv_head, pos, d_head)` cached values of one layer."""
        return self.layers[layer].values[:, 0]


# ------------------------------------------------------------------------------- trace


@dataclass(frozen=True, eq=False)
class LlamaLayerSteps:
    """Every intermediate of one decoder layer for `n` new positions; k_pos = cache + n.

    input           `(n, d_model)`            residual stream entering the layer
    attn_norm       `(n, d_model)`            RMSNorm(input)
    q               `(head, n, d_head)`       queries before RoPE
    k, v            `(kv_head, n, d_head)`    new keys (before RoPE) and values
    q_rot, k_rot    same shapes, after RoPE
    attention       ``AttentionSteps`` shaped `(kv_head, group, n, k_pos)`: scores, scaled,
                    masked, weights, output `(kv_head, group, n, d_head)`
    attn_output     `(n, d_model)`            concat(heads) W_oᵀ
    ffn_output      `(n, d_model)`            SwiGLU feed-forward output
    hidden          `(n, d_model)`            the layer's output (after both residuals)
    """

    input: np.ndarray
    attn_norm: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_rot: np.ndarray
    k_rot: np.ndarray
    attention: AttentionSteps
    attn_output: np.ndarray
    ffn_output: np.ndarray
    hidden: np.ndarray

    def _heads(self, x: np.ndarray) -> np.ndarray:
        # (kv_head, group, ...) -> (head, ...): head h = kv_head·group + g, transformers' order.
        return x.reshape(-1, *x.shape[2:])

    @property
    def weights(self) -> np.ndarray:
        """`(head, n, k_pos)` softmax weights (transformers' ``output_attentions``)."""
        return self._heads(self.attention.weights)

    @property
    def scores(self) -> np.ndarray:
        """`(head, n, k_pos)` scaled scores q·k/√d_head before the mask."""
        return self._heads(self.attention.scaled)

    @property
    def head_outputs(self) -> np.ndarray:
        """`(head, n, d_head)` each head's weighted sum of values."""
        return self._heads(self.attention.output)


@dataclass(frozen=True, eq=False)
class KeptSteps:
    """The steps of one layer that ``run_llama(keep=…)`` kept, read by their ``LlamaLayerSteps``
    names (``kept.weights``, ``kept.q_rot``…); asking for another is an AttributeError."""

    steps: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        # Only for names that are not attributes; through __dict__, as unpickling asks before
        # `steps` is set.
        try:
            return self.__dict__["steps"][name]
        except KeyError:
            raise AttributeError(f"{name!r} was not among the steps run_llama kept") from None


@dataclass(frozen=True, eq=False)
class LlamaTrace:
    """A forward pass over `n` new tokens, every step kept.

    input_ids `(n,)`, positions `(n,)` (cache length + 0..n-1), embeddings `(n, d_model)`,
    layers (one ``LlamaLayerSteps`` each, or ``KeptSteps`` with ``run_llama(keep=…)``),
    final_hidden `(n, d_model)` (after the last RMSNorm),
    logits `(n_logits, vocab)` for the last position (or all, with ``all_logits=True``), and the
    ``cache`` after this pass (holding every position so far).
    """

    input_ids: np.ndarray
    positions: np.ndarray
    embeddings: np.ndarray
    layers: tuple[LlamaLayerSteps | KeptSteps, ...]
    final_hidden: np.ndarray
    logits: np.ndarray
    cache: LlamaCache

    @property
    def next_token_logits(self) -> np.ndarray:
        """`(vocab,)` the logits that predict the token after the last position."""
        return self.logits[-1]

    @cached_property
    def attention_weights(self) -> np.ndarray:
        """`(layer, head, n, k_pos)` every layer's weights, stacked once on first use."""
        stacked = np.stack([layer.weights for layer in self.layers])
        stacked.setflags(write=False)
        return stacked


# ------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Prompt:
    """A tokenized prompt: ids `(n,)`, token strings as text pieces, and what was cut.

    text               the text that was tokenized (after any character cut)
    chat               True if wrapped in the ChatML template
    tokens             each id decoded alone ("Ġ" shown as a space; a piece of a multi-byte
                       character shows as "�")
    truncated          True if the text was cut (to MAX_PROMPT_CHARS characters or
                       MAX_PROMPT_TOKENS tokens)
    num_input_tokens   tokens of the (character-cut) text before the token cut
    """

    text: str
    chat: bool
    input_ids: np.ndarray
    tokens: tuple[str, ...]
    truncated: bool
    num_input_tokens: int
    notice: str = ""


@dataclass(frozen=True, eq=False)
class LlamaModel:
    """A loaded decoder: config, weights (bfloat16 or float32), a ``tokenizers.Tokenizer``.

    Load once per process (``st.cache_resource``) and share it: nothing in it changes.
    """

    config: LlamaConfig
    weights: LlamaWeights
    tokenizer: Any
    location: LLMLocation | None = None
    load_seconds: float = 0.0
    chat_template: str | None = field(default=None, repr=False)
    saved_as: str = ""  # the file's number formats (llama_files.saved_as): what the numbers are

    @property
    def eos_token_id(self) -> int:
        return self.config.eos_token_id if self.config.eos_token_id is not None else 2

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([int(token_id)], skip_special_tokens=False)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` exactly (control-token text such as ``<|im_end|>`` becomes the
        control token, as in transformers; no BOS is added, SmolLM2 uses none)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def prompt(
        self, text: str, *, chat: bool = False, max_tokens: int = MAX_PROMPT_TOKENS
    ) -> Prompt:
        """Tokenize a prompt, raw or in SmolLM2's ChatML chat template (see ``chat_text``).

        Raises ``AttentionInputError`` for a non-string or empty text. A text longer than
        MAX_PROMPT_CHARS characters or ``max_tokens`` tokens is cut (its beginning is kept)
        and ``notice`` says so.
        """
        if not isinstance(text, str):
            raise AttentionInputError(f"The prompt must be text, got {type(text).__name__}.")
        if not text.strip():
            raise AttentionInputError(
                "The prompt is empty: type a few words for the model to continue."
            )
        notices = []
        if len(text) > MAX_PROMPT_CHARS:
            notices.append(f"the text was cut to its first {MAX_PROMPT_CHARS:,} characters")
            text = text[:MAX_PROMPT_CHARS]
        # The template tokens are counted against the limit; only the user's text is cut.
        overhead = len(self.encode(chat_text(""))) if chat else 0
        ids = self.encode(text)
        num_input = len(ids)
        room = max(max_tokens - overhead, 1)
        if len(ids) > room:
            notices.append(f"the prompt was cut to its first {room} of {len(ids)} tokens")
            ids = ids[:room]
            text = self.decode(ids)
        if chat:
            ids = self.encode(chat_text(text))
        arr = np.asarray(ids, dtype=np.int64)
        arr.setflags(write=False)
        notice = ""
        if notices:
            notice = (
                "Long prompt: "
                + " and ".join(notices)
                + (f" (at most {max_tokens} prompt tokens, so every step fits in memory).")
            )
        return Prompt(
            text=text,
            chat=chat,
            input_ids=arr,
            tokens=tuple(self.token_text(i) for i in ids),
            truncated=bool(notices),
            num_input_tokens=num_input,
            notice=notice,
        )


def chat_text(user: str, system: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """SmolLM2's ChatML chat template for one user turn, ending with the assistant's header:

    <|im_start|>system\\n{system}<|im_end|>\\n<|im_start|>user\\n{user}<|im_end|>\\n
    <|im_start|>assistant\\n

    (the GGUF's Jinja template with its default system prompt and add_generation_prompt=True).
    """
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def load_llama(
    path: Path | str | None = None,
    *,
    allow_download: bool = False,
    weights_dtype: np.dtype | type | str = BFLOAT16,
    progress: Callable[[int, int], None] | None = None,
) -> LlamaModel:
    """Load SmolLM2 from a ``.gguf`` file or a Hugging Face directory (found by ``find_llm`` when
    ``path`` is None). Raises ``ModelNotFoundError`` with the install command, or
    ``ModelFileError`` for a damaged file; both are ``AttentionInputError``.
    ``progress(done, total)`` follows the GGUF file's tensors as they are unpacked.
    """
    start = time.perf_counter()
    location = find_llm(allow_download=allow_download) if path is None else location_of(path)
    if location.layout == "gguf":
        raw_config, state, spec, template, file_formats = read_gguf(
            location.path, weights_dtype, progress
        )
        tokenizer = _gguf_tokenizer(spec)
    else:
        raw_config, state, tokenizer, file_formats = read_hf_dir(location.path)
        template = None
    config = LlamaConfig.from_dict(raw_config, source=str(location.path))
    weights = LlamaWeights.from_state_dict(state, config, weights_dtype, str(location.path))
    del state
    return LlamaModel(
        config=config,
        weights=weights,
        tokenizer=tokenizer,
        location=location,
        load_seconds=time.perf_counter() - start,
        chat_template=template,
        saved_as=file_formats,
    )


def _gguf_tokenizer(spec: TokenizerSpec):
    try:
        return build_tokenizer(spec)
    except ImportError:
        raise ModelFileError("Reading the tokenizer needs the package tokenizers.") from None


def run_llama(
    model: LlamaModel,
    input_ids: object,
    cache: LlamaCache | None = None,
    *,
    all_logits: bool = False,
    attend: object = None,
    head_mask: object = None,
    keep: Sequence[str] | None = None,
) -> LlamaTrace:
    """Run the decoder on ``input_ids`` `(n,)`, continuing ``cache`` (None = a fresh prompt).

    Every layer's steps are kept (see ``LlamaLayerSteps``); ``trace.cache`` holds all positions.
    With a cache and one id this is one decoding step: one query row against every cached key.

    ``keep`` names the steps to keep of each layer (``("weights", "q_rot")``; ``()`` for none,
    when only the logits and the cache are wanted): ``trace.layers`` then holds ``KeptSteps``,
    and the rest of a layer's steps is let go before the next layer runs. A pass keeping
    everything holds its (head, n, n) scores four times over in every layer: 340 MB at its
    peak for 192 tokens.

    ``attend`` `(cache + n,)` boolean hides keys (False) from every query, like transformers'
    ``attention_mask``; `(n, cache + n)` says for each new query which keys it may see (on top
    of the causal mask: a sliding window, sinks). ``head_mask`` `(layer, head)` or `(head,)`
    multiplies each query head's output before W_o (0 removes the head, as transformers 4's
    ``head_mask`` did for BERT); the steps keep the heads' softmax patterns unmultiplied.
    """
    ids, past, attend, head_mask = _checked_inputs(model, input_ids, cache, attend, head_mask)
    if past + ids.shape[0] > MAX_CONTEXT_TOKENS:
        raise AttentionInputError(
            f"{past + ids.shape[0]} tokens is more than this page's maximum of "
            f"{MAX_CONTEXT_TOKENS} (prompt and generated tokens together): start again with a "
            "shorter prompt."
        )
    weights = model.weights
    embeddings, rope, scratch = _start(model, ids, past)
    hidden = embeddings
    layers, caches = [], []
    for steps, layer_cache in _layer_by_layer(
        model, embeddings, rope, scratch, cache=cache, attend=attend, head_mask=head_mask
    ):
        layers.append(
            steps if keep is None else KeptSteps({name: getattr(steps, name) for name in keep})
        )
        caches.append(layer_cache)
        hidden = steps.hidden
        del steps  # what keep leaves goes now, not once the next layer has run
    final = rms_norm(hidden, weights.final_norm, model.config.rms_norm_eps)
    logits = _linear(final if all_logits else final[-1:], _unembedding(weights), scratch)
    _check_logits(logits)
    return LlamaTrace(
        input_ids=ids.astype(np.int64),
        positions=np.arange(past, past + ids.shape[0]),
        embeddings=embeddings,
        layers=tuple(layers),
        final_hidden=final,
        logits=logits,
        cache=LlamaCache(tuple(caches), model.config.num_attention_heads),
    )


@dataclass(frozen=True, eq=False)
class TextScore:
    """A text read by the decoder in one pass, only what scoring it needs kept.

    losses         `(n - 1,)` −log p(token i + 1 | what query i may see), in nats
    final          `(n, d_model)` the stream after the final RMSNorm (what the head reads)
    first_weights  `(layer, head, first)` the mean weight queries 1..n-1 give each of the
                   first `first` keys; summed over the last axis, the share on the first
                   tokens (attention sinks)
    """

    losses: np.ndarray
    final: np.ndarray
    first_weights: np.ndarray


# Rows of logits made at a time while scoring: 64 × 49152 float32 is 12.6 MB.
SCORE_ROWS = 64
# The bfloat16 head widened this many rows at a time while scoring (8192 × 576 float32, 18.9 MB):
# six products per block of logits where the 3 MiB blocks of a pass made 36. Each product
# gives up the GIL and waits to take it back, and on a busy server that wait is the cost: the
# KV experiment's logits beside three threads of Python took 5.6 s instead of 9.8 (quiet, the
# same 1.3-1.4 s).
SCORE_HEAD_ROWS = 8192


def score_llama(
    model: LlamaModel,
    input_ids: object,
    *,
    attend: object = None,
    first: int = 1,
    kv_codec: object = None,
) -> TextScore:
    """Read a whole text (up to MAX_SCORED_TOKENS) and keep only its losses, its final stream
    and the weight each head gives the first ``first`` keys: a layer's steps are let go
    as soon as the next layer has read its output, and the logits are made a few rows at a time.

    ``attend`` as in ``run_llama`` (`(n, n)`: which keys each query may see, on top of the
    causal mask). ``kv_codec(layer, k, v) -> (k, v)``, given, replaces each layer's new keys
    (after RoPE) and values `(kv_head, n, d_head)` before attention reads them: a quantized or
    pooled KV cache.
    """
    ids, final, first_weights = read_text(
        model, input_ids, attend=attend, first=first, kv_codec=kv_codec
    )
    losses = compare_next_tokens(model, ids, final, ()).losses[0]
    return TextScore(losses=losses, final=final, first_weights=first_weights)


def read_text(
    model: LlamaModel,
    input_ids: object,
    *,
    attend: object = None,
    first: int = 1,
    kv_codec: object = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``score_llama``'s pass without its logits: the checked ids `(n,)`, the stream after the
    final RMSNorm `(n, d_model)` and the first keys' weights `(layer, head, first)`. For
    callers that read the logits of several passes together (``kv_experiments``)."""
    ids, _, attend, _ = _checked_inputs(model, input_ids, None, attend, None)
    n = ids.shape[0]
    if n > MAX_SCORED_TOKENS:
        raise AttentionInputError(
            f"{n} tokens is more than the {MAX_SCORED_TOKENS} a text can have here: cut it."
        )
    if n < 2:
        raise AttentionInputError("A text of one token has nothing to predict: type more.")
    first = min(check_int(first, "the number of first keys", minimum=1), n)
    weights = model.weights
    hidden, rope, scratch = _start(model, ids, 0)
    shares = []
    for steps, _ in _layer_by_layer(model, hidden, rope, scratch, attend=attend, kv_codec=kv_codec):
        # Queries 1..n-1: query 0 can only see itself.
        shares.append(steps.weights[:, 1:, :first].mean(axis=-2))
        hidden = steps.hidden
        # Let go before the next layer runs, not when its steps replace these: one layer's
        # (head, n, n) scores and weights at a time (~40 MB at 547 tokens), not two.
        del steps
    final = rms_norm(hidden, weights.final_norm, model.config.rms_norm_eps)
    return ids, final, np.stack(shares)


def next_token_losses(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """−log softmax(logits)[target] `(rows,)` for logits `(rows, vocab)` and targets `(rows,)`,
    in nats, worked in float64."""
    logits = logits.astype(np.float64)
    _check_logits(logits)
    # −log softmax(z)_t = log Σ exp(z − max) − (z_t − max), exact where p underflows;
    # worked in place, so that a block holds one (rows, vocab) array, not three (75 MB).
    logits -= logits.max(axis=-1, keepdims=True)
    target_logits = logits[np.arange(targets.size), targets]
    return np.log(np.exp(logits, out=logits).sum(axis=-1)) - target_logits


@dataclass(frozen=True, eq=False)
class NextTokenComparison:
    """What the next-token distributions of several streams over one text of n tokens say,
    position by position: a reference (the full cache, say) and others (smaller caches), none
    for ``score_llama``.

    losses        `(1 + other, n - 1)` −log p of the text's next tokens, the reference first
    kl            `(other, n)` KL(reference ‖ other), in nats
    top1_agrees   `(other, n)` whether the other's most likely next token is the reference's
    """

    losses: np.ndarray
    kl: np.ndarray
    top1_agrees: np.ndarray


def compare_next_tokens(
    model: LlamaModel,
    input_ids: object,
    reference: np.ndarray,
    others: tuple[np.ndarray, ...],
    *,
    rows: int | None = None,
) -> NextTokenComparison:
    """Compare the next-token distribution p = softmax(reference Eᵀ) with q = softmax(other Eᵀ)
    of each other stream, and score each stream on the text's next tokens.

    reference, others `(n, d_model)`: streams after the final RMSNorm (``read_text``) of the
    text `input_ids` `(n,)`. Every stream's logits are made together, `rows` positions of each
    at a time (by default as many as make SCORE_ROWS rows of logits, 12.6 MB): the bfloat16
    unembedding is widened SCORE_HEAD_ROWS rows at a time for each product, so one product of
    all the streams widens it once where a product per stream would widen it once each.
    """
    ids = np.asarray(input_ids)
    streams = [np.asarray(reference), *(np.asarray(other) for other in others)]
    n = ids.shape[0]
    if any(stream.shape != streams[0].shape for stream in streams) or streams[0].ndim != 2:
        raise AttentionInputError(
            "Every stream must be (n, d_model) of one shape, got "
            f"{', '.join(str(stream.shape) for stream in streams)}."
        )
    if streams[0].shape[0] != n:
        raise AttentionInputError(
            f"The streams have {streams[0].shape[0]} positions and the text {n} tokens."
        )
    if rows is None:
        rows = max(1, SCORE_ROWS // len(streams))
    rows = check_int(rows, "rows", minimum=1)
    head = _unembedding(model.weights)
    scratch = None
    if model.weights.storage != "float32":
        scratch = np.empty(min(SCORE_HEAD_ROWS, head.shape[0]) * head.shape[1], np.float32)
    losses = np.empty((len(streams), n - 1))
    kl, agrees = np.empty((len(others), n)), np.empty((len(others), n), dtype=bool)
    for start in range(0, n, rows):
        chunk = slice(start, min(start + rows, n))
        logits = _linear(np.concatenate([stream[chunk] for stream in streams]), head, scratch)
        logits_p, *logits_q = np.split(logits, len(streams))  # each (rows, vocab)
        scored = slice(chunk.start, min(chunk.stop, n - 1))  # the last position has no next
        targets = ids[scored.start + 1 : scored.stop + 1]
        for stream, stream_logits in enumerate((logits_p, *logits_q)):
            losses[stream, scored] = next_token_losses(stream_logits[: targets.size], targets)
        for other, q in enumerate(logits_q):
            # The block's rows at once: a few calls into NumPy where a row each made thousands,
            # every one of them waiting for the GIL again on a busy server.
            kl[other, chunk] = kl_divergence(logits_p, q)
            # The most likely token is the largest logit: no softmax needed.
            agrees[other, chunk] = logits_p.argmax(axis=-1) == q.argmax(axis=-1)
    return NextTokenComparison(losses=losses, kl=kl, top1_agrees=agrees)


def _checked_inputs(model, input_ids, cache, attend, head_mask):
    """ids `(n,)`, the cache's length, and attend and head_mask checked and shaped."""
    config = model.config
    ids = np.asarray(input_ids)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise AttentionInputError(
            f"input_ids must be a non-empty list of token ids, got shape {ids.shape}."
        )
    if ids.min() < 0 or ids.max() >= config.vocab_size:
        raise AttentionInputError(f"Token ids must lie in 0..{config.vocab_size - 1}.")
    if cache is not None:
        _check_cache(cache, config)
    past = 0 if cache is None else cache.length
    n, h_heads = ids.shape[0], config.num_attention_heads
    if attend is not None:
        attend = np.asarray(attend)
        if attend.shape not in ((past + n,), (n, past + n)) or attend.dtype != bool:
            raise AttentionInputError(
                f"attend must be {past + n} booleans, one per position (or ({n}, {past + n}): "
                f"one row per new query), got shape {attend.shape} and dtype {attend.dtype}."
            )
    if head_mask is not None:
        head_mask = np.asarray(head_mask, dtype=np.float32)
        if head_mask.shape not in ((h_heads,), (config.num_hidden_layers, h_heads)):
            raise AttentionInputError(
                f"head_mask must be shaped ({config.num_hidden_layers}, {h_heads}) or "
                f"({h_heads},), got {head_mask.shape}."
            )
        head_mask = np.broadcast_to(head_mask, (config.num_hidden_layers, h_heads))
    return ids, past, attend, head_mask


def _start(model: LlamaModel, ids: np.ndarray, past: int):
    """The embeddings `(n, d_model)` float32, RoPE's (cos, sin) for positions past .. past+n-1,
    and the buffer every widened weight block is written into (None for float32 weights)."""
    config, weights = model.config, model.weights
    n = ids.shape[0]
    embeddings = widen(weights.embed[ids])  # (n, d_model) float32
    # RoPE's cos/sin depend only on the positions: one table for every layer's q and k.
    positions = np.arange(past, past + n, dtype=np.float64)
    rope = rotary_tables(positions, config.head_dim, config.rope_theta, like=embeddings)
    return embeddings, rope, _widening_buffer(model, n)


def _widening_buffer(model: LlamaModel, n: int) -> np.ndarray | None:
    """The buffer a pass over n new tokens widens every weight block into (None for float32
    weights)."""
    if model.weights.storage == "float32":
        return None
    if n < 16:
        # A decoding step's one query row: 1 MiB, a core's L2 here, keeps a block in the cache
        # while it is used (measured per step: 0.75 MiB blocks 40 ms, 1 MiB 34 ms, 2-4 MiB
        # 38-49 ms).
        return np.empty(2**18, np.float32)
    # A prompt: a layer's largest matrix whole (gate and up side by side, 7 MB), one product
    # per matrix. Each product gives up the GIL and waits to take it back, and on a busy server
    # that wait is the cost: beside three threads of Python a 128-token prefill took 2.9-3.2 s
    # against 3.7-3.8 s with 512-row blocks (3 MiB); alone, 0.44-0.47 s either way.
    layer = model.weights.layers[0]
    return np.empty(max(w.size for w in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down)),
                    np.float32)  # fmt: skip


def _layer_by_layer(
    model: LlamaModel,
    hidden: np.ndarray,
    rope: tuple[np.ndarray, np.ndarray],
    scratch: np.ndarray | None,
    *,
    cache: LlamaCache | None = None,
    attend: np.ndarray | None = None,
    head_mask: np.ndarray | None = None,
    kv_codec: object = None,
) -> Iterator[tuple[LlamaLayerSteps, KVCache]]:
    """Each decoder layer's steps and grown cache in turn, each layer reading the output of the
    one before, from `hidden` `(n, d_model)` on. A caller that drops a layer's steps before
    asking for the next has at most one layer's steps alive (the generator drops its own)."""
    for index, layer in enumerate(model.weights.layers):
        steps, layer_cache = _decoder_layer(
            model, index, layer, hidden, None if cache is None else cache.layers[index], rope,
            attend, None if head_mask is None else head_mask[index], scratch, kv_codec,
        )  # fmt: skip
        hidden = steps.hidden
        yield steps, layer_cache
        del steps, layer_cache


def _decoder_layer(
    model: LlamaModel,
    index: int,
    layer: LlamaLayerWeights,
    hidden: np.ndarray,
    cache: KVCache | None,
    rope: tuple[np.ndarray, np.ndarray],
    attend: np.ndarray | None,
    head_mask: np.ndarray | None,
    scratch: np.ndarray | None,
    kv_codec: object = None,
) -> tuple[LlamaLayerSteps, KVCache]:
    """One decoder layer on `hidden` `(n, d_model)`: its steps, and its cache grown by n."""
    config = model.config
    h_heads, kv_heads, dh = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    group, eps, n = config.group_size, config.rms_norm_eps, hidden.shape[0]
    x = rms_norm(hidden, layer.attn_norm, eps)
    qkv = _linear(x, layer.w_qkv, scratch)  # (n, (H + 2·KV)·d_head): q, k, v side by side
    qkv = qkv.reshape(n, h_heads + 2 * kv_heads, dh).transpose(1, 0, 2)
    q = qkv[:h_heads]  # (head, n, d_head)
    k = qkv[h_heads : h_heads + kv_heads]  # (kv_head, n, d_head)
    v = qkv[h_heads + kv_heads :]  # (kv_head, n, d_head)
    # RoPE turns each (i, i + d/2) pair by an angle ∝ position, so q·k sees only the offset.
    qk_rot = rotate_half_pairs(qkv[: h_heads + kv_heads], *rope)  # q and k in one call
    q_rot, k_rot = qk_rot[:h_heads], qk_rot[h_heads:]
    cached_k, cached_v = (k_rot, v) if kv_codec is None else kv_codec(index, k_rot, v)
    # GQA: the `group` query heads of a KV head broadcast against its one key/value set.
    step = decode_step(
        cache,
        q_rot.reshape(kv_heads, group, n, dh),
        cached_k[:, None],
        cached_v[:, None],
        attend=attend,
        checked=False,  # ids and cache were checked by the caller; these arrays are our own
    )
    head_outputs = step.output.reshape(h_heads, n, dh)  # (head, n, d_head)
    if head_mask is not None:
        head_outputs = head_outputs * head_mask[:, None, None]
    concat = head_outputs.transpose(1, 0, 2).reshape(n, h_heads * dh)
    attn_output = _linear(concat, layer.w_o, scratch)  # (n, d_model)
    # Pre-norm residuals: each block reads a normalised copy and adds its result back.
    residual = hidden + attn_output
    y = rms_norm(residual, layer.ffn_norm, eps)
    # SwiGLU: the SiLU-gated branch decides, element by element, how much of `up` passes.
    gate_up = _linear(y, layer.w_gate_up, scratch)  # (n, 2·d_ff): gate, up side by side
    gate, up = gate_up[:, : config.intermediate_size], gate_up[:, config.intermediate_size :]
    gated = silu(gate)
    gated *= up
    ffn_output = _linear(gated, layer.w_down, scratch)  # (n, d_model)
    steps = LlamaLayerSteps(
        input=hidden,
        attn_norm=x,
        q=q,
        k=k,
        v=v,
        q_rot=q_rot,
        k_rot=k_rot,
        attention=step.attention,
        attn_output=attn_output,
        ffn_output=ffn_output,
        hidden=residual + ffn_output,
    )
    return steps, step.cache


def _unembedding(weights: LlamaWeights) -> np.ndarray:
    return weights.lm_head if weights.lm_head is not None else weights.embed


def _check_logits(logits: np.ndarray) -> None:
    # The layers skip the attention functions' per-call checks; a damaged weight file still
    # shows here, once, instead of as NaN probabilities.
    if not np.all(np.isfinite(logits)):
        raise ModelFileError(
            "The model produced non-finite logits: its weight file is damaged (NaN or huge "
            "values). Reinstall or download the model again."
        )


def _check_cache(cache: object, config: LlamaConfig) -> None:
    """A cache from ``run_llama`` on a model of this architecture (run_llama's layers trust
    it)."""
    layers, kv = config.num_hidden_layers, config.num_key_value_heads
    if not isinstance(cache, LlamaCache):
        raise AttentionInputError(
            "cache must be the LlamaCache of an earlier run_llama call (or None for a prompt)."
        )
    shape = cache.shape
    if (
        shape[0] != layers
        or shape[2] != kv
        or shape[4] != config.head_dim
        or any(c.keys.dtype != np.float32 or c.values.shape != c.keys.shape for c in cache.layers)
    ):
        raise AttentionInputError(
            f"The cache has shape {shape} (layer, K and V, KV head, position, d_head) but this "
            f"model needs ({layers}, 2, {kv}, position, {config.head_dim}) in float32: it comes "
            "from another model."
        )


def first_token_share(weights: np.ndarray) -> np.ndarray:
    """Attention-sink share: the mean weight queries 1..n-1 give key 0, `(..., head)`.

    weights `(..., head, q_pos, k_pos)`. Query 0 is left out: causally it can only see itself,
    so its 1.0 says nothing. Many heads of trained decoders park most of their weight on the
    first token (Xiao et al. 2023, "attention sinks") when they have nothing better to do.
    """
    w = np.asarray(weights)
    if w.shape[-2] < 2:
        raise AttentionInputError("The sink share needs at least two tokens.")
    return w[..., 1:, 0].mean(axis=-1)


# ------------------------------------------------------------------------------- generation


def next_token_probabilities(
    logits: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
) -> np.ndarray:
    """p = softmax(logits / T) over the tokens top-k, top-p and min-p keep (others get 0),
    `(vocab,)`: the last stage of ``sampling.sampling_steps``.

    T → 0 approaches greedy decoding (all mass on the argmax); T > 1 flattens the distribution.
    top_k None or 0, top_p 1 and min_p 0 keep every token.
    """
    if not temperature > 0:
        raise AttentionInputError("The temperature must be positive (use greedy for T = 0).")
    return sampling_steps(logits, temperature, top_k or 0, top_p, min_p).probabilities


def sample_next_token(
    logits: np.ndarray,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
    rng: np.random.Generator | None = None,
) -> int:
    """Greedy (argmax) for temperature 0, else a draw from ``next_token_probabilities``."""
    if temperature == 0:
        return greedy_token(logits)
    steps = sampling_steps(logits, temperature, top_k or 0, top_p, min_p)
    return sample_token(steps, rng if rng is not None else np.random.default_rng(0))


@dataclass(frozen=True, eq=False)
class GenerationStep:
    """One generated token: its id and text, its probability, the cache after it was read."""

    token_id: int
    token: str
    probability: float
    cache_length: int
    cache_bytes: int
    seconds: float


@dataclass(frozen=True, eq=False)
class Generation:
    """prompt ids, the generated steps in order, the final cache, and why generation stopped."""

    prompt_ids: np.ndarray
    steps: tuple[GenerationStep, ...]
    cache: LlamaCache
    stop_reason: str

    @property
    def token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]


def generate(
    model: LlamaModel,
    prompt_ids: object,
    *,
    max_new_tokens: int = 20,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
    stop_at_eos: bool = True,
) -> Generation:
    """Prefill the prompt once, then one token per step, each step reading the cache.

    Greedy when temperature is 0; otherwise sampled from softmax(logits / T) over the top_k
    logits with ``np.random.default_rng(seed)``, so a seed always gives the same text. Stops at
    ``<|im_end|>`` (with ``stop_at_eos``), after ``max_new_tokens``, or at MAX_CONTEXT_TOKENS.
    """
    rng = np.random.default_rng(seed)
    trace = run_llama(model, prompt_ids)
    logits, cache = trace.next_token_logits, trace.cache
    prompt = trace.input_ids
    steps: list[GenerationStep] = []
    reason = "max_new_tokens"
    while len(steps) < max_new_tokens:
        start = time.perf_counter()
        token = sample_next_token(logits, temperature=temperature, top_k=top_k, rng=rng)
        p = next_token_probabilities(logits, temperature or 1.0, top_k)[token]
        if stop_at_eos and token == model.eos_token_id:
            reason = "eos"
            break
        if cache.length >= MAX_CONTEXT_TOKENS:
            reason = "max_context"
            break
        # The new token's single query attends to the cached keys; only its k, v are appended.
        trace = run_llama(model, [token], cache)
        logits, cache = trace.next_token_logits, trace.cache
        steps.append(
            GenerationStep(
                token_id=token,
                token=model.token_text(token),
                probability=float(p),
                cache_length=cache.length,
                cache_bytes=cache.bytes_used,
                seconds=time.perf_counter() - start,
            )
        )
    return Generation(prompt, tuple(steps), cache, reason)
