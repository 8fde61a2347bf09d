"""Drawing a figure: the one figure cache of the app, `show` with its text alternative, and the
chart toolbar's download settings.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson
import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

# theme: imported for the Plotly template it sets, before any figure is built.
from ui.widgets import describe, margins, theme  # noqa: F401
from ui.widgets.byte_cache import MB, bounded_by_bytes
from ui.widgets.state import FIGURE_FORMAT_KEY, TABLES_KEY, is_presenting


def plot_config(filename: str) -> dict:
    """Modebar settings: a download named after what it shows, as PNG or SVG, no logo."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": figure_format(), "filename": filename, "scale": 2},
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


def figure_format() -> str:
    """What the chart toolbar's camera button saves: "png", or "svg" for slides."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return "png"
    return "svg" if st.session_state.get(FIGURE_FORMAT_KEY) == "SVG" else "png"


@dataclass(frozen=True, eq=False)
class Panels:
    """Small multiples: one figure per panel, `columns` to a row on a wide screen.

    Drawn in `st.columns`, which a phone's browser stacks one per row, so each panel keeps
    readable cells and labels at any width: one figure of several subplots cannot reflow.
    """

    figures: tuple[go.Figure, ...]
    columns: int
    widths: tuple[float, ...] | None = None  # of the columns of a row (equal by default)


def show(fig: go.Figure | Panels, *, filename: str, key: str | None = None, **options: Any) -> None:
    """Draw a figure full-width with a PNG download named `filename.png` (small multiples: each
    panel in its column, `filename-1.png`, ...).

    The chart's one-sentence summary becomes its accessible name (`alt`, read by screen
    readers); with "Show chart data as tables" on, its numbers follow as a table.
    """
    if isinstance(fig, Panels):
        _show_panels(fig, filename=filename, key=key, **options)
        return
    if not isinstance(fig, _SharedFigure):
        reserve_margins(fig)
    st.plotly_chart(
        fig,
        width="stretch",
        config=plot_config(filename),
        key=key,
        alt=describe.summary(fig),
        **options,
    )
    if st.session_state.get(TABLES_KEY):
        data = describe.table(fig)
        if data is not None:
            st.dataframe(data.arrow, key=None if key is None else f"{key}.table")


def _show_panels(panels: Panels, *, filename: str, key: str | None, **options: Any) -> None:
    for start in range(0, len(panels.figures), panels.columns):
        row = panels.figures[start : start + panels.columns]
        columns = st.columns(panels.widths or panels.columns)[: len(row)]
        for index, (column, panel) in enumerate(zip(columns, row, strict=True), start):
            with column:
                name = None if key is None else f"{key}.{index}"
                show(panel, filename=f"{filename}-{index + 1}", key=name, **options)


def reserve_margins(fig: go.Figure) -> None:
    """Widen the figure's margins to what its labels will need (`ui.margins`), so the browser
    draws it once instead of drawing, measuring and drawing again; grow a figure whose margins
    left its plot too short; break titles too long for a phone, or for the plot's height, into
    lines (then the margins again, for the lines) and put a legend below the plot under its x
    axis."""
    _widen_margins(fig)
    # The figure's own dicts, read without the deep copy `to_dict` makes.
    height = margins.taller(fig._layout)
    if height is not None:
        fig.layout.height = height
    fitted = margins.fitted_titles(fig._layout)
    for path, text in fitted.items():
        fig.layout[f"{path}.text"] = text
    if fitted:
        _widen_margins(fig)
    legend = margins.legend_below(fig._data, fig._layout)
    if legend is not None:
        fig.layout.legend = legend


def _widen_margins(fig: go.Figure) -> None:
    margin = margins.reserved(fig._data, fig._layout)
    if margin is not None:
        # `reserved` keeps the figure's other margin keys; set directly, since update_layout's
        # path parsing costs far more than the margin itself (bench/bench_live_audience.py).
        fig.layout.margin = margin


@dataclass(frozen=True, eq=False)
class Digested:
    """`value` for a builder, with `digest` standing for it in the figure cache's key: made by
    `digested`, unwrapped before the builder is called."""

    digest: str
    value: Any


def digested(digest: str, value: Any) -> Digested:
    """`value` (a trace, a readout: arrays of megabytes) passed to `cached` with `digest` (a
    string that changes whenever `value` would, e.g. made from the inputs that computed it) as
    its part of the key, so the arrays are never pickled for a key at every rerun.

        render.cached(figures.head_figure, render.digested(trace.digest, trace), layer, head)
    """
    return Digested(digest, value)


def _keyed(value: Any) -> Any:
    # Pickled as a Digested without its value: no plain argument can stand for it in the key.
    return Digested(value.digest, None) if isinstance(value, Digested) else value


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Digested) else value


def cached(
    build: Callable[..., go.Figure | Panels], *args: Any, **options: Any
) -> go.Figure | Panels:
    """`build(*args, **options)`, built once per distinct input and shared by every session.

    The one figure cache of the app: keyed on the builder, its inputs and presenter mode (which
    sets font sizes), bounded, and shared, so fifty viewers of one deep link cost one figure.
    An argument wrapped by `digested` counts in the key by its digest alone, and the builder
    receives its plain value. Shared figures must not be modified: `st.plotly_chart` only
    serialises them.
    """
    keyed_args = tuple(map(_keyed, args))
    keyed_options = {name: _keyed(value) for name, value in options.items()}
    digest = hashlib.sha256(
        pickle.dumps(
            (build.__module__, build.__qualname__, keyed_args, keyed_options, is_presenting()),
            protocol=5,
        )
    ).hexdigest()
    plain_args = tuple(map(_plain, args))
    plain_options = {name: _plain(value) for name, value in options.items()}
    return _built_figure(digest, build, plain_args, plain_options)


# What a cached figure holds: its Plotly objects (~100 KB even for a 3x3 heatmap) and its dict,
# about three times the JSON the browser receives. The bound holds every figure of several views
# of every page, as the 128 entries it replaces did.
FIGURE_OBJECT_BYTES = 100 * 1024
FIGURE_CACHE_BYTES = 40 * MB


def _held_bytes(figure: go.Figure | Panels) -> int:
    if isinstance(figure, Panels):
        return sum(map(_held_bytes, figure.figures))
    return getattr(figure, "_held_bytes", FIGURE_OBJECT_BYTES)


@bounded_by_bytes(FIGURE_CACHE_BYTES, name="figures", lane=None, size=_held_bytes)
def _built_figure(
    digest: str, _build: Callable, _args: tuple, _options: dict
) -> go.Figure | Panels:
    # Only `digest` is keyed: it covers the builder, the inputs and presenter mode. Kept as
    # objects: unpickling a figure costs more than building it.
    built = _build(*_args, **_options)
    if isinstance(built, Panels):
        return replace(built, figures=tuple(map(_shared, built.figures)))
    return _shared(built)


def _shared(figure: go.Figure) -> go.Figure:
    """A new figure made ready to be drawn by every session (a `_SharedFigure`)."""
    if type(figure) is go.Figure:
        # Described here, once, while the figure is still this thread's own.
        if not getattr(figure, "_alt", None):
            describe.attach(figure, describe.summary(figure), describe.table(figure))
        reserve_margins(figure)
        drawn = figure.to_dict()
        # The figure is new and only this cache holds it, so it can become a shared one.
        figure.__class__ = _SharedFigure
        figure._drawn = drawn
        figure._held_bytes = FIGURE_OBJECT_BYTES + 3 * len(
            orjson.dumps(drawn, option=orjson.OPT_SERIALIZE_NUMPY, default=str)
        )
    return figure


class _SharedFigure(go.Figure):
    """A cached figure, drawn by every session and never changed after it was built.

    `st.plotly_chart` asks a figure for its dict on every draw, and Plotly makes one by deep-
    copying every trace and base64-encoding every array (a millisecond or more per chart, so
    tens of milliseconds for a page of small multiples); a shared figure has made it once.
    The dict is shared too: read it, never change it.
    """

    _drawn: dict
    _held_bytes: int  # its Plotly objects and dict, for the figure cache's bound

    def to_dict(self) -> dict:
        return self._drawn


def figure(traces: list[dict], layout: dict) -> go.Figure:
    """A figure built from plain dicts: per-property validation costs more than the page."""
    return go.Figure({"data": traces, "layout": layout}, _validate=False)
