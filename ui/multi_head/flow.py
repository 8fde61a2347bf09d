"""The multi-head computation as a Graphviz diagram, with the shape on every arrow."""

from __future__ import annotations

from ui.multi_head.labels import head_color, shape_text

# Beyond this many heads the flow diagram draws the first and last ones and "…" between.
MAX_DRAWN_HEADS = 6


def flow_diagram(
    *, q_len: int, k_len: int, d_model: int, num_heads: int, cross: bool, causal: bool
) -> str:
    """Graphviz DOT of the whole computation, with the shape of what flows on every arrow."""
    d_head = d_model // num_heads
    q_shape, k_shape = shape_text((q_len, d_model)), shape_text((k_len, d_model))
    br = "\\n"  # a line break inside a DOT label
    lines = [
        "digraph {",
        "rankdir=LR; nodesep=0.15; ranksep=0.3;",
        'node [shape=box, style="rounded,filled", fillcolor="#f7fbff", fontname="Helvetica", '
        "fontsize=14, margin=0.08];",
        'edge [fontname="Helvetica", fontsize=12, color="#555555"];',
        f'xq [label="{"X (queries)" if cross else "X"}", fillcolor="#e8e8e8"];',
    ]
    kv_source = "xq"
    if cross:
        lines.append(f'xkv [label="X_kv{br}(keys, values)", fillcolor="#e8e8e8"];')
        kv_source = "xkv"
    lines += [
        f'Q [label="Q = X W_Qᵀ + b_Q"]; xq -> Q [label="{q_shape}"];',
        f'K [label="K = X W_Kᵀ + b_K"]; {kv_source} -> K [label="{k_shape}"];',
        f'V [label="V = X W_Vᵀ + b_V"]; {kv_source} -> V [label="{k_shape}"];',
        f'split [label="split_heads{br}(pos, d_model) →{br}(head, pos, d_head)"];',
        f'Q -> split [label="{q_shape}"]; K -> split [label="{k_shape}"]; '
        f'V -> split [label="{k_shape}"];',
    ]
    drawn = (
        list(range(num_heads))
        if num_heads <= MAX_DRAWN_HEADS
        else [*range(MAX_DRAWN_HEADS - 1), num_heads - 1]
    )
    mask_text = f"{br}causal mask" if causal else ""
    into_head = (
        f"q {shape_text((q_len, d_head))}{br}k, v {shape_text((k_len, d_head))}"
        if cross
        else f"q, k, v {shape_text((q_len, d_head))}"
    )
    for h in drawn:
        color = head_color(h)
        lines += [
            f'h{h} [label="head {h + 1}{br}softmax(q kᵀ/√{d_head}) v{mask_text}", '
            f'fillcolor="{color}33", color="{color}", penwidth=2];',
            f'split -> h{h} [label="{into_head}", color="{color}"];',
            f'h{h} -> concat [label="{shape_text((q_len, d_head))}", color="{color}"];',
        ]
    if len(drawn) < num_heads:
        lines.append(
            f'more [label="… {num_heads - len(drawn)} more heads", shape=plaintext, style=""];'
        )
        lines.append("split -> more -> concat [style=dotted];")
    lines += [
        f'concat [label="concat{br}{shape_text((num_heads, q_len, d_head))}{br}→ {q_shape}"];',
        f'out [label="output ={br}concat W_Oᵀ + b_O", fillcolor="#e8e8e8"];',
        f'concat -> out [label="{q_shape}"];',
        "}",
    ]
    return "\n".join(lines)
