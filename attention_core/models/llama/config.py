"""A decoder checkpoint's architecture numbers, read from its config (or a GGUF's metadata).

One forward pass runs eight families, as Hugging Face's modeling files for them are
``modeling_llama.py`` with a few pieces switched on: the family is named by ``model_type``.

    llama      RMSNorm, RoPE (rotate_half), grouped-query attention, SwiGLU; no biases
    qwen2      the same, plus biases on the q, k and v projections (none on o)
    mistral    llama with a sliding window (run when no text read here is longer)
    qwen3      llama with QK-norm: q and k RMS-normalised per head before the rotation
    smollm3    llama with NoPE layers: every few layers rotate nothing
    olmo2      llama with QK-norm over the whole projection and norms after each block
               instead of before it
    gemma2     sandwich norms (before and after each block, gains stored as γ − 1), local
               sliding-window layers between global ones, scores and logits soft-capped,
               a query scale from the config, embeddings × √d_model, GELU (tanh) gate
    gemma3     gemma2 without the caps, with per-head QK-norm and a RoPE base of its own for
               the local layers (``gemma3_text``, or a Gemma 3 checkpoint's text part)

RoPE runs unscaled, or with Llama 3.1's "llama3" scaling (Llama 3.1 and 3.2 checkpoints).
What the forward does not run is refused here, by name, before any weight is read: another
``model_type``, another RoPE scaling (``rope_scaling`` / ``rope_parameters.rope_type``), a bias
the family does not carry (``attention_bias``, ``mlp_bias``), another activation, a layer type
other than full and sliding attention, Gemma 3's bidirectional attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..checkpoint import config_errors, optional_id
from ..decoder import MAX_SCORED_TOKENS
from ..loading import ModelFileError, supported_activation

__all__ = ["SUPPORTED_FAMILIES", "LlamaConfig", "parameter_count"]

# model_type -> what the family adds to llama's architecture.
SUPPORTED_FAMILIES = {
    "llama": "no biases",
    "qwen2": "biases on q, k and v",
    "mistral": "a sliding window, run when it is at least as long as any text read here",
    "qwen3": "QK-norm per head",
    "smollm3": "NoPE layers",
    "olmo2": "QK-norm over the projection, norms after each block",
    "gemma2": "sandwich norms, local and global layers, soft-capped scores and logits",
    "gemma3_text": "sandwich norms, QK-norm per head, local layers with their own RoPE base",
}
# A Gemma 3 checkpoint with a vision tower names its text part's family inside it.
MULTIMODAL = {"gemma3": "gemma3_text"}
# The most tokens a pass reads here (MAX_SCORED_TOKENS): a sliding window at least this long
# hides no key, so the model computes exactly as with full causal attention.
LONGEST_PASS = MAX_SCORED_TOKENS
GEMMA = ("gemma2", "gemma3_text")
# Gemma 3's text settings that its multimodal checkpoints leave to transformers' defaults
# (``Gemma3TextConfig``); a config that gives them keeps its own.
GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
    "rope_local_base_freq": 10_000.0, "sliding_window": 4096, "query_pre_attn_scalar": 256,
    "hidden_activation": "gelu_pytorch_tanh", "sliding_window_pattern": 6,
}  # fmt: skip


@dataclass(frozen=True)
class LlamaConfig:
    """Architecture numbers. SmolLM2-135M: vocab 49152, d_model 576, 30 layers, 9 query heads
    sharing 3 KV heads (d_head 64), FFN 1536, RoPE base 100000, RMSNorm eps 1e-5, tied head.

    head_dim             d_head: the config's ``head_dim`` when given, else d_model / heads
    qkv_bias             q, k and v projections carry biases (Qwen2)
    tie_word_embeddings  the output head is the embedding matrix; None when the file does not
                         say (a GGUF without an output tensor says True): the weights decide
    rope_llama3          Llama 3.1's RoPE scaling (factor, low_freq_factor, high_freq_factor,
                         original_max_position_embeddings), or None: unscaled
    qk_norm              None, "head" (q and k RMS-normalised per head: Qwen3, Gemma 3) or
                         "projection" (over all heads at once: OLMo 2), before the rotation
    norms                "pre" (a norm before each block), "sandwich" (before and after:
                         Gemma) or "post" (after only: OLMo 2)
    gain_offset          1.0 where a norm's stored gain is γ − 1 (Gemma), else 0.0
    windows              per layer, the sliding window of a local layer or None for a global
                         one; () when every layer is global
    rope_bases           per layer, its RoPE base, or None for a NoPE layer (no rotation);
                         () when every layer rotates with rope_theta
    query_scale          the scale of q·k (Gemma: query_pre_attn_scalar^-½); None: 1/√d_head
    attn_softcap         c of the scores' c·tanh(x/c) (Gemma 2), or None
    final_softcap        c of the logits' c·tanh(x/c) (Gemma 2), or None
    embed_scale          the embeddings' factor (Gemma: √d_model), or None
    activation           the gate's activation: "silu" or "gelu_tanh" (Gemma)
    """

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
    model_type: str = "llama"
    head_dim: int = None  # type: ignore[assignment]  # filled in: d_model / heads
    qkv_bias: bool = False
    tie_word_embeddings: bool | None = None
    rope_llama3: tuple[float, float, float, float] | None = None
    qk_norm: Literal["head", "projection"] | None = None
    norms: Literal["pre", "sandwich", "post"] = "pre"
    gain_offset: float = 0.0
    windows: tuple[int | None, ...] = ()
    rope_bases: tuple[float | None, ...] = ()
    query_scale: float | None = None
    attn_softcap: float | None = None
    final_softcap: float | None = None
    embed_scale: float | None = None
    activation: Literal["silu", "gelu_tanh"] = "silu"

    def __post_init__(self) -> None:
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)

    @property
    def group_size(self) -> int:
        """Query heads per KV head (H / KV)."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def scale(self) -> float:
        """The factor q·k is multiplied by before the softmax."""
        return self.query_scale if self.query_scale is not None else self.head_dim**-0.5

    def window(self, layer: int) -> int | None:
        """Layer ``layer``'s sliding window (the last keys each query reads), None if global."""
        return self.windows[layer] if self.windows else None

    def rope_base(self, layer: int) -> float | None:
        """Layer ``layer``'s RoPE base, None for a layer that rotates nothing (NoPE)."""
        return self.rope_bases[layer] if self.rope_bases else self.rope_theta

    @classmethod
    def from_dict(cls, config: dict[str, Any], source: str = "config.json") -> LlamaConfig:
        family = config.get("model_type", "llama")
        if family in MULTIMODAL and isinstance(config.get("text_config"), dict):
            family = MULTIMODAL[family]
            config = {**GEMMA3_TEXT_DEFAULTS, **config["text_config"], "model_type": family}
        if family not in SUPPORTED_FAMILIES:
            raise ModelFileError(
                f"{source} describes a {family!r} model; our decoder code runs "
                f"{', '.join(repr(name) for name in SUPPORTED_FAMILIES)} models only."
            )
        _refuse_what_the_forward_does_not_run(config, family, source)
        scaling = _rope_scaling(config)
        with config_errors(source, family):
            made = cls(
                vocab_size=int(config["vocab_size"]),
                hidden_size=int(config["hidden_size"]),
                num_hidden_layers=int(config["num_hidden_layers"]),
                num_attention_heads=int(config["num_attention_heads"]),
                num_key_value_heads=int(
                    config.get("num_key_value_heads") or config["num_attention_heads"]
                ),
                intermediate_size=int(config["intermediate_size"]),
                rope_theta=float(_rope_theta(config)),
                rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
                bos_token_id=optional_id(config.get("bos_token_id")),
                eos_token_id=optional_id(config.get("eos_token_id")),
                model_type=family,
                head_dim=None if config.get("head_dim") is None else int(config["head_dim"]),
                qkv_bias=family == "qwen2",
                tie_word_embeddings=(
                    None
                    if config.get("tie_word_embeddings") is None
                    else bool(config["tie_word_embeddings"])
                ),
                rope_llama3=None
                if scaling is None
                else (
                    float(scaling["factor"]),
                    float(scaling["low_freq_factor"]),
                    float(scaling["high_freq_factor"]),
                    # transformers falls back on the model's context when it is not given
                    float(
                        scaling.get("original_max_position_embeddings")
                        or config["max_position_embeddings"]
                    ),
                ),
                **_family_pieces(config, family),
            )
        if made.head_dim % 2 or made.num_attention_heads % made.num_key_value_heads:
            raise ModelFileError(
                f"{source}: d_head {made.head_dim} is odd (RoPE turns pairs), or "
                f"{made.num_attention_heads} heads do not group into {made.num_key_value_heads} "
                "KV heads."
            )
        if config.get("head_dim") is None and made.hidden_size % made.num_attention_heads:
            raise ModelFileError(
                f"{source}: {made.num_attention_heads} heads do not split d_model "
                f"{made.hidden_size} evenly, and the configuration gives no head_dim."
            )
        return made


def _family_pieces(config: dict[str, Any], family: str) -> dict[str, Any]:
    """The LlamaConfig fields in which ``family`` departs from llama, read from ``config``."""
    layers = int(config["num_hidden_layers"])
    pieces: dict[str, Any] = {}
    if family in ("qwen3", "gemma3_text"):
        pieces["qk_norm"] = "head"
    if family == "olmo2":
        pieces.update(qk_norm="projection", norms="post")
    if family in ("qwen3", "smollm3", *GEMMA):
        types = _layer_types(config, family, layers)
        if "sliding_attention" in types:
            window = int(config["sliding_window"])
            pieces["windows"] = tuple(window if t == "sliding_attention" else None for t in types)
        if family == "gemma3_text":
            local, global_ = _gemma3_rope_bases(config)
            pieces["rope_bases"] = tuple(
                local if t == "sliding_attention" else global_ for t in types
            )
    if family == "smollm3":
        theta = float(_rope_theta(config))
        pieces["rope_bases"] = tuple(theta if use else None for use in _uses_rope(config, layers))
    if family in GEMMA:
        pieces.update(
            norms="sandwich",
            gain_offset=1.0,
            query_scale=float(config.get("query_pre_attn_scalar", 256)) ** -0.5,
            embed_scale=float(config["hidden_size"]) ** 0.5,
            activation="gelu_tanh",
            # Gemma 3's attention never reads attn_logit_softcapping (transformers' own code
            # passes it no cap): its scores are capped only by Gemma 2.
            attn_softcap=_optional_float(config.get("attn_logit_softcapping"))
            if family == "gemma2"
            else None,
            final_softcap=_optional_float(config.get("final_logit_softcapping")),
        )
    return pieces


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _layer_types(config: dict[str, Any], family: str, layers: int) -> list[str]:
    """Each layer's attention, "full_attention" or "sliding_attention": the config's
    ``layer_types``, or the pattern transformers builds for the family when it gives none."""
    types = config.get("layer_types")
    if types is None:
        if family == "gemma2":  # local, global, local, global ...
            # (i ± 1) % 2 alike: every other layer, from the first.
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention"  # pragma: no mutate
                     for i in range(layers)]  # fmt: skip
        elif family == "gemma3_text":  # five local layers, then a global one
            every = int(config.get("sliding_window_pattern")
                        or config.get("_sliding_window_pattern") or 6)  # fmt: skip
            types = ["sliding_attention" if (i + 1) % every else "full_attention"
                     for i in range(layers)]  # fmt: skip
        elif family == "smollm3":  # its NoPE layers slide, when it slides at all
            types = ["full_attention" if use else "sliding_attention"
                     for use in _uses_rope(config, layers)]  # fmt: skip
        elif config.get("use_sliding_window") and config.get("sliding_window") is not None:
            # Qwen3 slides from layer max_window_layers on (28 unless the config says).
            first = int(config.get("max_window_layers", 28))
            types = ["sliding_attention" if i >= first else "full_attention"
                     for i in range(layers)]  # fmt: skip
        else:
            types = ["full_attention"] * layers
    if family == "smollm3" and not config.get("use_sliding_window"):
        types = ["full_attention"] * layers  # SmolLM3 lists windows it only runs when asked
    if len(types) != layers:
        raise ValueError(f"layer_types lists {len(types)} layers for {layers}")
    return list(types)


def _uses_rope(config: dict[str, Any], layers: int) -> list[int]:
    """SmolLM3's ``no_rope_layers``: 1 for a layer that rotates, 0 for a NoPE one (every
    ``no_rope_layer_interval``-th, 4 unless the config says, when it lists none)."""
    every = int(config.get("no_rope_layer_interval", 4))
    return config.get("no_rope_layers") or [int((i + 1) % every != 0) for i in range(layers)]


def _gemma3_rope_bases(config: dict[str, Any]) -> tuple[float, float]:
    """Gemma 3's RoPE bases (local layers', global layers'): transformers 5 keeps one set of
    RoPE settings per layer type, 4 a ``rope_local_base_freq`` beside ``rope_theta``."""
    nested = config.get("rope_parameters") or {}
    if "sliding_attention" in nested:
        return (float(nested["sliding_attention"]["rope_theta"]),
                float(nested["full_attention"]["rope_theta"]))  # fmt: skip
    return float(config.get("rope_local_base_freq", 10_000.0)), float(_rope_theta(config))


def parameter_count(config: LlamaConfig) -> int:
    """How many numbers the checkpoint holds, from its config alone (no weight read), counted
    as ``sum(p.numel() for p in model.parameters())`` counts transformers' model: a tied head
    once. A config that does not say whether the head is tied counts it untied, as
    transformers' default builds it, so a cap errs on the safe side."""
    d, dh, ff = config.hidden_size, config.head_dim, config.intermediate_size
    q_rows, kv_rows = config.num_attention_heads * dh, config.num_key_value_heads * dh
    attention = d * q_rows + 2 * d * kv_rows + q_rows * d
    if config.qkv_bias:
        attention += q_rows + 2 * kv_rows
    if config.qk_norm == "head":
        attention += 2 * dh  # one gain over d_head for q, one for k
    elif config.qk_norm == "projection":
        attention += q_rows + kv_rows
    norms = 4 if config.norms == "sandwich" else 2
    layer = norms * d + attention + 3 * d * ff  # the norms' gains, attention, gate/up/down
    embedding = config.vocab_size * d
    head = 0 if config.tie_word_embeddings else embedding
    return embedding + config.num_hidden_layers * layer + d + head


def _rope_theta(config: dict[str, Any]) -> Any:
    theta = config.get("rope_theta")
    if theta is None:  # transformers >= 5 nests it under rope_parameters, by layer type or not
        nested = config.get("rope_parameters") or {}
        theta = (nested.get("full_attention") or nested).get("rope_theta", 10000.0)
    return theta


def _rope_scaling(config: dict[str, Any]) -> dict[str, Any] | None:
    """The RoPE scaling's settings with its type under "rope_type" (transformers 4's
    ``rope_scaling``, or 5's ``rope_parameters``, for every layer type), or None when RoPE is
    unscaled."""
    for key in ("rope_scaling", "rope_parameters"):
        scaling = config.get(key)
        if not isinstance(scaling, dict):
            continue
        for settings in (scaling, *(v for v in scaling.values() if isinstance(v, dict))):
            rope_type = settings.get("rope_type", settings.get("type"))
            if rope_type not in (None, "default"):
                return {**settings, "rope_type": rope_type}
    return None


def _refuse_what_the_forward_does_not_run(config: dict[str, Any], family: str, source: str):
    """A ModelFileError naming the first setting of ``config`` that our forward would ignore
    (and so compute other numbers than the checkpoint's own code)."""
    scaling = _rope_scaling(config)
    if scaling is not None and scaling["rope_type"] != "llama3":
        raise ModelFileError(
            f"{source} scales RoPE ({scaling['rope_type']!r}); our decoder code runs unscaled "
            "RoPE or Llama 3's 'llama3' scaling only."
        )
    partial = (config.get("rope_parameters") or {}).get("partial_rotary_factor")
    partial = config.get("partial_rotary_factor", partial)
    if partial not in (None, 1, 1.0):
        raise ModelFileError(
            f"{source} rotates a part of each head ({partial!r}); our decoder code rotates "
            "whole heads only (partial_rotary_factor 1)."
        )
    for which in ("attention_bias", "mlp_bias"):
        if config.get(which):
            raise ModelFileError(
                f"{source} sets {which}: our decoder code runs projections without biases (the "
                "qwen2 family's q, k and v biases are the only ones it adds)."
            )
    if family in GEMMA:
        supported_activation(
            config, "hidden_activation", ("gelu_pytorch_tanh",), source=source,
            code="our Gemma code", what="GELU's tanh form",
        )  # fmt: skip
    else:
        supported_activation(
            config, "hidden_act", ("silu",), source=source, code="our decoder code", what="SwiGLU"
        )
    window = config.get("sliding_window")
    if family == "mistral" and window is not None and int(window) < LONGEST_PASS:
        raise ModelFileError(
            f"{source} slides a window of {window} tokens; our decoder code runs full causal "
            f"attention, the same as a window of at least {LONGEST_PASS} (the most it reads)."
        )
    if family in ("llama", "qwen2", "mistral") and config.get("use_sliding_window"):
        raise ModelFileError(
            f"{source} turns on a sliding attention window; our {family} code runs full causal "
            "attention only (use_sliding_window false)."
        )
    other = sorted(set(config.get("layer_types") or ()) - {"full_attention", "sliding_attention"})
    if other:
        raise ModelFileError(
            f"{source} lists layers of type {other[0]!r}; our decoder code runs "
            "'full_attention' and 'sliding_attention' layers only."
        )
    if config.get("use_bidirectional_attention"):
        raise ModelFileError(
            f"{source} sets use_bidirectional_attention: our decoder code runs causal "
            "attention only (each token reads the ones before it)."
        )
