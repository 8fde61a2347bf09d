"""The probe page's numbers: the model's trace, rollout, the joint query-key map and the
ablations, each computed once per distinct input and model and shared by every session (the
byte-bounded cache, ui.widgets.byte_cache: read-only, in the lane of quick runs, as what it
computes may need the model's forward pass), and what the page reads off an ablation.

Nothing here computes attention: the numbers come from `attention_core.probing` and the model's
own forward pass (`ui.models.minilm`).
"""

from __future__ import annotations

import numpy as np

from attention_core import AttentionInputError
from attention_core.models import BertModel
from attention_core.models.hiding import Ablation, ablate_head, ablate_token
from attention_core.probing import (
    QueryKeyProjection,
    Rollout,
    attention_rollout,
    joint_query_key_projection,
)
from ui.models import minilm
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of, read_only

# Rollout, the map's lines and the ablation's second forward pass all grow with n²; a sentence
# or two is what a learner probes, and it keeps every picture readable.
MAX_PROBE_TOKENS = 64


def probe_trace(model: BertModel, text: str) -> minilm.PageTrace:
    """The model's trace of `text` (the real-model page's cache), for texts of at most
    MAX_PROBE_TOKENS tokens; longer or empty text raises AttentionInputError."""
    n = len(model.tokenize(text).tokens)
    if n > MAX_PROBE_TOKENS:
        raise AttentionInputError(
            f"This text has {n} tokens; the probes here take at most {MAX_PROBE_TOKENS} (about "
            "two sentences), so their pictures stay readable. Shorten the text, or open it on "
            "the real-model page, which reads up to 512."
        )
    return minilm.page_trace(model, text)


def rollout_of(model: BertModel, text: str) -> Rollout:
    """Attention rollout of `text` through every layer (residual ½, as the paper)."""
    return _rollout(text, id(model), model)


# Three (layer, n, n) float64 stacks, 0.6 MB at 64 tokens: four texts.
@minilm.let_go_with_model
@bounded_by_bytes(3 * MB, name="probe.rollout", max_entries=4)
def _rollout(text: str, model_id: int, _model: BertModel) -> Rollout:
    return read_only(attention_rollout(minilm.page_trace(_model, text).weights))


def projection_of(model: BertModel, text: str, layer: int, head: int) -> QueryKeyProjection:
    """The joint query-key map of head (`layer`, `head`), both from 0."""
    return _projection(text, layer, head, id(model), model)


# A head's projected queries and keys, (64, d_head) each at most, ~40 KB: sixteen heads.
@minilm.let_go_with_model
@bounded_by_bytes(MB, name="probe.projection", max_entries=16)
def _projection(
    text: str, layer: int, head: int, model_id: int, _model: BertModel
) -> QueryKeyProjection:
    trace = minilm.page_trace(_model, text)
    return read_only(
        joint_query_key_projection(trace.q_heads[layer, head], trace.k_heads[layer, head])
    )


def ablation_of(
    model: BertModel,
    text: str,
    position: int,
    mode: str,
    replacement: str,
    ablated: tuple[int, int] = (0, 0),
) -> Ablation:
    """`text` with token `position` (from 0) removed, hidden or replaced, or (mode "head") with
    head `ablated` = (layer, head) (from 0) removed: two forward passes, once per distinct
    choice. Raises AttentionInputError for a replacement that is not a word piece of the
    vocabulary."""
    return _ablation(text, *_choices(position, mode, replacement, ablated), id(model), model)


def ablation_digest(
    trace: minilm.PageTrace,
    position: int,
    mode: str,
    replacement: str,
    ablated: tuple[int, int] = (0, 0),
) -> str:
    """What stands for `ablation_of(model, trace.text, ...)` in a figure's key: the trace's
    digest (the text and the model) and the choices that decide the ablation."""
    return digest_of(trace.digest, *_choices(position, mode, replacement, ablated))


def _choices(
    position: int, mode: str, replacement: str, ablated: tuple[int, int]
) -> tuple[int, str, str, tuple[int, int]]:
    replacement = replacement.strip() if mode == "replace" else ""
    # The choices a mode ignores are fixed, so they do not split its cache entry.
    position = 0 if mode == "head" else position
    ablated = tuple(ablated) if mode == "head" else (0, 0)
    return position, mode, replacement, ablated


# Weights before, after and their difference, three (6, 12, 64, 64) float64 maps at 64 tokens,
# 7 MB: four choices, and four of a short text's too.
@minilm.let_go_with_model
@bounded_by_bytes(32 * MB, name="probe.ablation", max_entries=4,
                  spinner="Running the model on the changed text…")  # fmt: skip
def _ablation(
    text: str,
    position: int,
    mode: str,
    replacement: str,
    ablated: tuple[int, int],
    model_id: int,
    _model: BertModel,
) -> Ablation:
    if mode == "head":
        return read_only(ablate_head(_model, text, *ablated))
    return read_only(
        ablate_token(_model, text, position, mode, replacement=replacement or "[MASK]")
    )


def largest_change(ablation: Ablation, layer: int, head: int) -> tuple[float, tuple[int, int]]:
    """The signed weight change of largest size in head (`layer`, `head`) and its (query, key)
    positions in the original text (a removed token's NaN row and column are skipped)."""
    difference = np.nan_to_num(ablation.difference[layer, head], nan=0.0)  # (q_pos, k_pos)
    i, j = np.unravel_index(int(np.abs(difference).argmax()), difference.shape)
    return float(difference[i, j]), (int(i), int(j))


def unchanged_layer_note(ablation: Ablation, layer: int) -> str | None:
    """For a removed head, the message when the shown `layer` (from 0) cannot have changed."""
    if ablation.head is None or layer > ablation.head[0]:
        return None
    removed = ablation.head[0] + 1
    own = "its own layer" if layer + 1 == removed else f"layer {layer + 1}, below it"
    above = (
        f"Its effect shows in the layers above: move the Layer slider to {removed + 1} or higher."
        if removed < ablation.weights_before.shape[0]
        else "No layer reads it after the last one: only the final vectors below can change."
    )
    return (
        f"The removed head sits in layer {removed}, so {own} computes exactly the same weights "
        "(the difference below is 0 everywhere, and the removed head's own pattern is unchanged: "
        f"only its output is dropped). {above}"
    )
