"""The look every page shares: colour scales, the Plotly template, font sizes, highlight colours.

Colour scales a colour-blind reader can read too (tests/test_chart_access.py simulates
deuteranopia, protanopia and tritanopia and measures neighbouring steps in CIELAB). What a
heatmap's scale, range and colour bar are for each kind of value is decided in one place,
`heatmaps.color_scale`, from these palettes.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

from ui.widgets.state import is_presenting

# By default Plotly measures every tick label against the page, a forced layout of the whole
# page each, to hide any label that spills past the chart. Labels here sit in margins made for
# them, so the check is skipped, for every figure: the template is added to Streamlit's, which
# is Plotly's default by now. Merged here, once: a default named "a+b" is merged again for every
# figure made, the largest cost of a busy server in bench/bench_live_audience.py; one name is
# merely looked up.
pio.templates["attention_explorer"] = pio.templates.merge_templates(
    pio.templates["streamlit"],
    go.layout.Template(
        layout={"xaxis": {"ticklabeloverflow": "allow"}, "yaxis": {"ticklabeloverflow": "allow"}}
    ),
)
pio.templates.default = "attention_explorer"

# Weights: cividis, dark blue to yellow, uniform in lightness and built for deuteranopia: the
# blue-yellow axis is the one all common colour-vision deficiencies keep.
WEIGHT_COLORS = [
    [0.0, "#00224e"],
    [0.1111, "#123570"],
    [0.2222, "#3b496c"],
    [0.3333, "#575d6d"],
    [0.4444, "#707173"],
    [0.5556, "#8a8678"],
    [0.6667, "#a59c74"],
    [0.7778, "#c3b369"],
    [0.8889, "#e1cc55"],
    [1.0, "#fee838"],
]
# Signed values: orange below zero, blue above, near-white at zero (not red/green).
DIVERGING_COLORS = [
    [0.0, "#b35806"],
    [0.125, "#e08214"],
    [0.25, "#fdb863"],
    [0.375, "#fee0b6"],
    [0.5, "#f7f7f7"],
    [0.625, "#d1e5f0"],
    [0.75, "#92c5de"],
    [0.875, "#4393c3"],
    [1.0, "#2166ac"],
]
MASK_COLORS = [[0.0, "#d9d9d9"], [1.0, "#1b7837"]]
# A neutral grey lighter than cividis's greys and darker than the diverging scale's zero.
BLOCKED_COLOR = "#bdbdbd"
# "Check my work" cells: right green, wrong red, apart for colour-blind readers too (and ✓/✗).
RIGHT_ANSWER_STYLE = "background-color: #c7e9c0; color: #00441b"
WRONG_ANSWER_STYLE = "background-color: #fcbba1; color: #67000d"
# Table rows that moved: a light orange fill, and bold so the highlight does not rest on colour.
CHANGED_ROW_STYLE = "background-color: #fdd0a2; font-weight: bold"
# Okabe & Ito's palette, made to stay apart for protanopia, deuteranopia and tritanopia
# (tests/test_chart_access.py checks every pair; Tableau 10's red and green, used before, merge
# for deuteranopes). Its black is grey here, to show on the dark theme too.
HEAD_COLORS = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#999999",
)

# The query, head or token the reader chose, framed or drawn over the rest (Tableau 10's red),
# and the plain bars beside it in a bar chart (Tableau 10's blue).
CHOSEN_COLOR = "#e15759"
BAR_COLOR = "#4e79a7"
# Lines that are not the chosen one's: a mid grey, visible on white without competing with it.
OTHER_LINES_COLOR = "#7f7f7f"
# Queries and keys as two clouds of points in one plane (ColorBrewer Dark2's teal and orange).
QUERY_POINT_COLOR, KEY_POINT_COLOR = "#1b9e77", "#d95f02"
# The head-pattern labels of the pretrained page's roles grid: light fills, so the label and
# score written on each (in PATTERN_TEXT_COLOR) stay readable; neighbours orange, specials purple.
PATTERN_COLORS = {
    "previous": "#fdd0a2",
    "next": "#fdae6b",
    "self": "#c7e9c0",
    "cls": "#bcbddc",
    "sep": "#9e9ac8",
    "broad": "#deebf7",
    "mixed": "#f0f0f0",
}
PATTERN_TEXT_COLOR = "#111"


def font_size() -> int:
    return 20 if is_presenting() else 13
