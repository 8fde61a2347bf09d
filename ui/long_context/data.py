"""The long-context page's passes over its text, once per distinct text, window and sinks, shared
by every viewer, bounded in bytes (a pass keeps its losses and final stream: ~2.3 MB at 1024
tokens)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.models.decoder import DecoderModel
from attention_core.models.long_context import VARIANTS, context_pass, perplexity
from attention_core.models.scoring import TextScore
from server.kept_process import run_where_kept
from server.lane import LONG_RUNS
from ui.long_context.inputs import MAX_SINKS
from ui.models import smollm
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of

TITLES = {
    "full": "full attention",
    "window": "sliding window",
    "sinks": "window + first tokens",
}


@dataclass(frozen=True, eq=False)
class ThreePasses:
    """The text read three ways: each variant's losses `(n - 1,)`, its share of weight on the
    first tokens by layer `(layer,)` (heads averaged), and its perplexity over the tokens
    predicted from a query at position ≥ W; digest (of the model, the text's ids, W and S)
    stands for it in a figure's key."""

    losses: dict[str, np.ndarray]
    first_share: dict[str, np.ndarray]
    perplexity: dict[str, float]
    window: int
    sinks: int
    digest: str


def three_passes(model: DecoderModel, ids: tuple[int, ...], window: int, sinks: int) -> ThreePasses:
    # Each pass is keyed on what changes it alone: the full pass on the text, the window's on W,
    # the sinks' on W and S. Each keeps the weight on the first MAX_SINKS keys, so S only sums.
    keys = {"full": (0, 0), "window": (window, 0), "sinks": (window, sinks)}
    # No sinks: the third pass is the window's own.
    names = {name: "window" if name == "sinks" and sinks == 0 else name for name in VARIANTS}
    scores = {name: _pass(ids, names[name], *keys[names[name]], id(model), model)
              for name in VARIANTS}  # fmt: skip
    kept = max(sinks, 1)
    return ThreePasses(
        losses={name: score.losses for name, score in scores.items()},
        first_share={
            name: score.first_weights[..., :kept].sum(axis=-1).mean(axis=-1)
            for name, score in scores.items()
        },
        perplexity={name: perplexity(score.losses, window) for name, score in scores.items()},
        window=window,
        sinks=sinks,
        digest=digest_of(id(model), ids, window, sinks),
    )


def full_pass(model: DecoderModel, ids: tuple[int, ...]) -> TextScore:
    """The text read with full causal attention: the first of the three passes."""
    return _pass(ids, "full", 0, 0, id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(12 * MB, name="long_context.passes", lane=LONG_RUNS)
def _pass(ids, variant, window, sinks, model_id, _model: DecoderModel) -> TextScore:
    return run_where_kept(
        context_pass, _model, np.asarray(ids), variant, max(window, 1), sinks, MAX_SINKS
    )
