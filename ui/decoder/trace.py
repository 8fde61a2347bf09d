"""What the decoder page shows of one sequence through the model: a `PageTrace` (weights, q and
k before and after RoPE, sink shares), built from a forward pass or grown by decode-step rows."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from attention_core.models.llama import (
    LlamaModel,
    LlamaTrace,
    first_token_share,
)
from ui.widgets.layout import plain


@dataclass(frozen=True, eq=False)
class PageTrace:
    """What the page shows of a forward pass over `n` tokens.

    weights `(layer, head, n, n)`, q / q_rot `(layer, head, n, d_head)`, k / k_rot
    `(layer, kv_head, n, d_head)`, sink `(layer, head)` first-token shares, digest (cache key).
    """

    tokens: tuple[str, ...]
    weights: np.ndarray
    q: np.ndarray
    q_rot: np.ndarray
    k: np.ndarray
    k_rot: np.ndarray
    sink: np.ndarray
    group_size: int
    digest: str


def _page_trace(model: LlamaModel, ids: tuple[int, ...], trace: LlamaTrace) -> PageTrace:
    def stack(name: str) -> np.ndarray:
        return np.stack([getattr(layer, name) for layer in trace.layers])

    weights = trace.attention_weights
    return _described(model, ids, weights, stack("q"), stack("q_rot"), stack("k"), stack("k_rot"))


def _with_rows(
    model: LlamaModel, ids: tuple[int, ...], prompt: PageTrace, rows: tuple[StepRow, ...]
) -> PageTrace:
    """The prompt's trace grown by one query row per generated token (the future stays 0)."""
    start = prompt.weights.shape[-1]
    layers, heads, n = *prompt.weights.shape[:2], len(ids)
    weights = np.zeros((layers, heads, n, n), prompt.weights.dtype)
    weights[:, :, :start, :start] = prompt.weights
    for i, row in enumerate(rows):
        weights[:, :, start + i, : start + i + 1] = row.weights

    def grown(name: str) -> np.ndarray:
        added = np.stack([getattr(row, name) for row in rows], axis=2)
        return np.concatenate([getattr(prompt, name), added], axis=2)

    return _described(model, ids, weights, grown("q"), grown("q_rot"), grown("k"), grown("k_rot"))


def _described(model, ids, weights, q, q_rot, k, k_rot) -> PageTrace:
    return PageTrace(
        tokens=tuple(model.token_text(i) for i in ids),
        weights=weights,
        q=q,
        q_rot=q_rot,
        k=k,
        k_rot=k_rot,
        sink=first_token_share(weights) if len(ids) > 1 else np.ones(weights.shape[:2]),
        group_size=model.config.group_size,
        digest=hashlib.sha256(f"{id(model)}:{ids}".encode()).hexdigest(),
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


@dataclass(frozen=True, eq=False)
class StepRow:
    """What one generated token adds to the page's trace: its query's row in every layer.

    weights `(layer, head, k_pos)` (k_pos = its position + 1), q / q_rot `(layer, head, d_head)`,
    k / k_rot `(layer, kv_head, d_head)`
    """

    weights: np.ndarray
    q: np.ndarray
    q_rot: np.ndarray
    k: np.ndarray
    k_rot: np.ndarray

    @classmethod
    def of(cls, step: LlamaTrace) -> StepRow:
        """The row of a one-token decode step (`run_llama(model, [token], cache)`)."""

        def row(name: str) -> np.ndarray:
            return np.stack([getattr(layer, name)[:, 0] for layer in step.layers])

        return cls(step.attention_weights[:, :, 0], row("q"), row("q_rot"), row("k"), row("k_rot"))
