"""One forward entry for every decoder family our code runs: ``run_decoder`` runs a loaded
model with its family's own pass (``run_llama`` for Llama, Qwen2 and Mistral, ``run_gpt2`` for
GPT-2), so a caller that reads what every family has (the logits, the cache, the attention
weights, the named points) needs no family of its own.

Every option (``PASS_OPTIONS``) means what it means in ``run_llama``: ``all_logits`` (every
position's logits, not the last one's), ``attend`` (keys hidden from queries), ``edits`` (named
points replaced), ``keep`` (the steps kept of each layer), ``start`` (a pass begun at a layer
boundary from a given stream, `(batch, n, d_model)` for a batch) and ``tokens`` (the vocabulary
ids whose logits are computed).
"""

from __future__ import annotations

from typing import Any

from attention_core.validation import AttentionInputError

from .gpt2 import GPT2Model, run_gpt2
from .gpt2.forward import read_text as read_gpt2_text
from .llama.forward import read_text as read_llama_text
from .llama.forward import run_llama
from .llama.model import LlamaModel
from .trace import DecoderTrace

__all__ = ["PASS_OPTIONS", "read_decoder_text", "run_decoder"]

# What every family's pass takes besides the model, the ids and the cache.
PASS_OPTIONS = ("all_logits", "attend", "edits", "keep", "start", "tokens")


def run_decoder(
    model: LlamaModel | GPT2Model, input_ids: object, cache: object = None, **options: Any
) -> DecoderTrace:
    """``model`` run on ``input_ids`` `(n,)` after ``cache`` (None: a fresh prompt) by its
    family's own forward pass, with ``options`` (``PASS_OPTIONS``): its trace (``LlamaTrace``,
    ``GPT2Trace``)."""
    unknown = set(options) - set(PASS_OPTIONS)
    if unknown:
        raise AttentionInputError(
            f"{', '.join(sorted(unknown))} is not an option of a decoder's pass: its options "
            f"are {', '.join(PASS_OPTIONS)}."
        )
    return _family(model, run_llama, run_gpt2)(model, input_ids, cache, **options)


def read_decoder_text(
    model: LlamaModel | GPT2Model, input_ids: object, **options: Any
) -> tuple[Any, Any, Any]:
    """A text read in one pass keeping no steps, by the model's family (``read_text``: the ids,
    the stream after the final norm, the first keys' weights); options ``attend``, ``first``,
    ``kv_codec``."""
    return _family(model, read_llama_text, read_gpt2_text)(model, input_ids, **options)


def _family(model: object, llama: Any, gpt2: Any) -> Any:
    """Of two functions, the one of ``model``'s family."""
    if isinstance(model, GPT2Model):
        return gpt2
    if isinstance(model, LlamaModel):
        return llama
    raise AttentionInputError(
        f"A {type(model).__name__} is not a decoder this code runs: it runs Llama-family "
        "decoders (Llama, Qwen2, Mistral) and GPT-2."
    )
