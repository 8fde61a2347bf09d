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

# The llama package's modules, not the package: its generation module imports this one.
from .llama.forward import run_llama
from .llama.model import LlamaModel
from .trace import DecoderTrace

__all__ = ["PASS_OPTIONS", "run_decoder"]

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
    if isinstance(model, GPT2Model):
        return run_gpt2(model, input_ids, cache, **options)
    if isinstance(model, LlamaModel):
        return run_llama(model, input_ids, cache, **options)
    raise AttentionInputError(
        f"A {type(model).__name__} is not a decoder this code runs: it runs Llama-family "
        "decoders (Llama, Qwen2, Mistral) and GPT-2."
    )
