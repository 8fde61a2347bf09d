"""The patching page's computations, once per distinct input and shared by every viewer, each
cache bounded in bytes (ui.widgets.byte_cache).

    pair_runs(model, pair)            the clean and the corrupted pass (``PatchRuns``)
    stream_map(model, pair, kind)     `(boundary or layer, n)` LD, resid / attn_out / mlp_out
    head_map(model, pair, last_only)  `(layer, head)` LD, heads patched at every position or
                                      at the last one only (both maps share one cache)

The maps are many batched passes (a few seconds): they wait their turn in the long runs' lane
and run in the process that keeps the model (server.process_load.run_where_kept). Nothing here
computes a formula: the numbers come from attention_core.models.patching.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.models import patching
from attention_core.models.decoder import DecoderModel
from server.kept_process import run_where_kept
from server.lane import LONG_RUNS
from ui.models import smollm
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of

# Both prompts are cut to this many tokens: the residual map alone is 31 × n patched passes.
MAX_PROMPT_TOKENS = 24
KINDS = {"resid": "residual stream", "attn_out": "attention output", "mlp_out": "MLP output"}


@dataclass(frozen=True)
class Pair:
    """What the page patches: both prompts' ids `(n,)` and the two answers' token ids."""

    clean: tuple[int, ...]
    corrupt: tuple[int, ...]
    answer: int
    wrong: int


@dataclass(frozen=True, eq=False)
class PairRuns:
    """The two passes (``patching.PatchRuns``), the prompts' tokens, and a digest of the model
    and the pair that stands for them in a figure's key."""

    runs: patching.PatchRuns
    clean_tokens: tuple[str, ...]
    corrupt_tokens: tuple[str, ...]
    digest: str


def pair_runs(model: DecoderModel, pair: Pair) -> PairRuns:
    return _pair_runs(pair, id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(32 * MB, name="patching.runs")  # ~8 MB an entry at 14 tokens
def _pair_runs(pair: Pair, model_id: int, _model: DecoderModel) -> PairRuns:
    runs = patching.patch_runs(_model, pair.clean, pair.corrupt, pair.answer, pair.wrong)
    return PairRuns(
        runs=runs,
        clean_tokens=tuple(_model.token_text(i) for i in pair.clean),
        corrupt_tokens=tuple(_model.token_text(i) for i in pair.corrupt),
        digest=digest_of(model_id, pair),
    )


def stream_map(model: DecoderModel, pair: Pair, kind: str) -> np.ndarray:
    """LD `(L + 1, n)` for "resid", `(L, n)` for "attn_out" and "mlp_out"."""
    return _patched(pair, kind, id(model), model)


def head_map(model: DecoderModel, pair: Pair, last_only: bool) -> np.ndarray:
    """LD `(L, head)`."""
    return _patched(pair, "heads.last" if last_only else "heads", id(model), model)


@smollm.let_go_with_model
@bounded_by_bytes(MB, name="patching.maps", lane=LONG_RUNS)  # ~3 KB an entry
def _patched(pair: Pair, what: str, model_id: int, _model: DecoderModel) -> np.ndarray:
    runs = _pair_runs(pair, model_id, _model).runs
    if what in KINDS:
        return run_where_kept(patching.patch_stream, _model, runs, what)
    return run_where_kept(patching.patch_heads, _model, runs, last_only=what == "heads.last")
