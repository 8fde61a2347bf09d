"""A pretrained BERT encoder (all-MiniLM-L6-v2) run by our own NumPy attention code.

The forward pass is the post-layer-norm encoder of BERT (Devlin et al., 2019), exactly as
Hugging Face ``transformers.BertModel`` computes it in eval mode (no dropout):

    h_0     = LayerNorm(E_word[ids] + E_pos[0..n-1] + E_type[0])             (q_pos, d_model)
    for each layer l = 1..L:
        a   = MultiHead(h_{l-1})             our `multi_head_attention`, W_o included
        x   = LayerNorm(h_{l-1} + a)         residual, then normalise (post-LN)
        f   = GELU(x W_1ᵀ + b_1) W_2ᵀ + b_2  position-wise feed-forward, d_model -> d_ff -> d_model
        h_l = LayerNorm(x + f)

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) · γ + β   over the last axis, eps from config
    GELU(x)      = x · Φ(x) = ½ x (1 + erf(x / √2))            the exact (erf) form, not tanh

Everything is float32, like the checkpoint. ``run_bert`` returns a frozen ``BertTrace`` holding
every intermediate, named so a page can say ``trace.layers[3].attention_weights`` (short for
``trace.layers[3].attention.attention.weights``) or ``trace.attention_weights[3]``, the same
numbers stacked as `(layer, head, q_pos, k_pos)`.

Loading needs ``safetensors`` and ``tokenizers`` (imported when a model is loaded, see
``loading.py``); torch and transformers are never imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from attention_core.multihead import MultiHeadParams, MultiHeadSteps, multi_head_attention
from attention_core.validation import AttentionInputError

from .layers import gelu, layer_norm
from .loading import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    ModelFileError,
    ModelLocation,
    find_model_dir,
    missing_model_files,
    read_config,
    read_tokenizer,
    read_weights,
    release_file_pages,
    widen,
)

__all__ = [
    "BertConfig",
    "BertEmbeddingWeights",
    "BertLayerSteps",
    "BertLayerWeights",
    "BertModel",
    "BertTrace",
    "BertWeights",
    "LayerNormParams",
    "TokenizedText",
    "load_bert",
    "run_bert",
    "run_bert_ids",
]

# The vocabulary's embedding table, as Hugging Face's BertModel names it.
WORD_TABLE = "embeddings.word_embeddings.weight"


# ----------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class BertConfig:
    """The architecture numbers from a Hugging Face BERT ``config.json``.

    all-MiniLM-L6-v2: vocab 30522, d_model 384, 6 layers, 12 heads (d_head 32), d_ff 1536,
    512 positions, 2 token types, layer-norm eps 1e-12, GELU (erf).
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str = "gelu"
    pad_token_id: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, config: dict[str, Any], source: str = CONFIG_FILE) -> BertConfig:
        """Build and check a config from the parsed JSON; problems raise ``ModelFileError``."""
        if config.get("model_type", "bert") != "bert":
            raise ModelFileError(
                f"{source} describes a {config.get('model_type')!r} model; this page runs BERT "
                "encoders only (model_type 'bert')."
            )
        required = [f.name for f in fields(cls) if f.name not in ("hidden_act", "pad_token_id")]
        missing = [name for name in required if name not in config]
        if missing:
            raise ModelFileError(
                f"{source} has no {', '.join(missing)}: it is not a complete BERT configuration."
            )
        values: dict[str, Any] = {}
        for name in [*required, "pad_token_id"]:
            if name not in config:
                continue
            value = config[name]
            if name == "layer_norm_eps":
                ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
                ok = ok and (value > 0 or name == "pad_token_id")
            if not ok:
                raise ModelFileError(
                    f"{source}: {name} is {value!r}, which is not a valid size. The file is "
                    "damaged or not a BERT configuration."
                )
            values[name] = float(value) if name == "layer_norm_eps" else int(value)
        act = config.get("hidden_act", "gelu")
        if act != "gelu":
            raise ModelFileError(
                f"{source} asks for the activation {act!r}; this implementation computes the "
                "exact GELU ('gelu', with erf) only."
            )
        position_type = config.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ModelFileError(
                f"{source} uses {position_type!r} position embeddings; this implementation "
                "supports BERT's learned 'absolute' position embeddings only."
            )
        if values["hidden_size"] % values["num_attention_heads"]:
            raise ModelFileError(
                f"{source}: hidden_size {values['hidden_size']} is not divisible by "
                f"num_attention_heads {values['num_attention_heads']}, so the heads cannot "
                "split it evenly."
            )
        return cls(hidden_act=act, **values)


# ----------------------------------------------------------------------------------- weights


@dataclass(frozen=True, eq=False)
class LayerNormParams:
    """γ (``weight``) and β (``bias``) of a LayerNorm, both `(d_model,)`."""

    weight: np.ndarray
    bias: np.ndarray


@dataclass(frozen=True, eq=False)
class BertEmbeddingWeights:
    """word `(vocab, d_model)`, position `(max_pos, d_model)`, token_type `(types, d_model)`."""

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    layer_norm: LayerNormParams


@dataclass(frozen=True, eq=False)
class BertLayerWeights:
    """One encoder layer, every matrix in nn.Linear layout (``y = x @ W.T + b``).

    attention            W_q, W_k, W_v, W_o `(d_model, d_model)` and their biases
    attention_norm       LayerNorm after the attention residual
    intermediate_weight  `(d_ff, d_model)`, intermediate_bias `(d_ff,)`
    output_weight        `(d_model, d_ff)`, output_bias `(d_model,)`
    output_norm          LayerNorm after the feed-forward residual
    """

    attention: MultiHeadParams
    attention_norm: LayerNormParams
    intermediate_weight: np.ndarray
    intermediate_bias: np.ndarray
    output_weight: np.ndarray
    output_bias: np.ndarray
    output_norm: LayerNormParams


@dataclass(frozen=True, eq=False)
class BertWeights:
    """All weights of a BERT encoder (the pooler is not used: the page shows token states)."""

    embeddings: BertEmbeddingWeights
    layers: tuple[BertLayerWeights, ...]

    @classmethod
    def from_state_dict(
        cls, state: dict[str, np.ndarray], config: BertConfig, source: str = WEIGHTS_FILE
    ) -> BertWeights:
        """Pick and check the tensors named like Hugging Face's ``BertModel`` state dict.

        Names may carry a ``bert.`` prefix (checkpoints saved from a task head). Every array is
        converted to float32 and made read-only, so a cached model cannot be changed by accident.
        """
        if state and all(name.startswith("bert.") for name in state if "embeddings" in name):
            state = {name.removeprefix("bert."): value for name, value in state.items()}
        d, d_ff = config.hidden_size, config.intermediate_size
        problems: list[str] = []

        def take(name: str, shape: tuple[int, ...]) -> np.ndarray:
            if name not in state:
                problems.append(f"{name} is missing")
                return np.zeros(shape, dtype=np.float32)
            arr = state[name]
            if tuple(arr.shape) != shape:
                problems.append(f"{name} has shape {tuple(arr.shape)}, expected {shape}")
                return np.zeros(shape, dtype=np.float32)
            if arr.dtype != np.uint16 and not np.issubdtype(arr.dtype, np.floating):
                problems.append(f"{name} holds {arr.dtype} values, expected floats")
                return np.zeros(shape, dtype=np.float32)
            # uint16 is bfloat16 bits (read_weights): widened exactly, like float16 and float64.
            out = np.ascontiguousarray(widen(arr), dtype=np.float32)
            if not np.isfinite(out).all():
                problems.append(f"{name} contains NaN or infinite values")
            out.setflags(write=False)
            return out

        def norm(prefix: str) -> LayerNormParams:
            return LayerNormParams(take(f"{prefix}.weight", (d,)), take(f"{prefix}.bias", (d,)))

        embeddings = BertEmbeddingWeights(
            word=take(WORD_TABLE, (config.vocab_size, d)),
            position=take(
                "embeddings.position_embeddings.weight", (config.max_position_embeddings, d)
            ),
            token_type=take("embeddings.token_type_embeddings.weight", (config.type_vocab_size, d)),
            layer_norm=norm("embeddings.LayerNorm"),
        )
        layers = []
        for i in range(config.num_hidden_layers):
            p = f"encoder.layer.{i}"
            attn = f"{p}.attention.self"
            params = MultiHeadParams(
                w_q=take(f"{attn}.query.weight", (d, d)),
                w_k=take(f"{attn}.key.weight", (d, d)),
                w_v=take(f"{attn}.value.weight", (d, d)),
                w_o=take(f"{p}.attention.output.dense.weight", (d, d)),
                b_q=take(f"{attn}.query.bias", (d,)),
                b_k=take(f"{attn}.key.bias", (d,)),
                b_v=take(f"{attn}.value.bias", (d,)),
                b_o=take(f"{p}.attention.output.dense.bias", (d,)),
            )
            layers.append(
                BertLayerWeights(
                    attention=params,
                    attention_norm=norm(f"{p}.attention.output.LayerNorm"),
                    intermediate_weight=take(f"{p}.intermediate.dense.weight", (d_ff, d)),
                    intermediate_bias=take(f"{p}.intermediate.dense.bias", (d_ff,)),
                    output_weight=take(f"{p}.output.dense.weight", (d, d_ff)),
                    output_bias=take(f"{p}.output.dense.bias", (d,)),
                    output_norm=norm(f"{p}.output.LayerNorm"),
                )
            )
        if problems:
            shown = "; ".join(problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise ModelFileError(
                f"The weights in {source} do not match the configuration: {shown}{more}. The "
                "weights and config.json must come from the same model."
            )
        return cls(embeddings=embeddings, layers=tuple(layers))


# ------------------------------------------------------------------------------ the model


@dataclass(frozen=True)
class TokenizedText:
    """What the tokenizer made of a text: the exact tokens the model sees (no padding).

    tokens            e.g. ("[CLS]", "the", "animal", ..., "[SEP]")
    input_ids         `(q_pos,)` int64 vocabulary ids, one per token
    truncated         True if the text had more tokens than the model's positions (512) and
                      the end was cut off
    num_input_tokens  how many tokens the whole text would have had (== len(tokens) unless
                      truncated)
    """

    text: str
    tokens: tuple[str, ...]
    input_ids: np.ndarray
    truncated: bool
    num_input_tokens: int


@dataclass(frozen=True, eq=False)
class BertLayerSteps:
    """Every intermediate of one encoder layer, in the order it happens. `n` = q_pos.

    input               `(n, d_model)`  the previous layer's hidden state
    attention           `MultiHeadSteps`: q/k/v `(n, d_model)`, q_heads/k_heads/v_heads
                        `(head, n, d_head)`, attention.weights `(head, n, n)` (query rows,
                        key columns), concat `(n, d_model)`, output `(n, d_model)` (after W_o)
    attention_residual  `(n, d_model)`  input + attention.output
    attention_norm      `(n, d_model)`  LayerNorm(attention_residual)
    ffn_preactivation   `(n, d_ff)`     attention_norm @ W_1ᵀ + b_1
    ffn_activation      `(n, d_ff)`     GELU(ffn_preactivation)
    ffn_output          `(n, d_model)`  ffn_activation @ W_2ᵀ + b_2
    hidden              `(n, d_model)`  LayerNorm(attention_norm + ffn_output), the layer output
    """

    input: np.ndarray
    attention: MultiHeadSteps
    attention_residual: np.ndarray
    attention_norm: np.ndarray
    ffn_preactivation: np.ndarray
    ffn_activation: np.ndarray
    ffn_output: np.ndarray
    hidden: np.ndarray

    @property
    def attention_weights(self) -> np.ndarray:
        """`(head, n, n)` softmax weights of this layer: ``attention.attention.weights``."""
        return self.attention.attention.weights


@dataclass(frozen=True, eq=False)
class BertTrace:
    """A full forward pass over one text, every step kept. `n` = number of tokens.

    tokens, input_ids, truncated, num_input_tokens   as in ``TokenizedText``
    embeddings         `(n, d_model)`   LayerNorm(word + position + token-type embeddings)
    layers             one ``BertLayerSteps`` per layer; ``layers[i].hidden`` is layer i's output

    Stacked views, built on first use and then kept (at 512 tokens the attention stack is 75 MB
    and takes ~60 ms to build, so a forward pass that nobody stacks does not pay for it):

    attention_weights  `(layer, head, n, n)`   every layer's softmax weights, equal to
                       ``layers[i].attention_weights`` (Hugging Face's ``output_attentions``)
    hidden_states      `(layer + 1, n, d_model)`   ``embeddings`` then every layer's output
                       (Hugging Face's ``output_hidden_states``)

    ``last_hidden_state`` is the final layer's output.
    """

    tokens: tuple[str, ...]
    input_ids: np.ndarray
    truncated: bool
    num_input_tokens: int
    embeddings: np.ndarray
    layers: tuple[BertLayerSteps, ...]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_heads(self) -> int:
        return int(self.layers[0].attention_weights.shape[0])

    # cached_property writes to the instance __dict__ directly, so it works on a frozen
    # dataclass; the stacked array is read-only so the cache cannot drift from the layers.
    @cached_property
    def attention_weights(self) -> np.ndarray:
        stacked = np.stack([layer.attention_weights for layer in self.layers])
        stacked.setflags(write=False)
        return stacked  # (layer, head, n, n)

    @cached_property
    def hidden_states(self) -> np.ndarray:
        stacked = np.stack([self.embeddings, *(layer.hidden for layer in self.layers)])
        stacked.setflags(write=False)
        return stacked  # (layer + 1, n, d_model)

    @property
    def last_hidden_state(self) -> np.ndarray:
        return self.layers[-1].hidden


@dataclass(frozen=True, eq=False)
class BertModel:
    """A loaded BERT encoder: its config, its weights and its tokenizer (a
    ``tokenizers.Tokenizer`` with padding off and truncation at the model's positions).

    ``location`` says where the files came from (None when loaded from an explicit directory
    without discovery). Cache one per process (``st.cache_resource``); it is not meant to be
    pickled.
    """

    config: BertConfig
    weights: BertWeights
    tokenizer: Any
    location: ModelLocation | None = None

    def tokenize(self, text: str) -> TokenizedText:
        """The exact tokens of ``text`` ([CLS] ... [SEP]), truncated to the model's positions.

        Raises ``AttentionInputError`` if ``text`` is not a string, or if it has no tokens
        besides [CLS] and [SEP] (empty or whitespace-only text): a trace of two special tokens
        attending to each other would teach nothing, so the page asks for a sentence instead.
        """
        if not isinstance(text, str):
            raise AttentionInputError(
                f"The text must be a string, got {type(text).__name__}: type a sentence."
            )
        try:
            encoding = self.tokenizer.encode(text)
        except Exception as exc:  # tokenizers raises bare Exceptions for odd input
            raise AttentionInputError(f"The tokenizer could not read this text ({exc}).") from exc
        special = self.tokenizer.num_special_tokens_to_add(False)
        if len(encoding.ids) <= special:
            raise AttentionInputError(
                "The text is empty (or only spaces and control characters), so there is nothing "
                "to attend to: type a sentence."
            )
        overflow = encoding.overflowing
        # With stride 0 the overflow pieces split the cut-off tokens without overlap; each piece
        # repeats the special tokens, which are counted once.
        num_input = len(encoding.ids) + sum(len(piece.ids) - special for piece in overflow)
        ids = np.asarray(encoding.ids, dtype=np.int64)
        ids.setflags(write=False)
        return TokenizedText(
            text=text,
            tokens=tuple(encoding.tokens),
            input_ids=ids,
            truncated=bool(overflow),
            num_input_tokens=int(num_input),
        )

    def leading_words(self, text: str, max_tokens: int) -> str:
        """The longest start of ``text`` that ends between words and that the model reads as
        at most ``max_tokens`` tokens, [CLS] and [SEP] included (``text`` itself if it fits).

        Cut between words because a word cut inside ("unbeliev") may split into other pieces
        than the whole word's first ones; only a first word longer than the budget is cut
        inside, piece by piece. Raises ``AttentionInputError`` for text ``tokenize`` refuses,
        or if ``max_tokens`` leaves no room for a word.
        """
        special = self.tokenizer.num_special_tokens_to_add(False)
        if max_tokens <= special:
            raise AttentionInputError(
                f"{max_tokens} tokens leave no room for a word besides [CLS] and [SEP]."
            )
        if len(self.tokenize(text).tokens) <= max_tokens:
            return text
        encoding = self.tokenizer.encode(text)
        tokens, offsets = encoding.tokens, encoding.offsets  # tokens[0] is [CLS]
        keep = max_tokens - special  # word pieces kept: tokens[1 : keep + 1]
        # WordPiece marks a piece that continues the previous one with "##".
        while keep > 1 and tokens[keep + 1].startswith("##"):
            keep -= 1
        if keep == 1 and tokens[2].startswith("##"):
            keep = max_tokens - special
        cut = text[: offsets[keep][1]]
        while len(self.tokenize(cut).tokens) > max_tokens:  # a re-split word: one piece fewer
            keep -= 1
            cut = text[: offsets[keep][1]]
        return cut

    def trace(self, text: str) -> BertTrace:
        """``run_bert(self, text)``."""
        return run_bert(self, text)


def load_bert(model_dir: Path | str | None = None, *, allow_download: bool = False) -> BertModel:
    """Load config.json, model.safetensors and tokenizer.json from ``model_dir``.

    With ``model_dir=None`` the directory is found by ``loading.find_model_dir`` (environment
    variable, then the offline package, then the Hub if ``allow_download``). Raises
    ``ModelNotFoundError`` (no model anywhere, with instructions) or ``ModelFileError`` (a file
    that is missing, damaged or inconsistent), both ``AttentionInputError``.
    """
    location = None
    if model_dir is None:
        location = find_model_dir(allow_download=allow_download)
        model_dir = location.path
    model_dir = Path(model_dir)
    missing = missing_model_files(model_dir)
    if missing:
        raise ModelFileError(
            f"The model directory {model_dir} has no {', '.join(missing)}: it needs "
            f"{CONFIG_FILE}, {WEIGHTS_FILE} and {TOKENIZER_FILE}."
        )
    config = BertConfig.from_dict(
        read_config(model_dir / CONFIG_FILE), source=str(model_dir / CONFIG_FILE)
    )
    # A text needs a few rows of the vocabulary's embedding table: the file holds the rest.
    state = read_weights(model_dir / WEIGHTS_FILE, mapped=(WORD_TABLE, f"bert.{WORD_TABLE}"))
    weights = BertWeights.from_state_dict(state, config, source=str(model_dir / WEIGHTS_FILE))
    release_file_pages(weights.embeddings.word)  # read by the check of every value
    tokenizer = read_tokenizer(
        model_dir / TOKENIZER_FILE, max_length=config.max_position_embeddings
    )
    if tokenizer.get_vocab_size(with_added_tokens=True) > config.vocab_size:
        raise ModelFileError(
            f"The tokenizer in {model_dir} knows {tokenizer.get_vocab_size()} tokens but the "
            f"model has only {config.vocab_size} embeddings: they come from different models."
        )
    return BertModel(config=config, weights=weights, tokenizer=tokenizer, location=location)


def run_bert(model: BertModel, text: str) -> BertTrace:
    """Tokenize ``text`` and run the encoder on it, keeping every step (see ``BertTrace``)."""
    tokenized = model.tokenize(text)
    return _forward(model, tokenized.input_ids, tokenized.tokens, tokenized)


def run_bert_ids(
    model: BertModel, input_ids: object, *, attend: object = None, head_mask: object = None
) -> BertTrace:
    """Run the encoder on explicit vocabulary ids `(q_pos,)` (e.g. for benchmarks and tests).

    The ids are used as given: add [CLS]/[SEP] yourself if you want them. ``attend`` `(q_pos,)`
    boolean (True = may be attended to) hides keys from every query in every layer, like
    Hugging Face's ``attention_mask`` (a padding mask); None lets every token see every token.
    ``head_mask`` `(layer, head)` or `(head,)` (the same for every layer) multiplies each head's
    output before W_o, like transformers 4's ``head_mask`` (1 keeps a head, 0 removes it);
    ``attention_weights`` still show each head's softmax pattern, which the mask does not
    change (transformers 4 returned the multiplied weights instead).
    """
    ids = np.asarray(input_ids)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise AttentionInputError(
            f"input_ids must be a non-empty 1-D list of whole numbers, got shape {ids.shape} "
            f"and dtype {ids.dtype}."
        )
    if ids.min() < 0 or ids.max() >= model.config.vocab_size:
        raise AttentionInputError(
            f"input_ids must lie in 0..{model.config.vocab_size - 1} (the vocabulary), got "
            f"values from {ids.min()} to {ids.max()}."
        )
    ids = ids.astype(np.int64)
    if attend is not None:
        attend = np.asarray(attend)
        if attend.shape != ids.shape or attend.dtype != bool or not attend.any():
            raise AttentionInputError(
                f"attend must be {ids.shape[0]} booleans, one per token, at least one True; got "
                f"shape {attend.shape} and dtype {attend.dtype}."
            )
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    if head_mask is not None:
        head_mask = np.asarray(head_mask, dtype=np.float64)
        if head_mask.shape not in ((heads,), (layers, heads)):
            raise AttentionInputError(
                f"head_mask must be shaped ({layers}, {heads}) (layer, head) or ({heads},), got "
                f"{head_mask.shape}."
            )
        head_mask = np.broadcast_to(head_mask, (layers, heads))
    tokens = tuple(model.tokenizer.id_to_token(int(i)) or "[UNK]" for i in ids)
    return _forward(model, ids, tokens, None, attend, head_mask)


def _forward(
    model: BertModel,
    ids: np.ndarray,
    tokens: tuple[str, ...],
    tokenized: TokenizedText | None,
    attend: np.ndarray | None = None,
    head_mask: np.ndarray | None = None,
) -> BertTrace:
    config, weights = model.config, model.weights
    n = ids.shape[0]
    if n > config.max_position_embeddings:
        raise AttentionInputError(
            f"{n} tokens is more than the model's {config.max_position_embeddings} positions."
        )
    eps = config.layer_norm_eps
    emb = weights.embeddings
    # Attention itself ignores order, so the learned position vector is what tells the model
    # where each token sits; one sentence means token type 0 everywhere.
    summed = emb.word[ids] + emb.position[:n] + emb.token_type[0]  # (n, d_model)
    hidden = _layer_norm(summed, emb.layer_norm, eps)
    embeddings = hidden

    key_mask = None if attend is None else np.broadcast_to(attend, (n, n))  # (q_pos, k_pos)
    layers = []
    for index, layer in enumerate(weights.layers):
        x = hidden
        # Every token is a query over all tokens of the text: no mask, since there is no padding
        # (unless `attend` hides some keys: the same `(q_pos, k_pos)` mask for every head).
        attention = multi_head_attention(
            x,
            params=layer.attention,
            num_heads=config.num_attention_heads,
            mask=key_mask,
            head_mask=None if head_mask is None else head_mask[index],
        )
        # The residual keeps the token's own vector; attention only adds what it gathered.
        attention_residual = x + attention.output
        attention_norm = _layer_norm(attention_residual, layer.attention_norm, eps)
        # The feed-forward network works on each position alone: widen, bend, project back.
        ffn_pre = attention_norm @ layer.intermediate_weight.T  # (n, d_ff)
        ffn_pre += layer.intermediate_bias
        ffn_act = gelu(ffn_pre)  # (n, d_ff)
        ffn_out = ffn_act @ layer.output_weight.T  # (n, d_model)
        ffn_out += layer.output_bias
        hidden = _layer_norm(attention_norm + ffn_out, layer.output_norm, eps)
        layers.append(
            BertLayerSteps(
                input=x,
                attention=attention,
                attention_residual=attention_residual,
                attention_norm=attention_norm,
                ffn_preactivation=ffn_pre,
                ffn_activation=ffn_act,
                ffn_output=ffn_out,
                hidden=hidden,
            )
        )

    return BertTrace(
        tokens=tokens,
        input_ids=ids,
        truncated=tokenized.truncated if tokenized else False,
        num_input_tokens=tokenized.num_input_tokens if tokenized else n,
        embeddings=embeddings,
        layers=tuple(layers),
    )


def _layer_norm(x: np.ndarray, params: LayerNormParams, eps: float) -> np.ndarray:
    """LayerNorm with one of the checkpoint's (γ, β) pairs."""
    return layer_norm(x, params.weight, params.bias, eps)
