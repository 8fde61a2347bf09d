"""Charts for every reader: colour scales a colour-blind reader can tell apart, readable numbers
in the cells, a text alternative for every chart and its data as a table.

The colour science is written out here, independently of ui.charts: the sRGB transfer curve
and CIELAB (CIE 15, D65), WCAG 2.1 relative luminance and contrast, and the colour-vision
deficiency simulation of Machado, Oliveira & Fernandes (2009) at severity 1.0, applied in
linear RGB.
"""

import itertools
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import registered_pages
from ui.multi_head import flow
from ui.scaled_dot_product.check_work import _mark_colour
from ui.widgets import describe, heatmaps, lines, render, theme
from ui.widgets.theme import HEAD_COLORS

ROOT = Path(__file__).resolve().parents[1]

# Machado et al. 2009, Table 1 (severity 1.0): linear RGB -> simulated linear RGB.
MACHADO = {
    "protanopia": [
        [0.152286, 1.052583, -0.204868],
        [0.114503, 0.786281, 0.099216],
        [-0.003882, -0.048116, 1.051998],
    ],
    "deuteranopia": [
        [0.367322, 0.860646, -0.227968],
        [0.280085, 0.672501, 0.047413],
        [-0.011820, 0.042940, 0.968881],
    ],
    "tritanopia": [
        [1.255528, -0.076749, -0.178779],
        [-0.078411, 0.930809, 0.147602],
        [0.004733, 0.691367, 0.303900],
    ],
    "normal vision": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
}
SRGB_TO_XYZ = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ]
)
D65 = np.array([0.95047, 1.0, 1.08883])
# A just-noticeable difference in CIE76 is about 2.3; 3 keeps a margin.
MIN_DELTA_E = 3.0


def rgb(color: str) -> np.ndarray:
    return np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)]) / 255.0


def to_linear(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def to_srgb(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * np.power(c, 1 / 2.4) - 0.055)


def simulate(color: np.ndarray, vision: str) -> np.ndarray:
    return to_srgb(np.clip(np.array(MACHADO[vision]) @ to_linear(color), 0.0, 1.0))


def lab(color: np.ndarray) -> np.ndarray:
    xyz = SRGB_TO_XYZ @ to_linear(color) / D65
    delta = 6 / 29
    f = np.where(xyz > delta**3, np.cbrt(xyz), xyz / (3 * delta**2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: np.ndarray, b: np.ndarray) -> float:
    """CIE76: Euclidean distance in CIELAB."""
    return float(np.linalg.norm(lab(a) - lab(b)))


def scale_color(scale: list, t: float) -> np.ndarray:
    """What Plotly paints at `t` in 0..1: linear interpolation between stops in sRGB."""
    for (lo, low), (hi, high) in itertools.pairwise(scale):
        if lo <= t <= hi:
            return rgb(low) + (rgb(high) - rgb(low)) * (t - lo) / (hi - lo)
    raise AssertionError(f"{t} outside the scale")


def contrast(a: np.ndarray, b: np.ndarray) -> float:
    def luminance(c):
        return float(to_linear(c) @ [0.2126, 0.7152, 0.0722])

    high, low = sorted([luminance(a), luminance(b)], reverse=True)
    return (high + 0.05) / (low + 0.05)


SCALES = {
    "weights": theme.WEIGHT_COLORS,
    "diverging": theme.DIVERGING_COLORS,
    "mask": theme.MASK_COLORS,
}


def test_the_colour_science_matches_published_values():
    # Reference Lab values (D65) for sRGB primaries, from Bruce Lindbloom's calculator.
    np.testing.assert_allclose(lab(rgb("#ff0000")), [53.24, 80.09, 67.20], atol=0.05)
    np.testing.assert_allclose(lab(rgb("#0000ff")), [32.30, 79.19, -107.86], atol=0.05)
    np.testing.assert_allclose(lab(rgb("#ffffff")), [100, 0, 0], atol=0.01)
    # Machado's rows sum to 1: a grey stays grey for every simulated reader.
    for vision in MACHADO:
        np.testing.assert_allclose(simulate(rgb("#808080"), vision), rgb("#808080"), atol=1e-3)
    # A protanope or deuteranope cannot tell this red from this green (the classic confusion).
    # Red and green, far apart for most readers, collapse towards each other (the classic
    # confusion), while blue and yellow stay apart: the axis these readers keep.
    red, green, blue, yellow = (rgb(c) for c in ("#d62728", "#2ca02c", "#1f77b4", "#ffdd44"))
    for vision in ("protanopia", "deuteranopia"):
        seen = delta_e(simulate(red, vision), simulate(green, vision))
        assert seen < 0.5 * delta_e(red, green)
        assert delta_e(simulate(blue, vision), simulate(yellow, vision)) > 0.8 * delta_e(
            blue, yellow
        )
    assert contrast(rgb("#000000"), rgb("#ffffff")) == pytest.approx(21.0)


@pytest.mark.parametrize("vision", list(MACHADO))
@pytest.mark.parametrize("name", ["weights", "diverging"])
def test_neighbouring_steps_of_each_scale_stay_apart(name, vision):
    for steps in (10, 11):  # 11 puts a step exactly on the diverging scale's zero
        colors = [simulate(scale_color(SCALES[name], t), vision) for t in np.linspace(0, 1, steps)]
        gaps = [delta_e(a, b) for a, b in itertools.pairwise(colors)]
        assert min(gaps) > MIN_DELTA_E, (name, vision, steps, np.round(gaps, 1))


@pytest.mark.parametrize("vision", list(MACHADO))
def test_every_two_head_colours_stay_apart(vision):
    # Heads are told apart by colour in the multi-head page's frames, flow diagram and labels.
    for a, b in itertools.combinations(HEAD_COLORS, 2):
        seen = delta_e(simulate(rgb(a), vision), simulate(rgb(b), vision))
        assert seen > 2 * MIN_DELTA_E, (vision, a, b, seen)


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_the_flow_diagrams_text_reads_on_every_box_in_both_themes(mode):
    # The diagram's text is the theme's text colour (currentColor); each box is a wash of a
    # head's colour, or of the text colour itself, over the page's background.
    colors = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"][mode]
    text, background = rgb(colors["textColor"]), rgb(colors["backgroundColor"])
    boxes = [(rgb(c), flow.HEAD_WASH) for c in HEAD_COLORS] + [(text, flow.STEP_WASH)]
    for color, alpha in boxes:
        box = alpha * color + (1 - alpha) * background  # browsers blend in sRGB
        assert contrast(text, box) >= 4.5, (mode, color, contrast(text, box))


@pytest.mark.parametrize("vision", list(MACHADO))
def test_right_and_wrong_answers_differ_beyond_their_hue(vision):
    right, wrong = (_mark_colour(mark).split(";")[0].split()[-1] for mark in ("✓", "✗"))
    assert delta_e(simulate(rgb(right), vision), simulate(rgb(wrong), vision)) > 2 * MIN_DELTA_E


@pytest.mark.parametrize("vision", list(MACHADO))
def test_masked_cells_stay_apart_from_every_scale_colour(vision):
    blocked = simulate(rgb(theme.BLOCKED_COLOR), vision)
    for name in ("weights", "diverging"):
        nearest = min(
            delta_e(blocked, simulate(scale_color(SCALES[name], t), vision))
            for t in np.linspace(0, 1, 101)
        )
        assert nearest > 2 * MIN_DELTA_E, (name, vision, nearest)
    low, high = (simulate(rgb(c), vision) for _, c in theme.MASK_COLORS)
    assert delta_e(low, high) > 10 * MIN_DELTA_E  # a mask is two colours: far apart


def test_weights_scale_is_uniform_in_lightness_and_fixed():
    lightness = [lab(scale_color(theme.WEIGHT_COLORS, t))[0] for t in np.linspace(0, 1, 11)]
    steps = np.diff(lightness)
    assert (steps > 0).all()  # more weight is always lighter, in every reader's eyes
    assert steps.max() / steps.min() < 1.5
    trace = heatmaps.heatmap(np.full((2, 2), 0.01), row_labels="ab", col_labels="cd").data[0]
    assert (trace.zmin, trace.zmax) == (0.0, 1.0)


def cell_numbers(fig) -> dict:
    [layer] = [t for t in fig.data if t.type == "scatter" and t.name == "values"]
    return layer


@pytest.mark.parametrize("kind", ["weights", "scores", "sequential"])
def test_numbers_in_cells_contrast_with_their_cell(kind):
    values = np.linspace(-1 if kind == "scores" else 0, 1, 121).reshape(11, 11)
    fig = heatmaps.heatmap(values, row_labels="abcdefghijk", col_labels="abcdefghijk", kind=kind)
    trace, layer = fig.data[0], cell_numbers(fig)
    scale = trace.colorscale
    colors = layer.textfont.color
    for index, value in enumerate(values.ravel()):
        t = (value - trace.zmin) / (trace.zmax - trace.zmin)
        cell = scale_color([[s, c] for s, c in scale], float(np.clip(t, 0, 1)))
        assert contrast(rgb(colors[index]), cell) >= 4.5, (value, colors[index])
        assert layer.text[index] == f"{value:.2f}".replace("-0.00", "0.00")
    assert list(layer.x[:3]) == [0, 1, 2] and list(layer.y[:12]) == [0] * 11 + [1]


def test_masked_cells_write_minus_infinity_legibly():
    fig = heatmaps.heatmap(
        np.array([[1.5, -np.inf], [0.25, 2.0]]), row_labels="ab", col_labels="cd", kind="scores"
    )
    layer = cell_numbers(fig)
    assert list(layer.text) == ["1.50", "−∞", "0.25", "2.00"]
    assert contrast(rgb(layer.textfont.color[1]), rgb(theme.BLOCKED_COLOR)) >= 4.5


def test_numbers_appear_up_to_12_by_12_and_not_beyond():
    small = heatmaps.heatmap(np.eye(12), row_labels=["t"] * 12, col_labels=["t"] * 12)
    assert len(cell_numbers(small).text) == 144
    big = heatmaps.heatmap(np.eye(13), row_labels=["t"] * 13, col_labels=["t"] * 13)
    assert not [t for t in big.data if t.type == "scatter"]


# The hand-worked example: softmax rows by hand.
HAND = np.array([[0.62, 0.20, 0.18], [0.71, 0.10, 0.19], [0.30, 0.30, 0.40]])


def test_summary_names_each_rows_strongest_key_and_the_strongest_weight():
    fig = heatmaps.heatmap(HAND, row_labels=["the", "cat", "sat"], col_labels=["the", "cat", "sat"])
    text = describe.summary(fig)
    assert text.startswith("Attention weights, 3 queries × 3 keys:")
    assert "“the” puts 0.62 on “the”" in text
    assert "“cat” puts 0.71 on “the”" in text
    assert "“sat” puts 0.40 on “sat”" in text
    assert "the strongest weight is 0.71 (query 2 “cat” → key 1 “the”)" in text


def test_summary_of_scores_names_the_range_and_the_masked_cells():
    scores = np.array([[1.5, -np.inf, -np.inf], [0.25, -2.0, -np.inf], [0.5, 3.0, 1.0]])
    fig = heatmaps.heatmap(scores, row_labels="abc", col_labels="xyz", kind="scores")
    text = describe.summary(fig)
    assert "from -2.00 (query 2 “b” → key 2 “y”)" in text
    assert "to 3.00 (query 3 “c” → key 2 “y”)" in text
    assert "3 of 9 cells are masked" in text


def test_grid_and_line_summaries_read_their_numbers():
    stack = np.stack([HAND, HAND.T])
    grid = heatmaps.heatmap_grid(
        stack, titles=["Head 1", "Head 2"], row_labels="abc", col_labels="xyz"
    )
    # Each panel is described as a heatmap of its own, under its title.
    assert [describe.summary(panel).split(":")[0] for panel in grid.figures] == [
        "Head 1, 3 queries × 3 keys",
        "Head 2, 3 queries × 3 keys",
    ]
    figure = lines.line_plot(
        np.array([1, 2, 4]), {"full": np.array([1.0, 4.0, 16.0])}, x_title="n", y_title="ms"
    )
    assert describe.summary(figure) == (
        "ms against n, 1 line over n 1 to 4: full goes from 1 to 16 (highest 16)."
    )
    np.testing.assert_array_equal(describe.table(figure).values[:, 0], [1.0, 4.0, 16.0])


def test_a_hand_made_figure_is_described_inside_the_cache():
    def bars(values):
        return render.figure(
            [{"type": "bar", "x": ["a", "b"], "y": values, "name": "bytes"}],
            {"title": {"text": "<b>Memory</b>"}},
        )

    fig = render.cached(bars, [3.0, 7.0])
    assert describe.summary(fig) == "Memory: bytes: 2 bars from 3 to 7."
    assert fig._alt == describe.summary(fig)  # computed once, at build time


def test_the_table_holds_the_matrix_with_labels():
    fig = heatmaps.heatmap(
        np.array([[0.5, 0.5], [1.0, 0.0]]),
        row_labels=["the", "the"],
        col_labels=["a", "b"],
        blocked=np.array([[False, False], [False, True]]),
    )
    frame = describe.table(fig).frame()
    assert list(frame.index) == ["query 1 “the”", "query 2 “the”"]
    assert list(frame.columns) == ["key 1 “a”", "key 2 “b”"]
    assert frame.iloc[0].tolist() == [0.5, 0.5] and frame.iloc[1, 0] == 1.0
    assert np.isneginf(frame.iloc[1, 1])
    # What st.dataframe is given: the same table as Arrow, index and −∞ included.
    sent = describe.table(fig).arrow.to_pandas()
    assert sent.index.name == frame.index.name and sent.equals(frame)


# ---- In the app ------------------------------------------------------------------------------


def open_page(path: str, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(path)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("page", registered_pages(), ids=lambda p: p.url_path or "home")
def test_every_chart_on_every_page_has_a_text_alternative(page):
    at = open_page(page.path)
    charts_drawn = at.main.get("plotly_chart")
    for chart in charts_drawn:
        assert chart.proto.HasField("alt"), chart.proto.id
        alt = chart.proto.alt
        assert len(alt) > 20 and alt.endswith("."), alt
        spec = json.loads(chart.proto.spec)
        title = (spec["layout"].get("title") or {}).get("text")
        if title and "<" not in title:
            assert alt.startswith(title.split(" (")[0][:20]) or title[:20] in alt, (title, alt)


def test_sdpa_tables_hold_the_weights_computed_by_hand():
    at = open_page("pages/sdpa_steps.py", **{"app.chart_tables": True})
    # The page's default example, the three-token one (README): softmax(QKᵀ/√2) by hand.
    q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    k = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    scores = q @ k.T / math.sqrt(q.shape[1])
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)

    def numbers(frame):
        try:
            return frame.to_numpy(dtype=float)
        except (TypeError, ValueError):  # a table of words, not a chart's numbers
            return None

    tables = [df.value for df in at.dataframe]
    found = [
        t
        for t in tables
        if t.shape == weights.shape and numbers(t) is not None and np.allclose(numbers(t), weights)
    ]
    assert found, "no table with the page's attention weights"
    assert found[0].index[0].startswith("query 1")
    assert found[0].columns[0].startswith("key 1")

    # Off by default: no tables are drawn unless asked for.
    def chart_table(frame) -> bool:
        return len(frame.index) > 0 and str(frame.index[0]).startswith("query 1 “")

    assert chart_table(found[0])
    assert not [df for df in open_page("pages/sdpa_steps.py").dataframe if chart_table(df.value)]
