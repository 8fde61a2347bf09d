"""Line charts: one line per named series over a shared x axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ui.widgets import describe
from ui.widgets.render import figure
from ui.widgets.state import is_presenting
from ui.widgets.theme import font_size


def line_plot(
    x: np.ndarray,
    series: dict[str, np.ndarray],
    *,
    x_title: str,
    y_title: str,
    title: str = "",
    log_x: bool = False,
    log_y: bool = False,
    dashed: Sequence[str] = (),
    markers: bool = False,
) -> go.Figure:
    """One line per named series over a shared x axis; names in `dashed` are references."""
    traces = [
        {
            "type": "scatter",
            "x": np.asarray(x),
            "y": np.asarray(y, dtype=np.float64),
            "name": name,
            "mode": "lines+markers" if markers else "lines",
            "line": {
                "dash": "dash" if name in dashed else "solid",
                "width": 3 if is_presenting() else 2,
            },
        }
        for name, y in series.items()
    ]
    layout = {
        "title": {"text": title, "font": {"size": font_size() + 3}},
        "xaxis": {"title": {"text": x_title}, "type": "log" if log_x else "linear"},
        "yaxis": {"title": {"text": y_title}, "type": "log" if log_y else "linear"},
        "height": 420,
        "margin": {"l": 10, "r": 10, "t": 60 if title else 30, "b": 10},
        "font": {"size": font_size()},
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "x unified",
    }
    fig = figure(traces, layout)
    return describe.attach(
        fig,
        describe.lines_summary(x, series, x_title=x_title, y_title=y_title, title=title),
        describe.lines_table(x, series, x_title=x_title, title=title),
    )
