"""Margins reserved before the browser measures: each chart drawn once instead of twice.

Plotly's automargin draws a chart, measures its tick labels, colour bar and legend, finds they
spill past the margins, and draws the whole chart again with wider ones. Every chart here used
to be drawn twice that way (margins of 10 px against labels 60-170 px wide), and a page of a
dozen charts paid for a dozen extra drawings before its first picture settled.

`reserved` estimates from the figure itself (label lengths, font sizes, colour bars, legends)
what the browser will measure, and only ever widens the margins the figure asks for. A guess
that is too wide costs a few pixels of plot; one that is too narrow costs the second drawing
as before, because automargin stays on: nothing is ever clipped. Nothing here imports Streamlit.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

# Widths as a fraction of the font size: Source Sans' digits are 0.5 em and few glyphs are
# wider than 0.6 em (measured on the app's labels in Chromium), heights a line with leading.
CHAR_WIDTH = 0.6
LINE_HEIGHT = 1.35
DEFAULT_FONT = 12
# What Streamlit's chart theme adds around an axis's labels, measured in Chromium at 13 px type
# (larger type, as in presenter mode, spaces them out in proportion): ticks 5 px long, then the
# labels, then (with a title) a standoff and the title in 14 px type.
MEASURED_FONT = 13
AXIS_DEPTH = 28
TITLE_FONT = 14
TITLE_GAP = 16
# How far past half its width a level label at the plot's right end reaches.
LABEL_OVERHANG = 10
# A plot keeps at least this many lines of its type between its margins.
MIN_PLOT_LINES = 10
# Longer chart titles are broken into lines this long: about what a phone's chart holds.
TITLE_CHARS = 40
# Plotly's own margins and height, for what a figure does not set.
PLOTLY_MARGINS = {"l": 80, "r": 80, "t": 100, "b": 80}
PLOTLY_HEIGHT = 450
# Colour bars: Plotly's default width and padding, and the padding Streamlit gives a shared
# colour axis; the bar stands 2 % of the plot's width right of it.
COLORBAR_THICKNESS = 30
COLORBAR_PAD = 10
COLORAXIS_PAD = 24
COLORBAR_DEPTH = 16
OUTSIDE_GAP = 0.02
# The plot's width is the browser's to decide (a full-width chart's plot is ~650 px at 1280 px
# wide, one of two columns ~270); gaps given as a fraction of it are taken at the wide end.
ASSUMED_PLOT_WIDTH = 700
# A legend below the plot wraps as on a phone's chart, the narrowest it is drawn (wider in
# proportion to larger type: presenter mode's is for a projector).
NARROW_LEGEND_WIDTH = 320
LEGEND_SYMBOL = 40
# Plotly spaces automatic ticks at least this far apart (px) along an axis or colour bar.
TICK_SPACING = 40

# Only the tags Plotly draws as formatting: a token such as "<pad>" is shown as it is.
_TAGS = re.compile(r"</?(?:b|i|em|sup|sub|span|a|s|u)(?:\s[^>]*)?>", re.IGNORECASE)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_AXIS = re.compile(r"([xy])axis(\d*)")
_SIDES = ("l", "r", "t", "b")
_SCALED = ("heatmap", "contour", "histogram2d")
_CARTESIAN = (*_SCALED, "scatter", "scattergl", "bar", "histogram", "box", "violin")


def reserved(data: Sequence[Mapping], layout: Mapping) -> dict[str, int] | None:
    """The margins `layout` should have so that the browser keeps them, or None if it has them.

    data: the figure's traces as dicts; layout: its layout as a dict (NumPy arrays or lists).
    """
    margin = layout.get("margin") or {}
    given = {side: margin.get(side, PLOTLY_MARGINS[side]) for side in _SIDES}
    font = _font_size(layout.get("font"), DEFAULT_FONT)
    needed = dict.fromkeys(_SIDES, 0.0)
    # Every axis the layout describes, and those the traces draw on without describing them.
    names = {name for name in layout if _AXIS.fullmatch(name)}
    if any(trace.get("type") in _CARTESIAN for trace in data):
        names |= {
            f"{letter}axis{(trace.get(f'{letter}axis') or letter)[1:]}"
            for trace in data
            for letter in "xy"
        }
    for name in sorted(names):
        axis = layout.get(name) or {}
        if isinstance(axis, Mapping):
            match = _AXIS.fullmatch(name)
            for side, width in _axis_needs(match[1], match[2], axis, data, layout, font):
                needed[side] = max(needed[side], width)
    # The chart's title sits above whatever lies in the top margin (a key axis, a legend).
    needed["t"] += _title_depth(layout.get("title"), font)
    for side, width in _colorbar_needs(data, layout, font):
        needed[side] = max(needed[side], width)
    for side, width in _legend_needs(data, layout, font, under=needed["b"]):
        needed[side] = max(needed[side], width)
    wider = {side: max(int(given[side]), math.ceil(needed[side])) for side in _SIDES}
    if wider == {side: int(given[side]) for side in _SIDES}:
        return None
    return {**margin, **wider}


def _axis_needs(
    letter: str, number: str, axis: Mapping, data: Sequence[Mapping], layout: Mapping, font: float
) -> Iterable[tuple[str, float]]:
    """The margins an axis's labels and title reach into, and how deep (px)."""
    if axis.get("visible") is False:
        return
    side = axis.get("side") or ("bottom" if letter == "x" else "left")
    if not _on_paper_edge(letter, axis, layout, side):
        return
    tick_font = _font_size(axis.get("tickfont"), font)
    spacing = max(1.0, tick_font / MEASURED_FONT)
    length = _plot_height(layout) if letter == "y" else ASSUMED_PLOT_WIDTH
    labels = (
        _tick_labels(letter, number, axis, data, length) if axis.get("showticklabels", True) else []
    )
    widest = max((_text_width(label, tick_font) for label in labels), default=0.0)
    angle = math.radians(abs(float(axis.get("tickangle") or 0)))
    tall = tick_font * LINE_HEIGHT
    depth = 0.0
    if labels and letter == "y":
        # Labels lie beside a y axis: their width counts; rotated ones lean over.
        depth = widest * math.cos(angle) + tall * math.sin(angle)
        # The lowest label is centred on its tick, which may sit at the plot's bottom edge.
        if (axis.get("domain") or (0, 1))[0] <= 0.01:
            yield "b", tall / 2 + 3 * spacing
    elif labels:
        depth = widest * math.sin(angle) + tall * math.cos(angle)
        # Automatic ticks may fall on the plot's right end, and a level label is centred on
        # its tick: the last one then hangs half out. (Labels of cells sit inside the plot.)
        automatic = all(axis.get(key) is None for key in ("tickvals", "ticktext", "labelalias"))
        at_right = angle == 0 and (axis.get("domain") or (0, 1))[1] >= 0.99
        if automatic and at_right:
            yield "r", _text_width(labels[-1], tick_font) / 2 + LABEL_OVERHANG * spacing
        elif axis.get("labelalias") and at_right:
            # A flat label wider than its cell (a narrow panel's) hangs past the plot's end; a
            # short one (a token id, two digits) by more than its half-width's estimate says.
            yield "r", _text_width(labels[-1], tick_font) / 2 + LABEL_OVERHANG * spacing
    title = axis.get("title")
    if _title_text(title):
        title_font = _font_size(
            title.get("font") if isinstance(title, Mapping) else None, max(font, TITLE_FONT)
        )
        lines = _title_text(title).count("\n") + 1
        depth += lines * title_font * LINE_HEIGHT + TITLE_GAP * spacing
    yield {"left": "l", "right": "r", "top": "t", "bottom": "b"}[side], depth + AXIS_DEPTH * spacing


def _on_paper_edge(letter: str, axis: Mapping, layout: Mapping, side: str) -> bool:
    """Whether the axis's labels face out of the figure (an inner panel's fall inside it)."""
    other = "y" if letter == "x" else "x"
    anchor = axis.get("anchor") or other
    if anchor == "free":
        position = float(axis.get("position") or 0.0)
    else:
        anchored = layout.get(f"{other}axis{anchor[1:]}") or {}
        low, high = anchored.get("domain") or (0.0, 1.0)
        position = high if side in ("top", "right") else low
    return position >= 0.99 if side in ("top", "right") else position <= 0.01


def _tick_labels(
    letter: str, number: str, axis: Mapping, data: Sequence[Mapping], length: float
) -> list[str]:
    """The tick labels an axis will show: its own text, categories, or numbers Plotly picks."""
    affix = str(axis.get("tickprefix") or "") + str(axis.get("ticksuffix") or "")
    if axis.get("ticktext") is not None:
        return [_plain(label) + affix for label in axis["ticktext"]]
    if axis.get("labelalias"):  # positions as categories, each shown as its label
        return [_plain(label) + affix for label in axis["labelalias"].values()]
    if axis.get("tickvals") is not None:
        coordinates = [_coordinates(axis["tickvals"])]
    else:
        ref = letter + number
        coordinates = [
            _coordinates(trace.get(letter), trace, letter)
            for trace in data
            if (trace.get(f"{letter}axis") or letter) == ref
        ]
    words = [word for values in coordinates if values.dtype.kind in "OUS" for word in values]
    if any(isinstance(word, str) for word in words):
        return [_plain(word) + affix for word in words if isinstance(word, str)]
    numbers = [values for values in coordinates if values.dtype.kind in "iuf" and values.size]
    if not numbers:
        return []
    # Lowest and highest of each trace's coordinates, not every one: a trace may have 10⁵.
    ends = np.array([(values.min(), values.max()) for values in numbers], dtype=np.float64)
    low, high = ends[:, 0].min(), ends[:, 1].max()
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if axis.get("type") == "log":
        return [label + affix for label in _log_labels(ends, axis.get("exponentformat"))]
    percent = "%" if "%" in str(axis.get("tickformat") or "") else ""
    scale = 100 if percent else 1
    ticks = _number_labels(low * scale, high * scale, length)
    return [label + percent + affix for label in ticks]


_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _log_labels(ends: np.ndarray, exponent_format: str | None) -> list[str]:
    """The labels of a log axis over the traces' (low, high) ends: a power of ten per decade,
    written as Plotly writes it (10⁻⁴ in the "power" format, 0.0001 otherwise)."""
    positive = ends[ends > 0]
    if not positive.size:
        return []
    powers = range(
        math.floor(math.log10(positive.min())), math.ceil(math.log10(positive.max())) + 1
    )
    if exponent_format == "power":
        return ["10" + str(power).translate(_SUPERSCRIPTS) for power in powers]
    return [f"{10.0**power:g}" for power in powers]


def _coordinates(values: Any, trace: Mapping | None = None, letter: str = "") -> np.ndarray:
    """A trace's coordinates along one axis as an array: numbers (NaN for gaps) or objects."""
    if values is None:
        z = np.asarray(trace.get("z")) if trace and trace.get("type") in _SCALED else None
        if z is None or z.ndim != 2:
            return np.empty(0)
        # A heatmap without coordinates is indexed 0..n-1 along each side.
        return np.arange(z.shape[1] if letter == "x" else z.shape[0])
    if isinstance(values, str) or not isinstance(values, (Sequence, np.ndarray)):
        return np.empty(0)
    array = np.asarray(values)
    if array.dtype.kind == "O":
        try:
            array = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            return array.ravel()
    if array.dtype.kind == "f":
        array = array[np.isfinite(array)]
    return array.ravel()


def _number_labels(low: float, high: float, length: float) -> list[str]:
    """The widest labels Plotly writes for round ticks over [low, high] on `length` px: steps
    of 1, 2 or 5 × 10ᵏ at least `TICK_SPACING` apart, SI prefixes from 10⁴ (10k), powers of
    ten below 10⁻³."""
    span = high - low or abs(high) or 1.0
    rough = span / max(2.0, length / TICK_SPACING)
    power = 10.0 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough * (1 - 1e-9))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if max(abs(low), abs(high)) >= 1e4:
        labels = [f"{value / 1000:.{max(0, decimals - 3)}f}k" for value in (low, high)]
    elif decimals > 3:
        # Past three decimals Plotly writes a power of ten (2×10⁻¹⁶), not 0.0000000000000002.
        exponent = str(-decimals).translate(_SUPERSCRIPTS)
        labels = [f"{'-' if value < 0 else ''}5×10{exponent}" for value in (low, high)]
    else:
        labels = [f"{value:.{decimals}f}" for value in (low, high)]
    return [label.replace("-", "−") for label in labels]


def _colorbar_needs(
    data: Sequence[Mapping], layout: Mapping, font: float
) -> Iterable[tuple[str, float]]:
    """Each colour bar's depth into the right (or, lying flat, the bottom) margin."""
    bars: list[tuple[Mapping, float, float, float]] = []
    for trace in data:
        if trace.get("coloraxis"):
            continue
        marker = trace.get("marker") or {}
        if trace.get("type") in _SCALED and trace.get("showscale", True) is not False:
            low, high = _range(trace.get("zmin"), trace.get("zmax"), trace.get("z"))
            bars.append((trace.get("colorbar") or {}, low, high, COLORBAR_PAD))
        elif isinstance(marker, Mapping) and marker.get("showscale"):
            low, high = _range(marker.get("cmin"), marker.get("cmax"), marker.get("color"))
            bars.append((marker.get("colorbar") or {}, low, high, COLORBAR_PAD))
    for name, axis in layout.items():
        if name.startswith("coloraxis") and isinstance(axis, Mapping):
            if axis.get("showscale", True) is not False:
                low, high = _range(axis.get("cmin"), axis.get("cmax"), None)
                bars.append((axis.get("colorbar") or {}, low, high, COLORAXIS_PAD))
    for bar, low, high, default_pad in bars:
        tick_font = _font_size(bar.get("tickfont"), font)
        length = float(bar.get("len", 1.0)) * _plot_height(layout)
        if bar.get("ticktext") is not None:
            labels = [_plain(label) for label in bar["ticktext"]]
        elif math.isfinite(low) and math.isfinite(high):
            labels = _number_labels(low, high, length)
        else:
            labels = ["−0.00"]
        widest = max(_text_width(label, tick_font) for label in labels)
        thickness = float(bar.get("thickness", COLORBAR_THICKNESS))
        pad = float(bar.get("xpad", default_pad))
        title = _title_text(bar.get("title"))
        if bar.get("orientation") == "h":
            yield "b", thickness + 2 * pad + tick_font * LINE_HEIGHT * (2 if title else 1)
            continue
        title_width = _text_width(title, tick_font) if title else 0.0
        outside = max(0.0, float(bar.get("x", 1 + OUTSIDE_GAP)) - 1) * ASSUMED_PLOT_WIDTH
        spacing = max(1.0, tick_font / MEASURED_FONT)
        depth = thickness + 2 * pad + max(widest, title_width) + COLORBAR_DEPTH * spacing
        yield "r", outside + depth


def _legend_needs(
    data: Sequence[Mapping], layout: Mapping, font: float, *, under: float = 0.0
) -> Iterable[tuple[str, float]]:
    """The legend's depth into the margin it sits in, when it sits outside the plot; a legend
    below the plot starts `under` px below it (under the x axis's labels and title)."""
    names = [
        _plain(trace["name"])
        for trace in data
        if trace.get("name") and trace.get("showlegend", True) is not False
    ]
    shown = layout.get("showlegend")
    if not names or shown is False or (shown is None and len(names) < 2):
        return
    legend = layout.get("legend") or {}
    legend_font = _font_size(legend.get("font"), font)
    items = [_text_width(name, legend_font) + LEGEND_SYMBOL for name in names]
    row = legend_font * LINE_HEIGHT + 12
    if legend.get("orientation") == "h":
        if float(legend.get("y", -0.1)) < 0:
            # Its rows as a phone wraps them: a laptop's fewer rows leave a little room below.
            rows = _legend_rows(items, NARROW_LEGEND_WIDTH * max(1.0, legend_font / MEASURED_FONT))
            yield "b", under + rows * row + 12
        return
    x = float(legend.get("x", 1.02))
    if x >= 1:
        yield "r", (x - 1) * ASSUMED_PLOT_WIDTH + max(items) + 12


def _legend_rows(items: Sequence[float], width: float) -> int:
    """How many rows a horizontal legend of items so wide (px) takes in `width` px."""
    rows, left = 1, 0.0
    for item in items:
        if left and left + item > width:
            rows, left = rows + 1, 0.0
        left += item
    return rows


def legend_below(data: Sequence[Mapping], layout: Mapping) -> dict | None:
    """A horizontal legend below the plot moved to start under the x axis's labels and title
    (a fraction of the plot's height below it: at a fixed fraction, presenter mode's larger
    labels reached into it), or None if the figure has no such legend.

    layout: with its margins reserved (`reserved`), which fix the plot's height.
    """
    legend = layout.get("legend") or {}
    if legend.get("orientation") != "h" or float(legend.get("y", 0)) >= 0:
        return None
    font = _font_size(layout.get("font"), DEFAULT_FONT)
    under = 0.0
    for name in layout:
        match = _AXIS.fullmatch(name)
        if match and match[1] == "x" and isinstance(layout[name], Mapping):
            for side, depth in _axis_needs("x", match[2], layout[name], data, layout, font):
                under = max(under, depth if side == "b" else 0.0)
    return {**legend, "y": -under / _plot_height(layout), "yanchor": "top"}


def taller(layout: Mapping) -> int | None:
    """The figure's height grown so that, within its margins, its plot keeps at least
    MIN_PLOT_LINES lines of its type; None if it has that. (A short chart's margins, grown for
    presenter mode's larger labels, left a plot too short for its own axis title.)"""
    margin = {**PLOTLY_MARGINS, **(layout.get("margin") or {})}
    height = float(layout.get("height") or PLOTLY_HEIGHT)
    least = MIN_PLOT_LINES * _font_size(layout.get("font"), DEFAULT_FONT) * LINE_HEIGHT
    plot = height - float(margin["t"]) - float(margin["b"])
    return math.ceil(height + least - plot) if plot < least else None


def fitted_titles(layout: Mapping) -> dict[str, str]:
    """New texts for titles too long for where they are drawn, by layout path ("title",
    "yaxis2.title"): the chart's title in lines of at most TITLE_CHARS (a phone's chart is
    about that many characters of title type wide, and Plotly cuts a title off rather than wrap
    it), an x axis's title likewise, and a y axis's title longer than the plot is high in lines
    that fit it (it ran into the chart's title). Titles with markup are left as they are."""
    fitted = {}
    title = _title_text(layout.get("title"))
    if len(title) > TITLE_CHARS and "<" not in str(layout["title"]):
        fitted["title"] = "<br>".join(textwrap.wrap(title, TITLE_CHARS, break_on_hyphens=False))
    font = _font_size(layout.get("font"), DEFAULT_FONT)
    for name, axis in layout.items():
        match = _AXIS.fullmatch(name)
        if not (match and isinstance(axis, Mapping)):
            continue
        text = _title_text(axis.get("title"))
        size = _font_size((axis.get("title") or {}).get("font"), max(font, TITLE_FONT))
        long = _plot_height(layout) if match[1] == "y" else TITLE_CHARS * CHAR_WIDTH * font
        fits = int(long / (CHAR_WIDTH * size))
        if len(text) > fits and "<" not in text and "\n" not in text:
            fitted[f"{name}.title"] = "<br>".join(textwrap.wrap(text, fits, break_on_hyphens=False))
    return fitted


def _title_depth(title: Any, font: float) -> float:
    """How deep the chart's title reaches into the top margin, its gap below included."""
    text = _title_text(title)
    if not text:
        return 0.0
    size = _font_size(title.get("font") if isinstance(title, Mapping) else None, font * 1.2)
    # Below it, the gap, and the upper half of the plot's top label, which sits on the edge.
    return (text.count("\n") + 1) * size * LINE_HEIGHT + TITLE_GAP + font * LINE_HEIGHT / 2


def _plot_height(layout: Mapping) -> float:
    margin = {**PLOTLY_MARGINS, **(layout.get("margin") or {})}
    height = float(layout.get("height") or PLOTLY_HEIGHT)
    return max(100.0, height - float(margin["t"]) - float(margin["b"]))


def _range(low: Any, high: Any, values: Any) -> tuple[float, float]:
    if low is not None and high is not None:
        return float(low), float(high)
    try:
        finite = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return math.nan, math.nan
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return math.nan, math.nan
    return float(finite.min() if low is None else low), float(
        finite.max() if high is None else high
    )


def _font_size(font: Any, fallback: float) -> float:
    if isinstance(font, Mapping) and font.get("size"):
        return float(font["size"])
    return fallback


def _title_text(title: Any) -> str:
    if isinstance(title, Mapping):
        title = title.get("text")
    return _plain(str(title)) if title else ""


def _plain(text: Any) -> str:
    """The text a label shows: tags removed, `<br>` kept as a line break."""
    return _TAGS.sub("", _BREAK.sub("\n", str(text)))


def _text_width(text: str, size: float) -> float:
    return max(len(line) for line in text.split("\n")) * CHAR_WIDTH * size
