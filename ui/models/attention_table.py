"""What each decoder this server runs changes in attention, one row per model, read from its
configuration: the shipped model and every decoder the operator lists.

    row(name, config)          one model's row: family, query : KV heads, RoPE, layers, QK-norm,
                               soft caps, NoPE layers, query scale, norms
    table(loaded_name, config) the rows of the loaded model and of every listed decoder whose
                               config can be read without loading it (a GGUF file's cannot)
    show(loaded_name, config)  the table under its title, with what to read in it
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attention_core import AttentionInputError
from attention_core.models import families
from attention_core.models.gpt2.config import GPT2Config
from attention_core.models.llama import LlamaConfig
from ui.models import chosen
from ui.widgets import small_screens

NONE = "—"


def _layers(numbers: list[int]) -> str:
    shown = ", ".join(str(i + 1) for i in numbers[:6])
    return shown + (" …" if len(numbers) > 6 else "")


def _rope(config: LlamaConfig) -> str:
    bases = [config.rope_base(i) for i in range(config.num_hidden_layers)]
    used = sorted({base for base in bases if base is not None})
    if not used:
        return NONE
    if len(used) == 1:
        text = f"base {used[0]:,.0f}"
    else:
        local = {config.rope_base(i) for i, w in enumerate(config.windows) if w is not None}
        text = " · ".join(
            f"{'local' if base in local else 'global'} {base:,.0f}" for base in sorted(used)
        )
    if config.rope_llama3 is not None:
        text += f", llama3-scaled ×{config.rope_llama3[0]:g}"
    return text


def _pattern(config: LlamaConfig) -> str:
    local = [i for i in range(config.num_hidden_layers) if config.window(i) is not None]
    if not local:
        return f"all {config.num_hidden_layers} global"
    window = config.window(local[0])
    global_ = config.num_hidden_layers - len(local)
    return f"{len(local)} local (last {window}) · {global_} global"


def row(name: str, config: LlamaConfig | GPT2Config) -> dict[str, str]:
    """One model's attention, in words a table cell holds."""
    if isinstance(config, GPT2Config):
        return {
            "model": name, "family": "GPT-2",
            "query : KV heads": f"{config.n_head} : {config.n_head}",
            "positions": "learned table", "layers": f"all {config.n_layer} global",
            "QK-norm": NONE, "soft caps": NONE, "NoPE layers": NONE,
            "query scale": f"1/√{config.head_dim}"
            + (" ÷ layer" if config.layer_scaled else ""),
            "norms": "LayerNorm before each block",
        }  # fmt: skip
    family = families.family_of({"model_type": config.model_type}).name
    caps = [f"scores {config.attn_softcap:g}"] if config.attn_softcap else []
    caps += [f"logits {config.final_softcap:g}"] if config.final_softcap else []
    nope = [i for i in range(config.num_hidden_layers) if config.rope_base(i) is None]
    scale = (
        f"1/√{config.head_dim}"
        if config.query_scale is None
        else f"1/√{config.query_scale**-2:.0f} (config)"
    )
    norms = {"pre": "before each block", "sandwich": "before and after each block",
             "post": "after each block"}[config.norms]  # fmt: skip
    return {
        "model": name,
        "family": family,
        "query : KV heads": f"{config.num_attention_heads} : {config.num_key_value_heads}",
        "positions": "RoPE " + _rope(config),
        "layers": _pattern(config),
        "QK-norm": {None: NONE, "head": "per head", "projection": "whole projection"}[
            config.qk_norm
        ],
        "soft caps": ", ".join(caps) or NONE,
        "NoPE layers": _layers(nope) if nope else NONE,
        "query scale": scale,
        "norms": "RMSNorm " + norms,
    }


def _parsed(raw: dict) -> LlamaConfig | GPT2Config | None:
    try:
        family = families.family_of(raw)
        if family.kind != "decoder":
            return None
        if raw.get("model_type") == "gpt2":
            return GPT2Config.from_dict(raw)
        return LlamaConfig.from_dict(raw)
    except AttentionInputError:
        return None


def table(loaded_name: str, config: object) -> pd.DataFrame:
    """The loaded model's row first, then every other listed decoder's."""
    rows = [row(loaded_name, config)] if isinstance(config, LlamaConfig | GPT2Config) else []
    for name, source in chosen.listed().items():
        if name == loaded_name:
            continue
        raw = chosen.config_of(source)
        parsed = None if raw is None else _parsed(raw)
        if parsed is not None:
            rows.append(row(name, parsed))
    return pd.DataFrame(rows)


def show(loaded_name: str, config: object) -> None:
    st.subheader("What each decoder here changes in attention")
    small_screens.table(table(loaded_name, config), hide_index=True)
    st.caption(
        "Read from each model's configuration: this one first, then every other decoder this "
        "server lists (a GGUF file's once it is loaded). A query : KV ratio above 1 is "
        "grouped-query attention; a local layer reads only its last tokens; NoPE layers rotate "
        "nothing."
    )
