"""A BERT encoder's forward pass, run by our own NumPy attention code, every step kept.

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

``BertModel`` (config, weights, tokenizer) lives here beside the pass it runs, so that
``model.trace(text)`` needs no import back from a module that builds models (``load.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from attention_core.models.layers import gelu, layer_norm
from attention_core.models.loading import ModelLocation
from attention_core.multihead import MultiHeadSteps, multi_head_attention
from attention_core.validation import AttentionInputError

from .config import BertConfig
from .tokenizer import TokenizedText, leading_words, tokenize
from .weights import BertWeights, LayerNormParams

__all__ = ["BertLayerSteps", "BertModel", "BertTrace", "run_bert", "run_bert_ids"]


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

    Stacked views, built on first use and then kept (at 512 tokens the attention stack is 75 MB,
    so a forward pass that nobody stacks does not pay for building it):

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
        """``tokenizer.tokenize(self.tokenizer, text)``: the exact tokens the model reads."""
        return tokenize(self.tokenizer, text)

    def leading_words(self, text: str, max_tokens: int) -> str:
        """``tokenizer.leading_words(self.tokenizer, text, max_tokens)``: the longest start of
        ``text`` the model reads as at most ``max_tokens`` tokens, cut between words."""
        return leading_words(self.tokenizer, text, max_tokens)

    def trace(self, text: str) -> BertTrace:
        """``run_bert(self, text)``."""
        return run_bert(self, text)


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
