"""How closely our forward pass agrees with Hugging Face transformers on the same checkpoint and
the same tokens: the number a page shows under a real model.

    transformers_outputs(source, kind, ids)   transformers' float32 eager pass over ``ids``: a
                                              decoder's logits `(n, vocab)`, an encoder's last
                                              hidden states `(n, d_model)`
    agreement(ours, theirs, kind)             the largest absolute difference, and for a
                                              decoder the share of positions whose likeliest
                                              next token is the same

torch and transformers are imported inside ``transformers_outputs`` only: a server runs it in a
child process (``server.process_load``), so neither ever enters the server's own memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from attention_core.validation import AttentionInputError

__all__ = ["Agreement", "agreement", "transformers_outputs"]


@dataclass(frozen=True)
class Agreement:
    """largest_difference: max |ours − theirs| over every position and logit (or hidden
    value); same_top_token: the share of positions where both pick the same likeliest next
    token (None for an encoder); positions: how many were compared."""

    largest_difference: float
    same_top_token: float | None
    positions: int


def agreement(
    ours: np.ndarray, theirs: np.ndarray, kind: Literal["decoder", "encoder"]
) -> Agreement:
    """Compare two `(n, vocab)` logits (or `(n, d_model)` hidden states) position by position."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if ours.shape != theirs.shape:
        raise AttentionInputError(
            f"Our pass gave {ours.shape} and transformers' {theirs.shape}: they read different "
            "tokens or different models."
        )
    same = None
    if kind == "decoder":
        same = float(np.mean(ours.argmax(-1) == theirs.argmax(-1)))
    return Agreement(float(np.max(np.abs(ours - theirs))), same, int(ours.shape[0]))


def transformers_outputs(
    source: str,
    kind: Literal["decoder", "encoder"],
    ids: list[int],
    progress: object = None,
) -> np.ndarray:
    """transformers' own pass (float32, eager attention) over ``ids`` of the checkpoint at
    ``source``: a Hugging Face folder, a Hub id in huggingface_hub's cache (never downloaded
    here), or a GGUF file (dequantized by transformers)."""
    import torch
    import transformers

    options: dict[str, object] = {"dtype": torch.float32, "attn_implementation": "eager"}
    where = source
    if source.endswith(".gguf"):
        where, options["gguf_file"] = str(Path(source).parent), Path(source).name
    elif not Path(source).expanduser().is_dir():
        options["local_files_only"] = True
    auto = transformers.AutoModelForCausalLM if kind == "decoder" else transformers.AutoModel
    model = auto.from_pretrained(where, **options).eval()
    with torch.no_grad():
        out = model(torch.tensor([list(ids)]))
    chosen = out.logits if kind == "decoder" else out.last_hidden_state
    return chosen[0].numpy().astype(np.float32)
