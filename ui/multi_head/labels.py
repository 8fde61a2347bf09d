"""How every picture of the multi-head page names and colours a head and writes a shape.

Every head has one colour everywhere on the page: the columns it owns in Q, K, V and the concat,
the rows it owns in W_Q, W_K, W_V, the columns it owns in W_O, and its box in the flow diagram.
"""

from __future__ import annotations

from collections.abc import Sequence

from ui.widgets.theme import HEAD_COLORS


def head_color(head: int) -> str:
    return HEAD_COLORS[head % len(HEAD_COLORS)]


def head_names(num_heads: int) -> list[str]:
    return [f"head {h + 1}" for h in range(num_heads)]


def shape_text(shape: Sequence[int]) -> str:
    """(6, 12) for a shape, the way the page writes shapes at every arrow."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"
