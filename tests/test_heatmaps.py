"""ui.charts: the heatmap conventions every page relies on."""

import numpy as np
import pytest

from tests.plotly_json import tick_labels
from ui.why import figures as why_figures
from ui.widgets import describe, heatmaps, render


def _main_trace(fig):
    return fig.data[0]


def test_repeated_tokens_stay_separate_rows_and_columns():
    tokens = ["the", "cat", "the"]
    weights = np.array([[0.2, 0.3, 0.5], [0.1, 0.8, 0.1], [0.6, 0.2, 0.2]])
    fig = heatmaps.heatmap(weights, row_labels=tokens, col_labels=tokens)
    trace = _main_trace(fig)
    assert list(trace.y) == [0, 1, 2]
    assert tick_labels(fig.layout.yaxis) == tokens
    assert tick_labels(fig.layout.xaxis) == tokens
    np.testing.assert_allclose(np.asarray(trace.z, dtype=np.float64), weights, atol=1e-7)


def test_axes_are_categories_so_the_browser_labels_as_many_positions_as_fit():
    tokens = [f"t{i}" for i in range(50)]
    fig = heatmaps.heatmap(np.eye(50), row_labels=tokens, col_labels=tokens)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.type == "category" and axis.tickvals is None
        assert dict(axis.labelalias) == {str(i): token for i, token in enumerate(tokens)}
    # Key labels lie flat: the browser keeps as many as fit (ui.small_screens).
    assert fig.layout.xaxis.tickangle == 0


def test_axes_are_labelled_query_and_key_and_rows_read_top_down():
    fig = heatmaps.heatmap(np.eye(2), row_labels=["a", "b"], col_labels=["c", "d"])
    assert "query" in fig.layout.yaxis.title.text
    assert "key" in fig.layout.xaxis.title.text
    assert fig.layout.yaxis.autorange == "reversed"


def test_weights_use_the_fixed_unit_scale_and_scores_a_symmetric_one():
    small = np.array([[0.01, 0.02], [0.03, 0.04]])
    weights = _main_trace(heatmaps.heatmap(small, row_labels="ab", col_labels="cd"))
    assert (weights.zmin, weights.zmax) == (0.0, 1.0)
    scores = np.array([[-1.0, 3.0], [0.5, 2.0]])
    trace = _main_trace(heatmaps.heatmap(scores, row_labels="ab", col_labels="cd", kind="scores"))
    assert (trace.zmin, trace.zmax) == (-3.0, 3.0)


def test_masked_cells_are_drawn_apart_and_written_minus_infinity():
    masked = np.array([[1.5, -np.inf], [0.25, 2.0]])
    fig = heatmaps.heatmap(masked, row_labels="ab", col_labels="cd", kind="scores")
    trace, layer, numbers = fig.data
    assert np.isnan(np.asarray(trace.z, dtype=np.float64)[0, 1])
    assert list(numbers.text) == ["1.50", "−∞", "0.25", "2.00"]
    assert list(np.asarray(layer.z)[0]) == [pytest.approx(np.nan, nan_ok=True), 1.0]
    assert "masked" in layer.hovertext[0][1]


def test_small_matrices_show_numbers_and_hover_explains_the_cell():
    fig = heatmaps.heatmap(
        np.array([[1.0, -0.0001]]),
        row_labels=["q"],
        col_labels=["k1", "k2"],
        kind="scores",
        hover=[["q·k1 = 1", "q·k2 = -0.0001"]],
    )
    trace = _main_trace(fig)
    assert list(fig.data[-1].text) == ["1.00", "0.00"]  # no "-0.00"
    assert "q·k2 = -0.0001" in trace.hovertext[0][1]
    assert "query 1 “q” → key 2 “k2”" in trace.hovertext[0][1]


def test_data_is_sent_as_float32():
    fig = heatmaps.heatmap(
        np.random.default_rng(0).random((4, 4)), row_labels="abcd", col_labels="abcd"
    )
    assert np.asarray(_main_trace(fig).z).dtype == np.float32


def test_large_matrices_are_block_averaged_and_say_so():
    values = np.arange(1024 * 600, dtype=np.float64).reshape(1024, 600)
    labels = [str(i) for i in range(1024)]
    fig = heatmaps.heatmap(
        values, row_labels=labels, col_labels=labels[:600], kind="sequential", title="PE"
    )
    z = np.asarray(_main_trace(fig).z, dtype=np.float64)
    assert z.shape == (512, 300)
    # Block (0, 0) averages rows 0-1 and columns 0-1 of the original.
    assert z[0, 0] == np.mean(values[:2, :2])
    assert "2×2" in fig.layout.title.text
    assert _main_trace(fig).text is None
    # Axes and hover keep real positions: the second block row starts at position 2.
    assert list(_main_trace(fig).y[:3]) == [0, 2, 4]
    assert "block of 2" in _main_trace(fig).hovertemplate
    aliases = dict(fig.layout.yaxis.labelalias)
    assert len(aliases) == 512 and aliases["2"] == "2" and "1" not in aliases


def test_a_heatmap_without_cell_hover_sends_one_template():
    values = np.tril(np.arange(30 * 30, dtype=np.float64).reshape(30, 30))
    values[np.triu_indices(30, 1)] = -np.inf
    labels = [str(i) for i in range(30)]
    kwargs = dict(row_labels=labels, col_labels=labels, kind="scores", annotate=False)
    fig = heatmaps.heatmap(values, **kwargs, row_title="query position", cell_hover=False)
    heat, masked = fig.data
    assert heat.hovertext is None and masked.hovertext is None
    assert heat.hovertemplate == "query position %{y}, key %{x}: %{z:.4f}<extra></extra>"
    assert masked.hovertemplate == "query position %{y}, key %{x}: masked (−∞)<extra></extra>"
    # By default a 30×30 matrix (900 cells) gets a line per cell and a label per position.
    fig = heatmaps.heatmap(values, **kwargs)
    assert len(fig.data[0].hovertext) == 30 and "→ key 2 “1”" in fig.data[0].hovertext[0][1]
    assert "masked: −∞" in fig.data[1].hovertext[0][1]
    assert tick_labels(fig.layout.xaxis) == labels


def test_numbers_in_the_cells_replace_the_colour_bar():
    small = heatmaps.heatmap(np.eye(3), row_labels="abc", col_labels="abc")
    large = heatmaps.heatmap(np.eye(13), row_labels="abcdefghijklm", col_labels="abcdefghijklm")
    assert small.data[-1].mode == "text" and small.data[0].showscale is False
    assert large.data[0].showscale is True


def test_format_number_writes_infinities_and_no_negative_zero():
    assert describe.format_number(-np.inf) == "−∞"
    assert describe.format_number(-0.004) == "0.00"
    assert describe.format_number(0.12345, 4) == "0.1235"


def test_grid_shares_one_scale_across_panels_that_reflow():
    stack = np.stack([np.eye(3), np.full((3, 3), 1 / 3), np.eye(3)[::-1] * 4])
    grid = heatmaps.heatmap_grid(
        stack, titles=["head 1", "head 2", "head 3"], row_labels="abc", col_labels="abc",
        kind="sequential", columns=2, highlight=1,
    )  # fmt: skip
    # A figure per panel, two a row on a wide screen (st.columns stacks them on a phone).
    assert isinstance(grid, render.Panels) and grid.columns == 2 and len(grid.figures) == 3
    traces = [figure.data[0] for figure in grid.figures]
    assert {(trace.zmin, trace.zmax) for trace in traces} == {(0.0, 4.0)}
    # One colour bar, on the last panel; the chosen panel's title in bold.
    assert [trace.showscale for trace in traces] == [False, False, True]
    assert [figure.layout.title.text for figure in grid.figures][1] == "<b>head 2</b>"
    assert tick_labels(grid.figures[2].layout.yaxis) == ["a", "b", "c"]


def test_rnn_diagram_draws_every_pair_once():
    fig = why_figures.rnn_vs_attention(list("abcde"))
    arcs = [trace for trace in fig.data if trace.mode == "lines"]
    assert len(arcs) == 5 * 4 // 2
    assert len(fig.layout.annotations) == 4 + 2  # n-1 RNN arrows and two captions


def test_cached_builds_each_distinct_figure_once_and_draws_the_same_json():
    import plotly.io

    built = []

    def weights_map(values, title):
        built.append(title)
        return heatmaps.heatmap(values, row_labels=["a", "b"], col_labels=["c", "d"], title=title)

    weights = np.array([[0.25, 0.75], [0.5, 0.5]])
    first = render.cached(weights_map, weights, "one")
    again = render.cached(weights_map, weights.copy(), "one")
    other = render.cached(weights_map, weights, "two")
    assert first is again and other is not first
    assert built == ["one", "two"]
    # What st.plotly_chart sends is what the same figure built afresh would send (`show`
    # reserves an unshared figure's margins as it draws it).
    fresh = weights_map(weights, "one")
    render.reserve_margins(fresh)
    assert plotly.io.to_json(first.to_dict(), validate=False) == plotly.io.to_json(
        fresh.to_dict(), validate=False
    )
    np.testing.assert_allclose(np.asarray(first.data[0].z, dtype=np.float64), weights)


def test_the_figure_cache_is_bounded_in_bytes_and_emptied_with_the_other_caches():
    import orjson
    import streamlit as st

    from ui.widgets.byte_cache import every_cache

    def weights_map(values, title):
        return heatmaps.heatmap(values, row_labels=["a", "b"], col_labels=["c", "d"], title=title)

    figures = [render.cached(weights_map, np.eye(2) * k, f"map {k}") for k in range(3)]
    entries, held = every_cache()["figures"]
    # Each counts its Plotly objects and three times the JSON the browser receives.
    json_bytes = [
        len(orjson.dumps(f.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY)) for f in figures
    ]
    assert entries == 3
    assert held == sum(render.FIGURE_OBJECT_BYTES + 3 * size for size in json_bytes)
    # The least recently drawn go once the bytes pass the bound: the bound holds at most this many.
    assert render.FIGURE_CACHE_BYTES // figures[0]._held_bytes >= 128
    st.cache_resource.clear()  # what the menu's "Clear caches" does
    render.cached(weights_map, np.eye(2), "again")
    assert every_cache()["figures"][0] == 1


def test_every_figure_has_streamlits_template_with_tick_labels_left_to_overflow():
    import plotly.io as pio

    template = heatmaps.heatmap(
        np.eye(2), row_labels=["a", "b"], col_labels=["c", "d"]
    ).layout.template
    assert template.layout.xaxis.ticklabeloverflow == "allow"
    assert template.layout.yaxis.ticklabeloverflow == "allow"
    # Streamlit's theme (its colour placeholders, filled in by the browser) is kept.
    assert template.layout.colorway == pio.templates["streamlit"].layout.colorway
    assert len(template.layout.colorway) == 10
    # A default named "a+b" is merged anew for every figure made; one name is looked up.
    assert "+" not in pio.templates.default


def test_a_digested_argument_is_keyed_by_its_digest_and_reaches_the_builder_plain():
    built = []

    def weights_map(values, title):
        built.append((values, title))
        return heatmaps.heatmap(values, row_labels=["a", "b"], col_labels=["c", "d"], title=title)

    weights = np.array([[0.25, 0.75], [0.5, 0.5]])
    other_weights = np.array([[1.0, 0.0], [0.5, 0.5]])
    first = render.cached(weights_map, render.digested("trace-1", weights), "one")
    # The same digest stands for the same data: one build, whatever object carries it.
    again = render.cached(weights_map, render.digested("trace-1", weights.copy()), "one")
    other = render.cached(weights_map, render.digested("trace-2", other_weights), "one")
    as_option = render.cached(weights_map, values=render.digested("trace-1", weights), title="one")
    assert first is again and other is not first and as_option is not first
    assert len(built) == 3
    # The builder receives the plain value, never the wrapper.
    assert built[0][0] is weights and built[1][0] is other_weights
    assert built[2][0] is weights and built[2][1] == "one"
    np.testing.assert_allclose(np.asarray(other.data[0].z, dtype=np.float64), other_weights)


def test_a_digested_argument_never_pickles_its_value():
    class Unpicklable:
        def __reduce__(self):
            raise AssertionError("the value was pickled for the key")

    built = []

    def builder(value, title):
        built.append(value)
        return heatmaps.heatmap(np.eye(2), row_labels="ab", col_labels="ab", title=title)

    value = Unpicklable()
    render.cached(builder, render.digested("only-the-digest", value), "t")
    render.cached(builder, render.digested("only-the-digest", value), "t")
    assert built == [value]
    # A plain argument that looks like the digest is another key.
    plain = render.cached(builder, "only-the-digest", "t")
    assert len(built) == 2 and built[1] == "only-the-digest" and plain is not None
