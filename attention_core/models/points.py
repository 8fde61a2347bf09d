"""The named points of a transformer's forward pass, where a caller reads or replaces an activation.

TransformerLens's hook points (``blocks.3.attn.hook_z``, ``blocks.3.hook_resid_post``) in this
project's words, for a model of L layers and `n` new positions:

    resid.0            `(n, d_model)`        the residual stream entering layer 0 (the embeddings)
    resid.{l}          `(n, d_model)`        the stream after layer l - 1 (l = 1 .. L): resid.L
                                             is what the final norm reads
    layer.{l}.heads    `(head, n, d_head)`   each head's output z_h = softmax(q kᵀ/√d) v, before
                                             W_o mixes the heads
    layer.{l}.attn_out `(n, d_model)`        what attention adds to the stream: concat(z) W_oᵀ
    layer.{l}.mlp_out  `(n, d_model)`        what the MLP adds to the stream

so resid.{l+1} = resid.{l} + layer.{l}.attn_out + layer.{l}.mlp_out for a pre-norm layer.

Build names with the functions (``resid(3)``, ``heads(7)``), never by formatting strings. An
edit is a mapping name -> function(activation) -> replacement of the same shape: the forward
pass calls it exactly at that point and passes the replacement on (``check_edits``, ``edit_at``).
The function receives a read-only array: return a new one (``z.copy()``, then change it).
``head_scaling`` turns transformers' ``head_mask`` multipliers into edits of the heads.
Nothing here knows a model family: a forward pass that exposes these points calls
``edit_at``, and its trace reads them back with ``read``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import numpy as np

from attention_core.validation import AttentionInputError, check_int

__all__ = [
    "KINDS",
    "SHAPES",
    "Edit",
    "attn_out",
    "check_edits",
    "edit",
    "edit_at",
    "head_scaling",
    "heads",
    "mlp_out",
    "names",
    "parse",
    "read",
    "resid",
]

Edit = Callable[[np.ndarray], object]

# The kinds of point, in the order a layer reaches them, and each one's shape.
KINDS = ("resid", "heads", "attn_out", "mlp_out")
SHAPES = {
    "resid": "(n, d_model)",
    "heads": "(head, n, d_head)",
    "attn_out": "(n, d_model)",
    "mlp_out": "(n, d_model)",
}


def resid(boundary: int) -> str:
    """The residual stream at layer boundary ``boundary``: 0 before layer 0, l after layer l-1."""
    return f"resid.{check_int(boundary, 'the layer boundary', minimum=0)}"


def _layer_point(kind: str, layer: int) -> str:
    return f"layer.{check_int(layer, 'the layer', minimum=0)}.{kind}"


def heads(layer: int) -> str:
    """Each head's output in layer ``layer`` (from 0), before W_o."""
    return _layer_point("heads", layer)


def attn_out(layer: int) -> str:
    """What layer ``layer``'s attention adds to the stream."""
    return _layer_point("attn_out", layer)


def mlp_out(layer: int) -> str:
    """What layer ``layer``'s MLP adds to the stream."""
    return _layer_point("mlp_out", layer)


def _table(num_layers: int) -> dict[str, tuple[str, int]]:
    """Every point of a model of ``num_layers`` layers, in forward order: name -> (kind, index),
    the index a boundary for resid and a layer otherwise."""
    table = {resid(0): ("resid", 0)}
    for layer in range(num_layers):
        for kind, name in (("heads", heads), ("attn_out", attn_out), ("mlp_out", mlp_out)):
            table[name(layer)] = (kind, layer)
        table[resid(layer + 1)] = ("resid", layer + 1)
    return table


def names(num_layers: int) -> tuple[str, ...]:
    """Every point of a model of ``num_layers`` layers, in the order the forward reaches them."""
    return tuple(_table(num_layers))


def parse(name: object, num_layers: int) -> tuple[str, int]:
    """(kind, index) of the point ``name``: ``parse("layer.3.heads", 30) == ("heads", 3)``,
    ``parse("resid.30", 30) == ("resid", 30)``. Raises ``AttentionInputError`` naming the valid
    points for a name this model does not have."""
    table = _table(num_layers)
    if isinstance(name, str) and name in table:
        return table[name]
    close = difflib.get_close_matches(name, table) if isinstance(name, str) else []
    hint = f" Did you mean {close[0]}?" if close else ""
    last = num_layers - 1
    raise AttentionInputError(
        f"{name!r} is not a point of this model.{hint} Its points are resid.0 to "
        f"resid.{num_layers} (the residual stream before layer 0 to after layer {last}) and, "
        f"for each layer l from 0 to {last}, layer.l.heads, layer.l.attn_out and layer.l.mlp_out."
    )


def check_edits(edits: Mapping[str, Edit] | None, num_layers: int) -> dict[str, Edit] | None:
    """``edits`` checked: every name a point of the model, every value callable. None (no
    edits, the forward's fast path) for None or an empty mapping."""
    if not edits:
        return None
    if not isinstance(edits, Mapping):
        raise AttentionInputError(
            "edits must map point names to functions, e.g. {points.heads(3): zero_head_2}."
        )
    for name, change in edits.items():
        parse(name, num_layers)
        if not callable(change):
            raise AttentionInputError(
                f"The edit of {name} must be a function of the activation that returns its "
                f"replacement, got {type(change).__name__}."
            )
    return dict(edits)


def edit(edits: Mapping[str, Edit], name: str, activation: np.ndarray) -> np.ndarray:
    """``activation`` as the edit at ``name`` replaces it (unchanged when there is none).

    The edit sees a read-only view; its result must have the activation's shape and is passed
    on in the activation's dtype."""
    change = edits.get(name)
    if change is None:
        return activation
    seen = activation.view()
    seen.flags.writeable = False
    replacement = np.asarray(change(seen), dtype=activation.dtype)
    if replacement.shape != activation.shape:
        kind = name.split(".")[-1] if name.startswith("layer.") else "resid"
        raise AttentionInputError(
            f"The edit of {name} returned an array shaped {replacement.shape}, but the point "
            f"is shaped {activation.shape} {SHAPES[kind]}: return an array of the same shape."
        )
    return replacement


def edit_at(
    edits: Mapping[str, Edit] | None,
    point: Callable[[int], str],
    index: int,
    activation: np.ndarray,
) -> np.ndarray:
    """``activation`` as the edit at ``point(index)`` replaces it (``edit_at(edits, heads, 3,
    z)``), or ``activation`` itself when ``edits`` is None or empty.

    The forward passes call this at every point of every layer; a pass without edits, the
    common one, must stay as fast as one without points, so it builds no name and looks
    nothing up."""
    if not edits:
        return activation
    return edit(edits, point(index), activation)


def read(
    name: str,
    embeddings: np.ndarray,
    layers: Sequence[object],
    fields: Mapping[str, str],
) -> np.ndarray:
    """The activation at the named point of a pass, as the pass went on with it: resid.0 is
    ``embeddings`` (the stream entering layer 0), resid.{l+1} layer l's output and a layer's
    other points its steps, each kind read from the step ``fields[kind]`` names
    (``trace.POINT_STEPS`` for every decoder family). A layer that did not keep that
    step (its ``getattr`` fails) is an ``AttentionInputError`` naming it."""
    kind, index = parse(name, len(layers))
    if kind == "resid" and index == 0:
        return embeddings
    layer = index - 1 if kind == "resid" else index
    field = fields[kind]
    try:
        return getattr(layers[layer], field)
    except AttributeError:
        raise AttentionInputError(
            f"This pass did not keep {field!r}, which {name} is read from: add it to the "
            "steps the forward pass keeps (its keep=)."
        ) from None


def head_scaling(mask: object) -> dict[str, Edit]:
    """transformers' ``head_mask`` `(layer, head)` as edits: layer l's head outputs multiplied
    by ``mask[l]`` (0 removes a head: Michel et al. 2019). A layer whose multipliers are all 1
    gets no edit, so its numbers are those of a pass without one."""
    multipliers = np.asarray(mask, dtype=np.float32)
    if multipliers.ndim != 2:
        raise AttentionInputError(
            f"A head mask is shaped (layer, head), one multiplier per head, got shape "
            f"{multipliers.shape}."
        )
    return {
        heads(layer): partial(_scaled, row)
        for layer, row in enumerate(multipliers)
        if np.any(row != 1.0)
    }


def _scaled(row: np.ndarray, z: np.ndarray) -> np.ndarray:
    """z `(head, n, d_head)` with head h multiplied by row[h]."""
    if row.shape[0] != z.shape[0]:
        raise AttentionInputError(
            f"The head mask has {row.shape[0]} multipliers a layer but the model has "
            f"{z.shape[0]} heads: give one per head."
        )
    return z * row[:, None, None]
