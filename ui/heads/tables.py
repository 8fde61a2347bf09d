"""The heads page's tables and sentences: the numbers behind each chart, written for a reader."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attention_core.head_roles import HeadRoles, strongest_heads
from attention_core.logit_lens import LogitAttribution, LogitLens
from attention_core.models.decoder import DecoderModel
from ui.heads.data import PromptReadout
from ui.heads.figures import ROLE_TITLES, stage_labels, token_label

TOP_WRITERS = 6
STRONGEST = 3


def lens_table(readout: PromptReadout, token: int, model: DecoderModel) -> pd.DataFrame:
    """A row per stage: the likeliest tokens there, and the followed token's rank and p."""
    lens, top = readout.lens, readout.top_tokens

    def likeliest(row: np.ndarray, probs: np.ndarray) -> str:
        return ", ".join(
            f"“{token_label(model.token_text(t))}” {p:.3f}" for t, p in zip(row, probs, strict=True)
        )

    return pd.DataFrame(
        {
            "after": stage_labels(lens.logits.shape[0]),
            "likeliest next tokens": [
                likeliest(row, probs)
                for row, probs in zip(top, lens.probabilities(top), strict=True)
            ],
            "rank of the token": lens.rank(token),
            "its probability": np.round(lens.probability(token), 4),
        }
    )


def lens_sentence(lens: LogitLens, token: int, name: str) -> str:
    """When the token first reaches the top, and its probability at the end."""
    ranks, p = lens.rank(token), lens.probability(token)
    last = len(ranks) - 1
    top = np.flatnonzero(ranks == 1)
    # The first stage from which it stays the likeliest to the end.
    settled = next((s for s in range(last + 1) if (ranks[s:] == 1).all()), None)
    if settled is None:
        where = f"it never becomes the likeliest (rank {ranks[-1]} after the last layer)"
    elif settled == 0:
        where = "it is the likeliest from the embedding on"
    else:
        where = f"it is the likeliest from layer {settled} on"
    first = f", first on top after layer {top[0]}" if top.size and top[0] != settled else ""
    return (
        f"{name}: {where}{first}; its probability is {p[0]:.2g} after the embedding and "
        f"{p[-1]:.3f} after layer {last}, the model's own prediction."
    )


# The page's formula for each final norm: RMSNorm (Llama, Qwen2), LayerNorm (GPT-2, whose
# attention also adds a bias b_O of its own).
STREAM_FORMULAS = {
    "RMSNorm": r"r_L = e + \sum_{l}\Big(\sum_h z_{l,h} W_{O,h}^\top + m_l\Big),\qquad "
    r"\mathrm{logits} = \frac{\gamma \odot r_L}{\sqrt{\mathrm{mean}(r_L^2) + \varepsilon}}\,E^\top",
    "LayerNorm": r"r_L = e + \sum_{l}\Big(\sum_h z_{l,h} W_{O,h}^\top + b_{O,l} + m_l\Big),\qquad "
    r"\mathrm{logits} = \Big(\frac{\gamma \odot (r_L - \bar r_L)}{\sqrt{\mathrm{var}(r_L) + "
    r"\varepsilon}} + \beta\Big)\,E^\top",
}


def attribution_sentence(split: LogitAttribution, what: str, norm: str = "RMSNorm") -> str:
    """The frozen scale of the final ``norm`` ("RMSNorm" or "LayerNorm"), and the parts that
    add up to the logit."""
    scale = "1/ρ" if norm == "RMSNorm" else "1/σ"
    fixed = (
        f", biases (every layer's b_O and the norm's β) {split.fixed:+.3f}"
        if norm == "LayerNorm"
        else ""
    )
    return (
        f"The final {norm}'s scale is frozen at its value on this input, {scale} = "
        f"{split.scale:.4f}: that makes {what} a sum. Embedding {split.embedding:+.3f}, heads "
        f"{split.heads.sum():+.3f}, MLPs {split.mlps.sum():+.3f}{fixed}; together "
        f"{split.total:+.4f}, the logit itself {split.logit:+.4f}."
    )


def family_sentence(config: object) -> str:
    """What the split holds besides the final norm's scale, in the families that put more norms
    or a cap between the writers and the logit ("" for the rest)."""
    said = []
    if getattr(config, "norms", "pre") != "pre":
        said.append(
            "Each head's write passes the norm after its layer's attention with that norm's "
            "scale held too (its value over all the heads together), so the heads still add up."
        )
    if getattr(config, "final_softcap", None):
        said.append(
            f"This split is of the logit z before the cap: the model's own logit is "
            f"{config.final_softcap:g}·tanh(z/{config.final_softcap:g}), which no sum of "
            "parts makes."
        )
    return " ".join(said)


def top_writers(split: LogitAttribution) -> pd.DataFrame:
    """The writers that add the most (positive first, then the most negative)."""
    layers, heads = split.heads.shape
    parts = {f"layer {layer + 1}, head {head + 1}": split.heads[layer, head]
             for layer in range(layers) for head in range(heads)}  # fmt: skip
    parts.update({f"layer {layer + 1}, MLP": split.mlps[layer] for layer in range(layers)})
    parts["embedding"] = split.embedding
    ordered = sorted(parts.items(), key=lambda item: -item[1])
    shown = [*ordered[:TOP_WRITERS], *ordered[-2:]]
    return pd.DataFrame(
        {
            "writer": [name for name, _ in shown],
            "adds to the logit": [round(v, 4) for _, v in shown],
        }
    )


def strongest_roles(roles: HeadRoles) -> pd.DataFrame:
    """The strongest heads of each role, with their scores (layers and heads from 1)."""
    rows = []
    for role, title in ROLE_TITLES.items():
        for layer, head, score in strongest_heads(roles.score(role), STRONGEST):
            rows.append({"role": title, "head": f"layer {layer + 1}, head {head + 1}",
                         "score": round(score, 3)})  # fmt: skip
    return pd.DataFrame(rows)


def correlation_frame(names: list[str], correlations: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(np.round(correlations, 3), index=names, columns=names)
