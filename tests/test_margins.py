"""ui.margins: room for a chart's labels reserved before the browser measures them.

The browser test (tests/e2e/test_pages.py) checks the estimates against what Plotly measures in
Chromium on every page; these check how they follow the figure.
"""

import numpy as np
import pytest

from ui.widgets import heatmaps, lines, margins, render

FONT = 12


def _heatmap(labels, *, kind="weights", title="", given=None):
    """A plain Plotly heatmap layout: labels on the left and on top, a colour bar on the right."""
    data = [
        {"type": "heatmap", "z": np.full((len(labels), len(labels)), 0.5), "zmin": 0, "zmax": 1}
    ]
    if kind == "mask":
        data[0]["showscale"] = False
    layout = {
        "font": {"size": FONT},
        "margin": given or {"l": 10, "r": 10, "t": 10, "b": 10},
        "xaxis": {"side": "top", "ticktext": list(labels), "tickvals": list(range(len(labels)))},
        "yaxis": {"ticktext": list(labels), "tickvals": list(range(len(labels))), "title": title},
    }
    return data, layout


def test_longer_labels_reserve_a_wider_left_margin_by_their_extra_width():
    short = margins.reserved(*_heatmap(["a", "b"]))
    long = margins.reserved(*_heatmap(["a", "abcdefghijk"]))
    # Ten more characters at 0.6 em of a 12 px font: 72 px more, and the colour bar is the same.
    assert long["l"] - short["l"] == pytest.approx(10 * 0.6 * FONT, abs=1)
    assert long["r"] == short["r"]


def test_a_title_beside_the_axis_needs_its_line_too():
    untitled = margins.reserved(*_heatmap(["the", "cat"]))
    titled = margins.reserved(*_heatmap(["the", "cat"], title="← query"))
    # Streamlit's axis titles are 14 px: one line of it and the gap to the labels.
    assert titled["l"] - untitled["l"] == pytest.approx(14 * 1.35 + 16, abs=1)


def test_a_colour_bar_needs_the_right_margin_and_a_mask_without_one_does_not():
    weights = margins.reserved(*_heatmap(["the", "cat"]))
    mask = margins.reserved(*_heatmap(["the", "cat"], kind="mask"))
    # Bar (30 px by default) + padding on both sides + labels such as "0.5".
    assert weights["r"] >= 30 + 2 * 10 + 3 * 0.6 * FONT
    assert mask["r"] == 10


def test_colour_bar_labels_follow_the_numbers_shown():
    data, layout = _heatmap(["a", "b"])
    narrow = margins.reserved(data, layout)["r"]
    data[0].update(zmin=-12345.0, zmax=12345.0)
    assert margins.reserved(data, layout)["r"] > narrow  # "−12.3k" is wider than "0.5"


def test_margins_only_widen_and_none_means_enough_already():
    data, layout = _heatmap(["the", "cat"])
    reserved = margins.reserved(data, layout)
    assert all(reserved[side] > 10 for side in "lrt")
    # Below a heatmap whose key axis is on top hangs only half the lowest row's label, not an
    # axis (labels, ticks and title need 28 px and more).
    assert reserved["b"] < 0.5 * FONT * 1.35 + 6
    layout["margin"] = reserved
    assert margins.reserved(data, layout) is None
    layout["margin"] = {side: value + 50 for side, value in reserved.items()}
    assert margins.reserved(data, layout) is None


def test_tokens_that_look_like_tags_count_and_formatting_tags_do_not():
    plain = margins.reserved(*_heatmap(["pad"]))["l"]
    assert margins.reserved(*_heatmap(["<b>pad</b>"]))["l"] == plain
    # "<pad>" is a token Plotly shows as it is: two characters more than "pad".
    assert margins.reserved(*_heatmap(["<pad>"]))["l"] - plain == pytest.approx(
        2 * 0.6 * FONT, abs=1
    )


def test_only_panels_on_the_figures_edge_push_its_margins():
    # Two panels side by side in one figure (as the multi-head page's split into heads).
    short_labels = {"tickvals": [0, 1, 2], "ticktext": ["a", "b", "c"]}
    data = [
        {"type": "heatmap", "z": np.full((3, 3), 1 / 3), "showscale": False, "xaxis": x, "yaxis": y}
        for x, y in (("x", "y"), ("x2", "y2"))
    ]
    layout = {
        "xaxis": {"domain": [0, 0.45]},
        "xaxis2": {"domain": [0.55, 1], "anchor": "y2"},
        "yaxis": dict(short_labels),
        "yaxis2": {**short_labels, "anchor": "x2"},
        "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
    }
    short = margins.reserved(data, layout)["l"]
    long = ["a", "b", "a-very-long-token"]
    # The right panel's y labels sit between the panels, inside the figure.
    layout["yaxis2"]["ticktext"] = long
    assert margins.reserved(data, layout)["l"] == short
    layout["yaxis"]["ticktext"] = long
    assert margins.reserved(data, layout)["l"] > short + 50


def test_a_legend_below_the_plot_reserves_its_rows():
    x = np.arange(10)

    def line(names):
        figure = lines.line_plot(x, {name: x * 1.0 for name in names}, x_title="x", y_title="y")
        return margins.reserved(figure._data, figure._layout)["b"]

    one_row = line(["a", "b"])
    # Thirty long names cannot share one row of a legend: it wraps and the margin follows.
    many_rows = line([f"a long series name {i}" for i in range(30)])
    assert many_rows > one_row + 40


def test_numbers_on_an_axis_are_measured_as_plotly_writes_them():
    x = np.arange(10)
    small = lines.line_plot(x, {"a": x / 10, "b": x / 20}, x_title="x", y_title="y")
    large = lines.line_plot(x, {"a": x * 1e5, "b": x * 1e4}, x_title="x", y_title="y")
    # 0..0.9 is written "0.9" at most; 0..900 000 as "900k".
    assert (
        margins.reserved(large._data, large._layout)["l"]
        > margins.reserved(small._data, small._layout)["l"]
    )


def test_figures_leave_the_cache_with_their_margins_reserved():
    figure = render.cached(
        heatmaps.heatmap, np.full((3, 3), 1 / 3), row_labels=["the", "cat", "sat"],
        col_labels=["the", "cat", "sat"], title="weights", annotate=False,
    )  # fmt: skip
    drawn = figure.to_dict()["layout"]["margin"]
    assert drawn["l"] > 10 and drawn["r"] > 10
    assert margins.reserved(figure._data, figure.to_dict()["layout"]) is None


def test_reserving_widens_the_margin_and_keeps_what_else_the_figure_set():
    import plotly.graph_objects as go

    data, layout = _heatmap(["a long token label", "b"])
    layout["margin"] = {"l": 10, "r": 10, "t": 10, "b": 10, "pad": 4}
    figure = go.Figure({"data": data, "layout": layout})
    render.reserve_margins(figure)
    wanted = margins.reserved(data, layout)
    assert figure.layout.margin.l == wanted["l"] > 10
    assert figure.layout.margin.pad == 4


def test_a_log_axis_reserves_room_for_its_powers_of_ten():
    fig = lines.line_plot(
        np.arange(5),
        {"KL": np.array([1e-5, 1e-3, 0.1, 1.0, 20.0])},
        x_title="position",
        y_title="nats",
        log_y=True,
    )
    plain = margins.reserved(fig._data, fig._layout)["l"]
    fig.layout.yaxis.exponentformat = "power"
    power = margins.reserved(fig._data, fig._layout)["l"]
    # "0.00001" is 7 characters at the axis's font, "10⁻⁵" 4: the power format needs less.
    assert plain > power > 0
    linear = lines.line_plot(np.arange(5), {"KL": np.array([1e-5, 1e-3, 0.1, 1.0, 20.0])},
                             x_title="position", y_title="nats")  # fmt: skip
    assert margins.reserved(linear._data, linear._layout)["l"] < plain


def test_a_legend_below_starts_under_the_x_axis_title_at_any_type_size():
    x = np.arange(10)
    for presenting_font in (13, 20):
        figure = lines.line_plot(x, {"a": x * 1.0, "b": x * 2.0}, x_title="x", y_title="y")
        figure.layout.font.size = presenting_font
        render.reserve_margins(figure)
        layout = figure.to_dict()["layout"]
        plot = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
        axis_depth = dict(
            margins._axis_needs("x", "", layout["xaxis"], figure._data, layout, presenting_font)
        )["b"]
        # The legend's top is as far under the plot as the axis's labels and title reach.
        assert layout["legend"]["yanchor"] == "top"
        assert -layout["legend"]["y"] * plot == pytest.approx(axis_depth, abs=1)
        assert layout["margin"]["b"] > axis_depth


def test_a_long_legend_reserves_the_rows_a_phone_wraps_it_into():
    names = [f"a rather long series name {i}" for i in range(4)]
    x = np.arange(5)
    figure = lines.line_plot(x, {n: x * 1.0 for n in names}, x_title="x", y_title="y")
    one = lines.line_plot(x, {n: x * 1.0 for n in names[:2]}, x_title="x", y_title="y")
    depth = margins.reserved(figure._data, figure._layout)["b"]
    # Each name is ~200 px: a phone's 320 px holds one a row, so four rows, not two.
    assert depth - margins.reserved(one._data, one._layout)["b"] == pytest.approx(
        2 * (13 * margins.LINE_HEIGHT + 12), abs=1
    )


def test_long_titles_are_broken_into_lines_a_phone_holds_and_the_margin_counts_them():
    title = "The weights the running state implies, block by block"
    figure = heatmaps.heatmap(np.eye(3), row_labels="abc", col_labels="abc", title=title)
    before = margins.reserved(figure._data, figure._layout)["t"]
    render.reserve_margins(figure)
    lines_shown = figure.layout.title.text.split("<br>")
    assert " ".join(lines_shown) == title
    assert all(len(line) <= margins.TITLE_CHARS for line in lines_shown) and len(lines_shown) == 2
    assert figure.layout.margin.t >= before + 13 * 1.2  # one more line of the title's type
    # A title with markup is left whole.
    bold = heatmaps.heatmap(np.eye(3), row_labels="abc", col_labels="abc", title=f"<b>{title}</b>")
    assert margins.fitted_titles(bold._layout).get("title") is None


def test_a_y_title_longer_than_the_plot_is_high_is_broken_and_a_squeezed_plot_grows():
    x = np.arange(5)
    long = "loss in nats (mean of the last sixty-four tokens of the passage)"
    figure = lines.line_plot(x, {"a": x * 1.0}, x_title="x", y_title=long)
    figure.layout.height = 200
    render.reserve_margins(figure)
    layout = figure.to_dict()["layout"]
    plot = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    # Grown to keep ten lines of its type, and the title in lines no longer than the plot.
    assert plot >= margins.MIN_PLOT_LINES * 13 * margins.LINE_HEIGHT - 1
    shown = layout["yaxis"]["title"]["text"].split("<br>")
    assert " ".join(shown) == long and len(shown) > 1
    assert all(len(line) * margins.CHAR_WIDTH * 14 <= plot for line in shown)
