"""The cost page's figures of what was measured: time and peak memory against n (log-log, each
with its n² or n×n reference), and the peak memory of full, chunked and fused attention as bars.

Each builder takes measurements (`ui.cost.measurements`), never measures: `render.cached` keys
it on them, so a figure is drawn once per set of results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

from attention_core.cost import quadratic_reference, score_matrix_bytes
from attention_core.measurement import Measurement
from ui.cost.measurements import MB, Job
from ui.widgets.describe import format_number
from ui.widgets.formulas import BACKEND_LABELS, METHOD_LABELS
from ui.widgets.lines import line_plot
from ui.widgets.theme import font_size

# Peak-memory bars: the n×n method in red, the ones that avoid it in blue.
FULL_BAR_COLOR, TILED_BAR_COLOR = "#b2182b", "#2166ac"


def time_figure(results: dict[Job, Measurement], sizes: Sequence[int]) -> go.Figure:
    """Median time against n on log-log axes, with an n² line through the slowest largest run."""
    series = _by_backend(results, sizes, lambda m: m.seconds * 1e3)
    anchor = max(
        (m for m in results.values() if m.n == max(sizes)),
        key=lambda m: m.seconds,
        default=None,
    )
    if anchor is not None:
        series["n² reference"] = quadratic_reference(sizes, anchor.n, anchor.seconds * 1e3)
    return _against_length(
        sizes,
        series,
        y_title="median time (ms)",
        title="Time against n (log-log: n² has slope 2)",
        reference="n² reference",
    )


def memory_figure(results: dict[Job, Measurement], sizes: Sequence[int]) -> go.Figure:
    """Measured peak memory against n, and the bytes of the n×n float32 matrix."""
    series = _by_backend(
        results, sizes, lambda m: np.nan if m.peak_bytes is None else m.peak_bytes / MB
    )
    series["n×n float32 matrix"] = np.array([score_matrix_bytes(n, n) / MB for n in sizes])
    return _against_length(
        sizes,
        series,
        y_title="peak memory (MB)",
        title="Peak memory of one call against n (log-log)",
        reference="n×n float32 matrix",
    )


def memory_bars(results: Sequence[Measurement], score_bytes: int, tile_bytes: int) -> go.Figure:
    """Measured peak memory per method, with the n×n matrix and one tile as reference lines.

    A linear axis on purpose: the full method's bar should tower over the chunked one.
    """
    labels = [f"{BACKEND_LABELS[m.backend]}<br>{METHOD_LABELS[m.method]}" for m in results]
    values = [np.nan if m.peak_bytes is None else m.peak_bytes / MB for m in results]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=values,
            text=[format_number(v, 2) + " MB" for v in values],
            textposition="outside",
            marker_color=[
                FULL_BAR_COLOR if m.method == "full" else TILED_BAR_COLOR for m in results
            ],
            hovertemplate="%{x}: %{y:.3f} MB<extra></extra>",
        )
    )
    for value, name, dash in (
        (score_bytes / MB, "one n×n float32 matrix", "dash"),
        (tile_bytes / MB, "one n×block tile", "dot"),
    ):
        fig.add_hline(
            y=value,
            line_dash=dash,
            annotation_text=f"{name}: {value:.2f} MB",
            annotation_position="top left",
        )
    fig.update_layout(
        title={"text": "Peak memory of one call", "font": {"size": font_size() + 3}},
        yaxis={"title": "peak memory (MB)"},
        height=420,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        font={"size": font_size()},
        showlegend=False,
    )
    return fig


def _by_backend(
    results: dict[Job, Measurement], sizes: Sequence[int], value: Callable[[Measurement], float]
) -> dict[str, np.ndarray]:
    """One series per measured backend: `value` of its run at each size, NaN where unmeasured."""
    series = {}
    for backend in BACKEND_LABELS:
        found = {m.n: m for m in results.values() if m.backend == backend}
        if found:
            series[BACKEND_LABELS[backend]] = np.array(
                [value(found[n]) if n in found else np.nan for n in sizes], dtype=np.float64
            )
    return series


def _against_length(
    sizes: Sequence[int], series: dict, *, y_title: str, title: str, reference: str
) -> go.Figure:
    """Measured series against n on log-log axes, the dashed `reference` among them."""
    fig = line_plot(
        np.asarray(sizes),
        series,
        x_title="sequence length n (queries = keys)",
        y_title=y_title,
        title=title,
        log_x=True,
        log_y=True,
        dashed=[reference],
        markers=True,
    )
    # Log axes label 2, 3, 5...; the measured sizes are the ticks a reader needs.
    fig.update_xaxes(tickvals=list(sizes), ticktext=[f"{n:,}" for n in sizes])
    return fig
