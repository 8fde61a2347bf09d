"""What the decoder page says about its model's family: the one-line idea and formula, and the
sentences of the views that depend on how the family attends (grouped-query or multi-head
attention) and how positions enter (RoPE, or GPT-2's learned table).

    intro(name, heads, kv_heads, d_head, positions)  the page's idea and its formula
    cache_caption(cache, group_size)                 what one more token adds to the cache
    grid_caption(group_size)                         how the layer's grid of heads is laid out
    NO_ROPE                                          why a model without RoPE has no RoPE plot
"""

from __future__ import annotations

from ui.decoder.generation import cache_bytes_per_token

NO_ROPE = (
    "This model has no RoPE: its positions are learned vectors, one per position, added to the "
    "token embeddings once before layer 1, so q and k are never rotated. Below, how alike the "
    "vectors of this text's positions are."
)


def intro(name: str, heads: int, kv_heads: int, d_head: int, positions: str) -> tuple[str, str]:
    """The page's one-line idea and its formula (LaTeX) for a model of ``heads`` query heads
    over ``kv_heads`` KV heads, positions "rope" or "learned"."""
    if kv_heads < heads:
        sharing = (
            f"{heads} query heads share {kv_heads} sets of keys and values (grouped-query "
            "attention)"
        )
    else:
        sharing = f"each of its {heads} heads has its own keys and values (multi-head attention)"
    where = (
        "positions are rotations (RoPE)"
        if positions == "rope"
        else "positions are learned vectors added to the embeddings"
    )
    text = (
        f"Chat models are decoders: each token may only look back, {sharing}, {where}, and a KV "
        f"cache grows with every generated token. Here {name} runs on this project's own NumPy "
        "attention (it matches Hugging Face transformers to 1e-4)."
    )
    if positions == "rope":
        group = heads // kv_heads
        formula = (
            r"\mathrm{head}_h = \mathrm{softmax}\!\left(\frac{R_i q_h \cdot R_j k_{g(h)}}"
            rf"{{\sqrt{{{d_head}}}}} + \mathrm{{causal}}\right) V_{{g(h)}},\qquad "
            rf"g(h) = \lfloor h / {group} \rfloor"
        )
    else:
        formula = (
            r"\mathrm{head}_h = \mathrm{softmax}\!\left(\frac{q_h \cdot k_h}"
            rf"{{\sqrt{{{d_head}}}}} + \mathrm{{causal}}\right) V_h,\qquad "
            r"x_i = E[t_i] + P_i"
        )
    return text, formula


def cache_caption(cache: object, group_size: int) -> str:
    """What one more token adds to the cache, and what grouping saves (or why it saves none)."""
    added = (
        "Each new token appends one key and one value row per layer and KV head: "
        f"{cache_bytes_per_token(cache):,} bytes per token"
    )
    if group_size > 1:
        return f"{added}, {group_size}× less than multi-head attention would need."
    return (
        f"{added}. Every query head keeps its own keys and values (multi-head attention), so "
        "there is no sharing to save memory here: grouped-query models keep fewer."
    )


def grid_caption(group_size: int, window: int | None = None) -> str:
    """How the layer's grid of heads is laid out (and, in a local layer, what else is grey)."""
    rows = (
        f"each row of the grid is one KV head, whose {group_size} query heads read the same keys "
        "and values, yet attend differently"
        if group_size > 1
        else "every head reads keys and values of its own"
    )
    grey = "the future, masked" if window is None else (
        f"the future and, in this local layer, every key more than {window - 1} tokens back"
    )  # fmt: skip
    return (
        f"Rows are queries, columns keys; grey cells are {grey}. Below, every head of "
        f"the layer: {rows} (one head per row on a phone)."
    )
