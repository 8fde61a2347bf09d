"""A text read three ways by the decoder: what a model loses when its oldest tokens leave a
sliding window, and what keeping the first few tokens in view gives back.

    full     causal attention: token i sees tokens 0 .. i
    window   a sliding window of W: token i sees tokens i-W+1 .. i
    sinks    the window plus the first S tokens, always visible (StreamingLLM's attention sinks,
             Xiao et al. 2023)

All three by masking (`masks.sliding_window_mask`, `masks.sink_window_mask`): every token keeps
its position (its RoPE rotation, or GPT-2's learned vector), so the window only hides keys, it
renumbers nothing. Each is scored by its
loss on every next token and by its perplexity over the tokens predicted from a query at
position ≥ W, the ones whose window has started to drop tokens:

    perplexity = exp( mean over i ≥ W of −log p(token i+1 | what query i sees) )
"""

from __future__ import annotations

import numpy as np

from attention_core.masks import sink_window_mask, sliding_window_mask
from attention_core.validation import AttentionInputError, as_float_array, check_int

from .decoder import DecoderModel
from .scoring import TextScore, score_text

__all__ = ["VARIANTS", "context_pass", "perplexity", "variant_mask"]

VARIANTS = ("full", "window", "sinks")


def variant_mask(variant: str, n: int, window: int, sinks: int) -> np.ndarray | None:
    """The `(n, n)` mask of a variant (None for full causal attention, the model's own)."""
    if variant == "full":
        return None
    if variant == "window":
        return sliding_window_mask(n, window)
    if variant == "sinks":
        return sink_window_mask(n, window, sinks)
    raise AttentionInputError(f"{variant!r} is not a variant; choose one of {', '.join(VARIANTS)}.")


def context_pass(
    model: DecoderModel, input_ids: object, variant: str, window: int, sinks: int, first: int = 16
) -> TextScore:
    """One variant's pass over the text (`score_text`): its losses, final stream and the weight
    each head gives each of the first `first` keys."""
    ids = np.asarray(input_ids)
    window = check_int(window, "the window", minimum=1)
    sinks = check_int(sinks, "the number of sink tokens", minimum=0)
    attend = variant_mask(variant, ids.shape[0], window, sinks)
    return score_text(model, ids, attend=attend, first=first)


def perplexity(losses: object, from_query: int) -> float:
    """exp(mean of `losses[from_query:]`): `losses` `(n - 1,)`, losses[i] the loss of predicting
    token i + 1 from query i. Raises if no query is at `from_query` or later."""
    loss = as_float_array(losses, "losses", min_ndim=1, max_ndim=1)
    start = check_int(from_query, "the first query", minimum=0)
    if start >= loss.shape[0]:
        raise AttentionInputError(
            f"No token is predicted from a query at position {start} or later: the text has "
            f"{loss.shape[0] + 1} tokens."
        )
    return float(np.exp(loss[start:].mean()))
