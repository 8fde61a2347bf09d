"""What every decoder family's forward pass does the same way around its own layers.

    KeptSteps                   the steps of a layer that a pass's ``keep=`` kept
    kept(steps, keep)           a layer's steps, or only those ``keep`` names
    checked_start(config, …)    a pass's ``start`` = (boundary, stream) checked
    skipped(first, cache)       the steps and caches of the layers a started pass does not run
    first_stream(edits, …)      resid.0 (or resid.first) as the pass goes on with it
    layer_output(edits, …)      a pre-norm layer's end: mlp_out, then resid.{l+1}, edited
    read_logits(final, head, …) the logits of the positions (and the tokens) a caller reads
    checked_text(n, first, …)   a text scored in one pass: long enough, not too long
    first_key_shares(layers, …) a text's pass layer by layer, keeping only the weight each
                                head gives the first keys

A family's forward (``run_llama``, ``run_gpt2``) calls these with its own config, whose
``num_hidden_layers`` and ``hidden_size`` every family names alike (GPT-2's as transformers'
``attribute_map`` does). Nothing here knows a family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_core.validation import AttentionInputError, check_int, check_token_ids

from . import points
from .checkpoint import check_logits

__all__ = [
    "KeptSteps",
    "checked_start",
    "checked_text",
    "first_key_shares",
    "first_stream",
    "kept",
    "layer_output",
    "read_logits",
    "skipped",
]


@dataclass(frozen=True, eq=False)
class KeptSteps:
    """The steps of one layer that a pass's ``keep=…`` kept, read by their layer-steps names
    (``kept.weights``, ``kept.q_rot``…); asking for another is an AttributeError."""

    steps: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        # Only for names that are not attributes; through __dict__, as unpickling asks before
        # `steps` is set.
        try:
            return self.__dict__["steps"][name]
        except KeyError:
            raise AttributeError(f"{name!r} was not among the steps the pass kept") from None


def kept(steps: Any, keep: Sequence[str] | None) -> Any:
    """``steps`` whole (``keep`` None), or only the steps ``keep`` names."""
    return steps if keep is None else KeptSteps({name: getattr(steps, name) for name in keep})


def checked_start(
    config: Any, start: tuple[int, np.ndarray] | None, n: int
) -> tuple[int, np.ndarray | None]:
    """A pass's start checked: the first layer to run and the stream `(n, d_model)` or
    `(batch, n, d_model)` float32 it reads (0 and None without a start)."""
    if start is None:
        return 0, None
    boundary, stream = start
    boundary = check_int(boundary, "the start's layer boundary", minimum=0)
    layers, width = config.num_hidden_layers, config.hidden_size
    if boundary > layers:
        raise AttentionInputError(
            f"The start's layer boundary is {boundary}, but this model's boundaries run from 0 "
            f"(the embeddings) to {layers} (after its last layer)."
        )
    stream = np.asarray(stream, dtype=np.float32)
    if stream.ndim not in (2, 3) or stream.shape[-2:] != (n, width):
        raise AttentionInputError(
            f"The start's stream is shaped {stream.shape}, but a pass over {n} tokens starts "
            f"from ({n}, {width}) or (batch, {n}, {width})."
        )
    return boundary, stream


def skipped(first: int, cache: Any) -> tuple[list, list]:
    """The steps and caches of the layers a started pass does not run (before ``first``):
    nothing kept, each layer's cache as it was given."""
    return [KeptSteps({}) for _ in range(first)], [] if cache is None else list(
        cache.layers[:first]
    )


def first_stream(
    edits: Mapping[str, points.Edit] | None,
    first: int,
    embeddings: np.ndarray,
    stream: np.ndarray | None,
    layers: list,
) -> tuple[np.ndarray, np.ndarray]:
    """(resid.0, the stream layer ``first`` reads), each through its edit. A pass started past
    layer 0 reads ``stream`` (``layers``' last skipped entry then keeps it, as resid.first
    went on); one started at 0 reads ``stream`` in place of the embeddings."""
    if first == 0:
        embeddings = embeddings if stream is None else stream
        embeddings = points.edit_at(edits, points.resid, 0, embeddings)
        return embeddings, embeddings
    hidden = points.edit_at(edits, points.resid, first, stream)
    layers[-1] = KeptSteps({"hidden": hidden})  # resid.first as the pass went on with it
    return embeddings, hidden


def layer_output(
    edits: Mapping[str, points.Edit] | None,
    index: int,
    residual: np.ndarray,
    mlp_out: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(layer.{index}.mlp_out, resid.{index+1}) as the pass goes on with them: a pre-norm
    layer's output is the stream after attention plus what its MLP adds."""
    mlp_out = points.edit_at(edits, points.mlp_out, index, mlp_out)
    return mlp_out, points.edit_at(edits, points.resid, index + 1, residual + mlp_out)


def read_logits(
    final: np.ndarray,
    unembedding: np.ndarray,
    product: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    all_logits: bool,
    tokens: Sequence[int] | None,
) -> np.ndarray:
    """logits = final Wᵀ `(..., n_logits, vocab)` by ``product`` (x, W) -> x Wᵀ, for the last
    position (or all, ``all_logits``), and only the vocabulary ids ``tokens`` names (all by
    default; a patch reads two logits, not 49,152), in that order."""
    if tokens is not None:
        unembedding = unembedding[check_token_ids(tokens, unembedding.shape[0])]
    logits = product(final if all_logits else final[..., -1:, :], unembedding)
    check_logits(logits)
    return logits


def checked_text(n: int, first: int, limit: int) -> int:
    """A text of ``n`` tokens checked for one scoring pass (at most ``limit`` tokens, and two to
    predict anything): the number of first keys to keep, at most n."""
    if n > limit:
        raise AttentionInputError(
            f"{n} tokens is more than the {limit} a text can have here: cut it."
        )
    if n < 2:
        raise AttentionInputError("A text of one token has nothing to predict: type more.")
    return min(check_int(first, "the number of first keys", minimum=1), n)


def first_key_shares(
    layers: Iterable[tuple[Any, Any]], hidden: np.ndarray, first: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the stream after the last layer `(n, d_model)`, the mean weight queries 1..n-1 give
    each of the ``first`` keys `(layer, head, first)`) of a pass's ``layers`` (each layer's
    steps and cache, in order), each layer's steps let go before the next runs."""
    shares = []
    for steps, _ in layers:
        # Queries 1..n-1: query 0 can only see itself.
        shares.append(steps.weights[:, 1:, :first].mean(axis=-2))
        hidden = steps.hidden
        # Let go before the next layer runs, not when its steps replace these: one layer's
        # (head, n, n) scores and weights at a time (~40 MB at 547 tokens), not two.
        del steps
    return hidden, np.stack(shares)
