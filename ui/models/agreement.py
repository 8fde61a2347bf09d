"""The line under a real model that says how closely our forward pass agrees with Hugging Face
transformers on the page's own tokens, asked for with a toggle (it loads transformers' copy of
the model in a process of its own, so torch never enters the server's memory).

    check(view, loaded, model, ids)    the toggle, and once on, the line: the largest logit
                                       difference and how often the likeliest next token is
                                       the same (for an encoder, the largest difference of the
                                       last hidden states)

The comparison is attention_core.models.fidelity's; it is cached per model and tokens.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

import numpy as np
import streamlit as st

from attention_core import AttentionInputError
from attention_core.models import BertModel, run_bert_ids
from attention_core.models.fidelity import Agreement, agreement
from attention_core.models.forward import run_decoder
from server.kept_process import run_where_kept
from server.lane import LONG_RUNS
from server.process_load import load_in_a_process
from ui.models import chosen, smollm
from ui.widgets.byte_cache import bounded_by_bytes
from ui.widgets.state import PageState

REFERENCE = "attention_core.models.fidelity:transformers_outputs"


def check(view: PageState, loaded: object, model: object, ids: tuple[int, ...]) -> None:
    """The toggle and, when on, the agreement line (or why there is none)."""
    if importlib.util.find_spec("transformers") is None:
        return
    on = st.toggle(
        "Check these tokens against Hugging Face transformers",
        key=view.bool_key("against_hf", False),
        help="Runs transformers' own copy of the model (float32, eager attention) on the same "
        "tokens, in a process of its own, and compares the outputs with this page's.",
    )
    if not on:
        return
    source = loaded.source if isinstance(loaded, chosen.ChosenLoad) else _shipped_path(model)
    kind = "encoder" if isinstance(model, BertModel) else "decoder"
    try:
        with st.spinner("Running transformers on the same tokens (a few seconds)…"):
            found = _agreement(source, kind, tuple(ids), id(model), model)
    except AttentionInputError as error:
        st.caption(f":material/rule: {error}")
        return
    except Exception as error:  # transformers cannot read this checkpoint: say so, carry on
        st.caption(
            f":material/rule: transformers could not run this model ({type(error).__name__})."
        )
        return
    storage = getattr(getattr(model, "weights", None), "storage", "float32")
    st.caption(sentence(found, kind, importlib.metadata.version("transformers"), storage))


def sentence(found: Agreement, kind: str, version: str, storage: str = "float32") -> str:
    what = "logit difference" if kind == "decoder" else "difference of the last hidden states"
    line = (
        f":material/rule: Against transformers {version} (float32, eager) on these "
        f"{found.positions} tokens: the largest {what} is {found.largest_difference:.1e}"
    )
    if found.same_top_token is not None:
        line += f"; the likeliest next token is the same at {found.same_top_token:.0%} of them"
    if storage != "float32":
        line += (
            f" (the weights are held as {storage} here: most of the difference is that rounding)"
        )
    return line + "."


def _shipped_path(model: object) -> str:
    location = getattr(model, "location", None)
    return str(location.path) if location is not None else ""


@smollm.let_go_with_model
@bounded_by_bytes(1_000_000, name="models.agreement", lane=LONG_RUNS)
def _agreement(source: str, kind: str, ids: tuple[int, ...], model_id: int, _model) -> Agreement:
    theirs = load_in_a_process(REFERENCE, {"source": source, "kind": kind, "ids": list(ids)})
    ids_array = np.asarray(ids, dtype=np.int64)
    if kind == "encoder":
        ours = run_bert_ids(_model, ids_array).hidden_states[-1]
    else:
        ours = run_where_kept(run_decoder, _model, ids_array, all_logits=True, keep=()).logits
    return agreement(ours, theirs, kind)
