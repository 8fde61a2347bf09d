"""Activation patching: which activations carry the answer from a clean prompt into a corrupted one.

Run a clean prompt (the model gets the answer) and a corrupted one of the same length (it says
the wrong token), then run the corrupted prompt again with one activation taken from the clean
run. The metric is the logit difference at the last position,

    LD = logit(answer) − logit(wrong)

and a patch is measured by the share of the clean LD it restores (Meng et al. 2022, Wang et
al. 2022's indirect-object circuit):

    restored = (LD_patched − LD_corrupt) / (LD_clean − LD_corrupt)

0: the patch changes nothing; 1: it brings back everything; it can be negative, or pass 1.

    patch_runs(model, clean, corrupt, answer, wrong)   the two runs, their LDs, and what a
                                                       patch puts in (``PatchRuns``)
    patch_stream(model, runs, kind)    `(boundary or layer, n)` LD with the resid, attn_out or
                                       mlp_out of one layer and one position patched
    patch_heads(model, runs, last_only)  `(layer, head)` LD with one head's output patched at
                                       every position, or at the last one only
    restored(ld, runs)                 the share of the clean LD restored

Every pass is the model's family's own forward (``run_decoder``) with its named points
(``attention_core.models.points``): a patch is an edit of one point, or a pass started at a
layer boundary from a patched stream (``start=``). The passes of one layer go in
one batch, and each reads only what a patch can change: the layers from the patched one on,
and the positions from the first token where the prompts differ (before it both runs are the
same computation, so a patch there puts in the vector already there: LD_corrupt exactly); the
positions before it come from the corrupted prefix's cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from attention_core.validation import AttentionInputError, check_int

from . import points
from .decoder import DecoderModel
from .forward import run_decoder

__all__ = ["STREAM_KINDS", "PatchRuns", "patch_heads", "patch_runs", "patch_stream", "restored"]

# What `patch_stream` patches: the point of each kind at boundary or layer l.
STREAM_KINDS: dict[str, Callable[[int], str]] = {
    "resid": points.resid,
    "attn_out": points.attn_out,
    "mlp_out": points.mlp_out,
}
# What the two full passes keep of every layer: each kind's point and the attention patterns.
KEPT_STEPS = ("hidden", "attn_output", "ffn_output", "head_outputs", "weights")
# Rows of tokens a batched pass aims at: fewer and each layer's weights are read for too little
# work, more and the patches of later layers rerun too many unpatched layers.
PASS_ROWS = 128


@dataclass(frozen=True, eq=False)
class PatchRuns:
    """The clean and the corrupted pass, and everything a patch reads from them.

    clean_ids, corrupt_ids `(n,)`; answer, wrong: token ids; first_change: the first position
    where the prompts differ; clean_ld, corrupt_ld: LD at the last position; probabilities
    `(2, 2)`: P(answer), P(wrong) (columns) after the clean and the corrupted prompt (rows);
    clean and corrupt: each point's activation, name -> array (resid `(n, d_model)`, heads
    `(head, n, d_head)`, attn_out and mlp_out `(n, d_model)`); clean_weights and
    corrupt_weights `(layer, head, n, n)` the attention patterns; num_layers, num_heads.
    """

    clean_ids: np.ndarray
    corrupt_ids: np.ndarray
    answer: int
    wrong: int
    first_change: int
    clean_ld: float
    corrupt_ld: float
    probabilities: np.ndarray
    clean: dict[str, np.ndarray]
    corrupt: dict[str, np.ndarray]
    clean_weights: np.ndarray
    corrupt_weights: np.ndarray
    num_layers: int
    num_heads: int

    @property
    def n(self) -> int:
        return int(self.clean_ids.shape[0])


def patch_runs(
    model: DecoderModel, clean_ids: object, corrupt_ids: object, answer: int, wrong: int
) -> PatchRuns:
    """Run both prompts, keeping every named point. Raises ``AttentionInputError`` for prompts
    of different lengths (a patch puts position p of one into position p of the other), for
    identical prompts, and for one answer given twice."""
    clean = np.asarray(clean_ids, dtype=np.int64)
    corrupt = np.asarray(corrupt_ids, dtype=np.int64)
    if clean.shape != corrupt.shape:
        raise AttentionInputError(
            f"The clean prompt has {clean.size} tokens and the corrupted one {corrupt.size}: a "
            "patch puts token p of one into token p of the other, so they need the same number."
        )
    differ = np.flatnonzero(clean != corrupt)
    if differ.size == 0:
        raise AttentionInputError(
            "The two prompts are the same, so LD_clean = LD_corrupt and there is nothing to "
            "restore: change a word of the corrupted prompt."
        )
    vocab = model.config.vocab_size
    answer = check_int(answer, "the answer's token id", minimum=0)
    wrong = check_int(wrong, "the wrong answer's token id", minimum=0)
    if max(answer, wrong) >= vocab:
        raise AttentionInputError(f"Token ids must lie in 0..{vocab - 1}.")
    if answer == wrong:
        raise AttentionInputError(
            "The answer and the wrong answer are the same token, so their logit difference is "
            "always 0: give two different tokens."
        )
    num_layers = model.config.num_hidden_layers
    names = points.names(num_layers)
    traces = [run_decoder(model, ids, keep=KEPT_STEPS) for ids in (clean, corrupt)]
    lds, probabilities = [], []
    for trace in traces:
        logits = trace.next_token_logits.astype(np.float64)
        shifted = np.exp(logits - logits.max())
        probabilities.append(shifted[[answer, wrong]] / shifted.sum())
        lds.append(float(logits[answer] - logits[wrong]))
    clean_points, corrupt_points = ({name: trace.point(name) for name in names} for trace in traces)
    return PatchRuns(
        clean_ids=clean,
        corrupt_ids=corrupt,
        answer=answer,
        wrong=wrong,
        first_change=int(differ[0]),
        clean_ld=lds[0],
        corrupt_ld=lds[1],
        probabilities=np.array(probabilities),
        clean=clean_points,
        corrupt=corrupt_points,
        clean_weights=traces[0].attention_weights,
        corrupt_weights=traces[1].attention_weights,
        num_layers=num_layers,
        num_heads=model.config.num_attention_heads,
    )


def restored(ld: object, runs: PatchRuns) -> np.ndarray:
    """(LD − LD_corrupt) / (LD_clean − LD_corrupt), element by element."""
    return (np.asarray(ld, dtype=np.float64) - runs.corrupt_ld) / (runs.clean_ld - runs.corrupt_ld)


def patch_stream(model: DecoderModel, runs: PatchRuns, kind: str) -> np.ndarray:
    """LD `(L + 1, n)` for kind "resid" (boundary l: 0 the embeddings, l after layer l − 1) or
    `(L, n)` for "attn_out" and "mlp_out" (layer l), each cell the corrupted pass with that
    point's vector at that position taken from the clean pass."""
    if kind not in STREAM_KINDS:
        raise AttentionInputError(f"kind must be one of {', '.join(STREAM_KINDS)}, got {kind!r}.")
    point = STREAM_KINDS[kind]
    rows = runs.num_layers + 1 if kind == "resid" else runs.num_layers
    first = runs.first_change
    positions = np.arange(runs.n - first)  # item i of a row patches position first + i

    def put_clean(row: int, offset: int, x: np.ndarray) -> np.ndarray:
        # x (item, n − first, d_model): the row's item i takes the clean vector at its position.
        x = x.copy()
        x[offset + positions, positions] = runs.clean[point(row)][first:]
        return x

    patched = np.full((rows, runs.n), runs.corrupt_ld)  # before `first`: nothing to put in
    patched[:, first:] = _patched_lds(model, runs, first, rows, positions.size, point, put_clean)
    return patched


def patch_heads(model: DecoderModel, runs: PatchRuns, *, last_only: bool = False) -> np.ndarray:
    """LD `(L, head)`: the corrupted pass with one head's output (its z, which W_o writes into
    the stream) taken from the clean pass at every position, or at the last one only."""
    first = runs.n - 1 if last_only else runs.first_change
    heads = np.arange(runs.num_heads)  # item h of a layer patches head h

    def put_clean(layer: int, offset: int, z: np.ndarray) -> np.ndarray:
        # z (item, head, n − first, d_head): the layer's item h takes head h's clean output.
        z = z.copy()
        z[offset + heads, heads] = runs.clean[points.heads(layer)][:, first:]
        return z

    return _patched_lds(model, runs, first, runs.num_layers, heads.size, points.heads, put_clean)


def _patched_lds(
    model: DecoderModel,
    runs: PatchRuns,
    first: int,
    rows: int,
    per_row: int,
    point: Callable[[int], str],
    put_clean: Callable[[int, int, np.ndarray], np.ndarray],
) -> np.ndarray:
    """LD `(rows, per_row)`: row r's `per_row` patches are edits of ``point(r)`` by
    ``put_clean(r, offset, activation)``, which patches items offset .. offset + per_row − 1.

    Passes go in batches of consecutive rows, each started at its first row's layer boundary
    from the corrupted stream and run over positions first.. after the corrupted prefix's
    cache: every pass reads each layer's weights once for all its items, so a batch holds
    about PASS_ROWS rows of tokens, and the fewer rows a patch has, the more layers share one
    pass (a patch at a later layer of the batch runs the layers before it unpatched: the
    corrupted pass, computed again).
    """
    tokens = runs.n - first
    prefix = None if first == 0 else run_decoder(model, runs.corrupt_ids[:first], keep=()).cache
    span = max(1, -(-PASS_ROWS // (per_row * tokens)))
    patched = np.empty((rows, per_row))
    for start in range(0, rows, span):
        chosen = range(start, min(start + span, rows))
        stream = runs.corrupt[points.resid(start)][first:]  # (tokens, d_model)
        edits = {point(row): partial(put_clean, row, (row - start) * per_row) for row in chosen}
        trace = run_decoder(
            model,
            runs.corrupt_ids[first:],
            prefix,
            start=(start, np.broadcast_to(stream, (len(chosen) * per_row, *stream.shape))),
            edits=edits,
            keep=(),
            tokens=(runs.answer, runs.wrong),
        )
        last = trace.logits[:, -1].astype(np.float64)  # (item, 2): answer, wrong
        patched[chosen.start : chosen.stop] = (last[:, 0] - last[:, 1]).reshape(-1, per_row)
    return patched
