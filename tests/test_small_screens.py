"""ui.widgets.small_screens and render.Panels: what keeps charts and tables readable on a phone.

The browser's side (dense axes thinned, point labels left to the hover) is measured in Chromium
by tests/e2e/test_small_screens.py; here, what the server sends.
"""

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.testing.v1 import AppTest

from ui.widgets import heatmaps, render, small_screens


def test_a_table_without_its_index_pins_its_first_column_and_keeps_its_settings():
    frame = pd.DataFrame({"token": ["a", "b"], "p": [0.5, 0.5]})
    number = st.column_config.NumberColumn(format="%.3f")
    options = small_screens.pinned_first(
        frame, {"hide_index": True, "column_config": {"token": "word", "p": number}}
    )
    assert options["column_config"]["token"] == {"label": "word", "pinned": True}
    assert options["column_config"]["p"] == number
    # A Styler's frame and rows as dicts name their first column too.
    styled = small_screens.pinned_first(frame.style, {"hide_index": True})
    assert styled["column_config"] == {"token": {"pinned": True}}
    rows = small_screens.pinned_first([{"block": 1, "max": 2.0}], {"hide_index": True})
    assert rows["column_config"] == {"block": {"pinned": True}}
    # Nothing to pin in a table without columns or rows as dicts without rows.
    assert small_screens.pinned_first([], {"hide_index": True}) == {"hide_index": True}
    # With its index shown, Streamlit pins the index: nothing to add.
    assert small_screens.pinned_first(frame, {"width": "stretch"}) == {"width": "stretch"}


def test_small_multiples_draw_a_chart_per_panel_in_columns_that_a_phone_stacks():
    def page():
        import numpy as np

        from ui.widgets import heatmaps, render

        grid = heatmaps.heatmap_grid(
            np.stack([np.eye(3)] * 5), titles=[f"head {h}" for h in range(1, 6)],
            row_labels="abc", col_labels="abc", columns=3,
        )  # fmt: skip
        render.show(grid, filename="heads", key="grid")

    at = AppTest.from_function(page).run()
    assert not at.exception
    charts = at.main.get("plotly_chart")
    assert [chart.proto.id.rsplit("grid.", 1)[-1] for chart in charts] == list("01234")
    # Two rows of st.columns(3): three panels, then two (and an empty column).
    held = [len(column.get("plotly_chart")) for column in at.columns]
    assert held == [1, 1, 1, 1, 1, 0]


def test_cached_panels_are_shared_figures_counted_in_bytes_panel_by_panel():
    stack = np.random.default_rng(0).random((4, 5, 5))
    grid = render.cached(heatmaps.heatmap_grid, stack, titles=list("abcd"), row_labels="abcde",
                         col_labels="abcde")  # fmt: skip
    assert isinstance(grid, render.Panels)
    assert all(type(panel).__name__ == "_SharedFigure" for panel in grid.figures)
    assert render._held_bytes(grid) == sum(panel._held_bytes for panel in grid.figures)
    assert render.cached(heatmaps.heatmap_grid, stack, titles=list("abcd"), row_labels="abcde",
                         col_labels="abcde") is grid  # fmt: skip
