"""What the decoder page shows of one sequence through the model, and the tokens as text.

PageTrace                            weights, q and k before and after RoPE, first-token (sink)
                                     shares of every layer and head, for n tokens
StepRow                              what one generated token adds to it: its query's row
from_pass(model, ids, trace)         a PageTrace from one forward pass over all the tokens
                                     (one that kept SHOWN_STEPS is enough)
with_rows(model, ids, prompt, rows)  the prompt's PageTrace grown by the decode steps' rows
first_tokens(model, trace, ids)      the trace of its first tokens, as views
labels, shown_tokens                 the tokens as tick labels, and as Markdown
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.models.decoder import DecoderModel
from attention_core.models.scoring import first_token_share
from attention_core.models.trace import DecoderTrace
from ui.widgets.byte_cache import digest_of
from ui.widgets.layout import plain

# The per-layer arrays a trace keeps besides the weights (`LlamaLayerSteps` names them so; a
# model without RoPE has no q_rot and k_rot).
QK_NAMES = ("q", "q_rot", "k", "k_rot")
# What a pass keeps of each layer for the page (run_decoder's keep): what the figures draw, and
# no more, since every kept step is held for as long as the generation is cached.
SHOWN_STEPS = ("weights", *QK_NAMES)


def shown_steps(model: DecoderModel) -> tuple[str, ...]:
    """SHOWN_STEPS of the ones ``model``'s layers have (GPT-2's: no q_rot, k_rot)."""
    return SHOWN_STEPS if model.positions == "rope" else ("weights", "q", "k")


def _stacked(layers, name: str, row: slice | int = slice(None)) -> np.ndarray | None:
    """Every layer's step ``name`` (its query row ``row``) stacked, or None for a step the
    layers do not have (q_rot and k_rot without RoPE)."""
    if not hasattr(layers[0], name):
        return None
    return np.stack([getattr(layer, name)[:, row] for layer in layers])


@dataclass(frozen=True, eq=False)
class PageTrace:
    """What the page shows of a forward pass over `n` tokens.

    weights `(layer, head, n, n)`, q / q_rot `(layer, head, n, d_head)`, k / k_rot
    `(layer, kv_head, n, d_head)` (q_rot and k_rot None for a model without RoPE), sink
    `(layer, head)` first-token shares; `group_size` query heads share each KV head. `digest`
    stands for it in a figure's key: made from the model and the ids, which decide every
    number here.
    """

    tokens: tuple[str, ...]
    weights: np.ndarray
    q: np.ndarray
    q_rot: np.ndarray | None
    k: np.ndarray
    k_rot: np.ndarray | None
    sink: np.ndarray
    group_size: int
    digest: str


@dataclass(frozen=True, eq=False)
class StepRow:
    """What one generated token adds to the page's trace: its query's row in every layer.

    weights `(layer, head, k_pos)` (k_pos = its position + 1), q / q_rot `(layer, head, d_head)`,
    k / k_rot `(layer, kv_head, d_head)`
    """

    weights: np.ndarray
    q: np.ndarray
    q_rot: np.ndarray | None
    k: np.ndarray
    k_rot: np.ndarray | None

    @classmethod
    def of(cls, step: DecoderTrace) -> StepRow:
        """The row of a one-token decode step (`run_decoder(model, [token], cache)`)."""
        layers = step.layers
        return cls(step.attention_weights[:, :, 0], *(_stacked(layers, n, 0) for n in QK_NAMES))


def from_pass(model: DecoderModel, ids: tuple[int, ...], trace: DecoderTrace) -> PageTrace:
    """What the page shows of one forward pass over `ids`."""
    qk = (_stacked(trace.layers, name) for name in QK_NAMES)
    return _page_trace(model, ids, trace.attention_weights, *qk)


def with_rows(
    model: DecoderModel, ids: tuple[int, ...], prompt: PageTrace, rows: tuple[StepRow, ...]
) -> PageTrace:
    """The prompt's trace grown by one query row per generated token (the future stays 0)."""
    start = prompt.weights.shape[-1]
    layers, heads, n = *prompt.weights.shape[:2], len(ids)
    weights = np.zeros((layers, heads, n, n), prompt.weights.dtype)
    weights[:, :, :start, :start] = prompt.weights
    for i, row in enumerate(rows):
        weights[:, :, start + i, : start + i + 1] = row.weights

    def grown(name: str) -> np.ndarray | None:
        if getattr(prompt, name) is None:
            return None
        added = np.stack([getattr(row, name) for row in rows], axis=2)
        return np.concatenate([getattr(prompt, name), added], axis=2)

    return _page_trace(model, ids, weights, *(grown(name) for name in QK_NAMES))


def first_tokens(model: DecoderModel, trace: PageTrace, ids: tuple[int, ...]) -> PageTrace:
    """What the page shows of `ids`, the first tokens of `trace`'s: views of its arrays, since a
    causal pass's first n rows are those of the first n tokens alone."""
    n = len(ids)
    if n == len(trace.tokens):
        return trace

    def first(array: np.ndarray | None) -> np.ndarray | None:
        return None if array is None else array[:, :, :n]

    weights = trace.weights[:, :, :n, :n]
    return _page_trace(model, ids, weights, *(first(getattr(trace, name)) for name in QK_NAMES))


def _page_trace(
    model: DecoderModel, ids: tuple[int, ...], weights, q, q_rot, k, k_rot
) -> PageTrace:
    return PageTrace(
        tokens=tuple(model.token_text(i) for i in ids),
        weights=weights,
        q=q,
        q_rot=q_rot,
        k=k,
        k_rot=k_rot,
        # A lone token has no later query to average (it can only see itself): its share is 1.
        sink=first_token_share(weights) if len(ids) > 1 else np.ones(weights.shape[:2]),
        group_size=model.config.group_size,
        digest=digest_of(id(model), ids),
    )


def labels(tokens: tuple[str, ...]) -> list[str]:
    """Tick labels: position and token, whitespace made visible."""
    return [f"{i + 1} {t!r}"[:24] for i, t in enumerate(tokens)]


def shown_tokens(tokens: tuple[str, ...], prompt_length: int) -> str:
    """The tokens as Markdown: prompt tokens in code spans, generated ones bold."""
    parts = []
    for i, token in enumerate(tokens):
        text = plain(repr(token)[1:-1]) or "∅"
        parts.append(f"`{text}`" if i < prompt_length else f"**{text}**")
    return " ".join(parts)
