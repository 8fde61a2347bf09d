"""The multi-head computation as a picture: one box per step, the shape of what flows on every
arrow, the heads side by side in their colours.

Drawn as inline SVG laid out here, in columns, rather than by Graphviz in the browser: the page's
first chart no longer waits for Graphviz's script and layout, the text takes the theme's colour
(light or dark), and a screen reader reads the whole flow from the picture's label.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from html import escape

from ui.multi_head.labels import head_color, shape_text

# Beyond this many heads the flow diagram draws the first and last ones and "…" between.
MAX_DRAWN_HEADS = 6

BOX_FONT, LABEL_FONT = 14, 12  # px
# The picture shrinks with its column down to this share of its size (its labels 10 px high),
# and scrolls sideways below it.
MIN_SCALE = 10 / LABEL_FONT
LABEL_LINE = 16  # px from one line of an arrow's label to the next (its box: 15.6 px)
LINE_HEIGHT = 17  # px from one line of a box's text to the next
# The text is in the page's own font (Source Sans); its widest lines here (digits, parentheses,
# capitals) average under this share of the font size, so each fits its box (tests/e2e).
CHAR_WIDTH = 0.56
PAD_X, PAD_Y = 10, 7
ROW_GAP = 14  # between two heads' boxes
EDGE_ROOM = 10  # on each side of an arrow's label
BEND = 12  # from the shared end of an arrow to where it turns
HEAD = 8  # an arrowhead's length
MARGIN = 6
# How much of a head's colour, or of the text's colour for a shared step, fills its box: light
# enough that the theme's text keeps its contrast on it, light background or dark.
HEAD_WASH, STEP_WASH = 0.2, 0.07


@dataclass(frozen=True)
class Box:
    """One step, centred at (x, y), its text one line per entry."""

    lines: tuple[str, ...]
    x: float = 0.0
    y: float = 0.0
    color: str | None = None  # a head's colour; None for the steps every head shares
    dotted: bool = False  # the "… more heads" placeholder: text only

    @property
    def width(self) -> float:
        return max(len(line) for line in self.lines) * BOX_FONT * CHAR_WIDTH + 2 * PAD_X

    @property
    def height(self) -> float:
        return len(self.lines) * LINE_HEIGHT + 2 * PAD_Y


@dataclass(frozen=True)
class Arrow:
    """From one box's right side to another's left, turning once near the end it shares.

    The label goes on the straight piece this arrow alone takes: the target's end when one box
    feeds several (X into Q, K, V), the source's end when several feed one (Q, K, V into split).
    """

    source: str
    target: str
    label: tuple[str, ...] = ()
    color: str | None = None
    label_at: str = "target"  # or "source"
    dotted: bool = False


def flow_diagram(
    *, q_len: int, k_len: int, d_model: int, num_heads: int, cross: bool, causal: bool
) -> str:
    """An SVG picture of the whole computation, with the shape of what flows on every arrow."""
    boxes, arrows, columns = _flow(q_len, k_len, d_model, num_heads, cross, causal)
    return _svg(boxes, arrows, columns, _description(q_len, k_len, d_model, num_heads, cross))


def _flow(q_len, k_len, d_model, num_heads, cross, causal):
    """The boxes by name, the arrows, and the boxes' names column by column, left to right."""
    d_head = d_model // num_heads
    q_shape, k_shape = shape_text((q_len, d_model)), shape_text((k_len, d_model))
    boxes = {"xq": Box(("X (queries)",) if cross else ("X",))}
    kv_source = "xq"
    if cross:
        boxes["xkv"] = Box(("X_kv", "(keys, values)"))
        kv_source = "xkv"
    boxes |= {
        "Q": Box(("Q = X W_Qᵀ + b_Q",)),
        "K": Box(("K = X W_Kᵀ + b_K",)),
        "V": Box(("V = X W_Vᵀ + b_V",)),
        "split": Box(("split_heads", "(pos, d_model) →", "(head, pos, d_head)")),
    }
    arrows = [
        Arrow("xq", "Q", (q_shape,)),
        Arrow(kv_source, "K", (k_shape,)),
        Arrow(kv_source, "V", (k_shape,)),
        *(Arrow(name, "split", (shape,), label_at="source")
          for name, shape in (("Q", q_shape), ("K", k_shape), ("V", k_shape))),
    ]  # fmt: skip
    drawn = (
        list(range(num_heads))
        if num_heads <= MAX_DRAWN_HEADS
        else [*range(MAX_DRAWN_HEADS - 1), num_heads - 1]
    )
    into_head = (
        (f"q {shape_text((q_len, d_head))}", f"k, v {shape_text((k_len, d_head))}")
        if cross
        else (f"q, k, v {shape_text((q_len, d_head))}",)
    )
    heads = []
    for position, h in enumerate(drawn):
        if position == len(drawn) - 1 and len(drawn) < num_heads:
            heads.append("more")
            boxes["more"] = Box((f"… {num_heads - len(drawn)} more heads",), dotted=True)
            arrows += [
                Arrow("split", "more", dotted=True),
                Arrow("more", "concat", label_at="source", dotted=True),
            ]
        name = f"h{h}"
        heads.append(name)
        color = head_color(h)
        boxes[name] = Box(
            (f"head {h + 1}", f"softmax(q kᵀ/√{d_head}) v", *(("causal mask",) if causal else ())),
            color=color,
        )
        arrows += [
            Arrow("split", name, into_head, color=color),
            Arrow(name, "concat", (shape_text((q_len, d_head)),), color=color, label_at="source"),
        ]
    boxes |= {
        "concat": Box(("concat", shape_text((num_heads, q_len, d_head)), f"→ {q_shape}")),
        "out": Box(("output =", "concat W_Oᵀ + b_O")),
    }
    arrows.append(Arrow("concat", "out", (q_shape,)))
    inputs = ["xq", "xkv"] if cross else ["xq"]
    columns = [inputs, ["Q", "K", "V"], ["split"], heads, ["concat"], ["out"]]
    return boxes, arrows, columns


def _placed(boxes: dict[str, Box], arrows: list[Arrow], columns: list[list[str]]):
    """Every box given its centre; the picture's width and height."""
    head_column = columns[3]
    pitch = max(boxes[name].height for name in head_column) + ROW_GAP
    qkv_pitch = max(boxes[name].height for name in columns[1]) + 3 * ROW_GAP
    rows_height = max(len(head_column) * pitch, 3 * qkv_pitch)
    top = MARGIN + 2 * LINE_HEIGHT  # room for the labels of the arrows into the top row
    middle = top + rows_height / 2
    y = {name: middle for name in boxes}
    for row, name in enumerate(head_column):
        y[name] = middle + (row - (len(head_column) - 1) / 2) * pitch
    for row, name in enumerate(columns[1]):
        y[name] = middle + (row - 1) * qkv_pitch
    if len(columns[0]) == 2:  # cross-attention: X beside Q, X_kv between K and V
        y["xq"], y["xkv"] = y["Q"], (y["K"] + y["V"]) / 2
    x, left = {}, MARGIN
    for index, column in enumerate(columns):
        width = max(boxes[name].width for name in column)
        for name in column:
            x[name] = left + width / 2
        gap = _gap(arrows, columns[index + 1]) if index + 1 < len(columns) else 0
        left += width + gap
    placed = {name: replace(box, x=x[name], y=y[name]) for name, box in boxes.items()}
    return placed, left + MARGIN, top + rows_height + MARGIN


def _gap(arrows: list[Arrow], next_column: list[str]) -> float:
    """Room between two columns for the longest label of the arrows into the second, with the
    turn and the arrowhead beside it."""
    widths = [
        max(len(line) for line in arrow.label) * LABEL_FONT * CHAR_WIDTH
        for arrow in arrows
        if arrow.target in next_column and arrow.label
    ]
    return max(widths, default=0) + 2 * EDGE_ROOM + BEND + HEAD


def _svg(boxes, arrows, columns, description: str) -> str:
    """The picture, in a region that scrolls sideways where the screen is narrower than the
    picture at MIN_SCALE (a phone): the text stays at least MIN_SCALE × LABEL_FONT px high
    instead of shrinking with the screen. The region is a tab stop, so that a keyboard can
    scroll it too (axe: scrollable-region-focusable)."""
    placed, width, height = _placed(boxes, arrows, columns)
    parts = [
        '<div role="region" tabindex="0" class="flow-diagram" '
        'aria-label="Flow diagram (scrolls sideways on a narrow screen)" '
        'style="overflow-x: auto; overflow-y: hidden">',
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="100%" style="max-width: {width:.0f}px; min-width: {width * MIN_SCALE:.0f}px; '
        f'display: block" role="img" aria-label="{escape(description)}" fill="currentColor">',
    ]
    parts += [_arrow(arrow, placed[arrow.source], placed[arrow.target]) for arrow in arrows]
    parts += [_box(box) for box in placed.values()]
    parts.append("</svg></div>")
    return "\n".join(parts)


def _box(box: Box) -> str:
    first = box.y - (len(box.lines) - 1) * LINE_HEIGHT / 2
    text = "".join(
        f'<tspan x="{box.x:.1f}" y="{first + i * LINE_HEIGHT:.1f}">{escape(line)}</tspan>'
        for i, line in enumerate(box.lines)
    )
    label = (
        f'<text font-size="{BOX_FONT}" text-anchor="middle" dominant-baseline="central">'
        f"{text}</text>"
    )
    if box.dotted:
        return label
    # A head's box: a wash of its colour behind the text, its colour around it; the shared steps:
    # a wash of the text's own colour, grey on a light background and on a dark one.
    color = box.color or "currentColor"
    return (
        f'<rect x="{box.x - box.width / 2:.1f}" y="{box.y - box.height / 2:.1f}" '
        f'width="{box.width:.1f}" height="{box.height:.1f}" rx="6" fill="{color}" '
        f'fill-opacity="{HEAD_WASH if box.color else STEP_WASH}" stroke="{color}" '
        f'stroke-width="{2 if box.color else 1}" stroke-opacity="{1 if box.color else 0.5}"/>'
        + label
    )


def _arrow(arrow: Arrow, source: Box, target: Box) -> str:
    x0, y0 = source.x + source.width / 2, source.y
    x1, y1 = target.x - target.width / 2, target.y
    bend = x0 + BEND if arrow.label_at == "target" else x1 - BEND
    dash = ' stroke-dasharray="3 4"' if arrow.dotted else ""
    # The piece this arrow alone takes is drawn in its head's colour; the piece it shares with
    # its siblings (one box feeding many, or many feeding one) stays neutral.
    own, shared = (
        (
            f"M {bend:.1f} {y1:.1f} H {x1 - HEAD + 2:.1f}",
            f"M {x0:.1f} {y0:.1f} H {bend:.1f} V {y1:.1f}",
        )
        if arrow.label_at == "target"
        else (
            f"M {x0:.1f} {y0:.1f} H {bend:.1f}",
            f"M {bend:.1f} {y0:.1f} V {y1:.1f} H {x1 - HEAD + 2:.1f}",
        )
    )
    color = arrow.color or "currentColor"
    stroke = f'fill="none" stroke-width="1.5"{dash}'
    tip = f"M {x1 - HEAD:.1f} {y1 - 4:.1f} L {x1:.1f} {y1:.1f} L {x1 - HEAD:.1f} {y1 + 4:.1f} Z"
    parts = [
        f'<path d="{shared}" {stroke} stroke="currentColor" '
        f'stroke-opacity="{0.6 if arrow.color else 1}"/>',
        f'<path d="{own}" {stroke} stroke="{color}"/>',
        f'<path d="{tip}" fill="{color if arrow.label_at == "target" else "currentColor"}"/>',
    ]
    if arrow.label:
        x, y = ((x0 + bend) / 2, y0) if arrow.label_at == "source" else ((bend + x1 - HEAD) / 2, y1)
        last = y - 5
        parts += [
            f'<text x="{x:.1f}" y="{last - (len(arrow.label) - 1 - i) * LABEL_LINE:.1f}" '
            f'font-size="{LABEL_FONT}" text-anchor="middle">{escape(line)}</text>'
            for i, line in enumerate(arrow.label)
        ]
    return "\n".join(parts)


def _description(q_len, k_len, d_model, num_heads, cross) -> str:
    """The picture in words, for a screen reader: every step and the shape it passes on."""
    d_head = d_model // num_heads
    q_shape, k_shape = shape_text((q_len, d_model)), shape_text((k_len, d_model))
    kv_from = f"X_kv {k_shape} (cross-attention)" if cross else "X"
    return (
        f"Flow of multi-head attention. X {q_shape} is projected to Q {q_shape}; {kv_from} to "
        f"K and V {k_shape}. split_heads cuts each into {num_heads} heads of d_head {d_head}: "
        f"each head gets q {shape_text((q_len, d_head))} and k, v "
        f"{shape_text((k_len, d_head))}, computes softmax(q kᵀ/√{d_head}) v and gives "
        f"{shape_text((q_len, d_head))}. concat puts the heads side by side, "
        f"{shape_text((num_heads, q_len, d_head))} → {q_shape}, and the output is "
        f"concat W_Oᵀ + b_O, {q_shape}."
    )
