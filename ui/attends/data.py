"""The "why a head attends there" page's computations, once per distinct input and shared by
every viewer, each cache bounded in bytes (ui.widgets.byte_cache).

    reading(kind, ids, layer, head, query)   one head's scores of every key, for one query,
                                             split by source (models.score_reading), from the
                                             head's split for every query (cached apart, run
                                             where the model is kept: a query or key change
                                             runs no pass)
    previous_heads(kind)                     the model's previous-token heads, found by the
                                             heads page's probe (random tokens repeated)
    learning_reading(run, layer, head, query)  the same for a learning-page run's model

Nothing here computes a formula: the numbers come from attention_core (score_parts,
models.score_sources and score_reading, head_roles).
"""

from __future__ import annotations

import numpy as np

from attention_core.head_roles import repeated_tokens
from attention_core.models import readouts
from attention_core.models.score_reading import (
    HeadReading,
    attn_only_head_split,
    decoder_head_split,
    encoder_head_split,
    read_head,
)
from attention_core.models.score_sources import HeadSplit, head_name
from attention_core.training.formation import PREVIOUS_TOKEN_HEAD
from server.kept_process import run_where_kept
from server.lane import LONG_RUNS
from ui.models import minilm, page_model, smollm, toy
from ui.widgets.byte_cache import MB, bounded_by_bytes

# The page's prompt is cut to this many tokens: the cost line is one head at 64.
MAX_PROMPT_TOKENS = 64
# The probe that names previous-token heads: its seed and the length of its random half.
PROBE_SEED, PROBE_LENGTH = 0, 20


def model_of(kind: str):
    """The model `kind` names: "minilm", or a decoder's name (``page_model.named_decoder``)."""
    return (minilm.load_model() if kind == "minilm" else page_model.named_decoder(kind)).model


def reading(kind: str, ids: tuple[int, ...], layer: int, head: int, query: int) -> HeadReading:
    """Head (`layer`, `head`), from 0, of model `kind` on `ids`, read for position `query`."""
    model = model_of(kind)
    split = _split(kind, ids, layer, head, id(model), model)
    return _reading(kind, ids, layer, head, query, id(model), split)


@smollm.let_go_with_model
@minilm.let_go_with_model
# Tens of milliseconds from the split in hand: no lane, never behind another viewer's pass.
@bounded_by_bytes(8 * MB, name="attends.reading", lane=None)  # ~0.4 MB an entry at 64 tokens
def _reading(kind, ids, layer, head, query, model_id, _split) -> HeadReading:
    return read_head(_split, query, causal=kind != "minilm")


@smollm.let_go_with_model
@minilm.let_go_with_model
@bounded_by_bytes(48 * MB, name="attends.split", lane=LONG_RUNS)  # 6-10 MB a head at 64
def _split(kind, ids, layer, head, model_id, _model) -> HeadSplit:
    ids_array = np.asarray(ids, dtype=np.int64)
    if kind == "minilm":
        return encoder_head_split(_model, ids_array, layer, head)
    return run_where_kept(decoder_head_split, _model, ids_array, layer, head)


def previous_heads(kind: str) -> tuple[str, ...]:
    """The names (``score_sources.head_name``) of the heads whose previous-token score on the
    probe passes PREVIOUS_TOKEN_HEAD, layer by layer."""
    model = model_of(kind)
    return _previous_heads(kind, id(model), model)


@smollm.let_go_with_model
@minilm.let_go_with_model
@bounded_by_bytes(MB, name="attends.previous", lane=LONG_RUNS)
def _previous_heads(kind, model_id, _model) -> tuple[str, ...]:
    if kind == "minilm":
        ids = repeated_tokens(readouts.ENCODER_PROBE_POOL, PROBE_LENGTH, PROBE_SEED)
        _, roles = readouts.encoder_roles(_model, ids)
    else:
        pool = readouts.decoder_probe_pool(_model.config.vocab_size)
        # A model of few positions (a listed GPT-2 of 32) reads a shorter probe.
        length = min(PROBE_LENGTH, _model.context_limit // 2)
        ids = repeated_tokens(pool, length, PROBE_SEED)
        _, roles = run_where_kept(readouts.decoder_roles, _model, ids)
    found = np.argwhere(roles.previous > PREVIOUS_TOKEN_HEAD)
    return tuple(head_name(int(layer), int(head)) for layer, head in found)


def learning_reading(run: toy.TrainingRun, layer: int, head: int, query: int) -> HeadReading:
    """Head (`layer`, `head`), from 0, of a finished learning-page run's final model on its
    held-out example, read for position `query`."""
    return _learning_reading(run.key, layer, head, query, run)


@bounded_by_bytes(4 * MB, name="attends.learning")
def _learning_reading(key, layer, head, query, _run) -> HeadReading:
    settings = _run.settings
    split = attn_only_head_split(settings.config, _run.final.params,
                                 toy.example_tokens(settings), layer, head)  # fmt: skip
    return read_head(split, query)
