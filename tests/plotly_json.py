"""Reading the figures a page drew, as AppTest sees them: plotly figure JSON."""

import base64
import json

import numpy as np
from streamlit.testing.v1 import AppTest


def plotly_array(value) -> np.ndarray:
    """An array from figure JSON: a plain (nested) list, or plotly ≥ 6's typed array
    `{"dtype", "bdata", "shape"}` (shape absent for 1-D)."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return flat.reshape([int(s) for s in str(shape).split(",")]) if shape else flat
    return np.asarray(value)


def figures(at: AppTest) -> list[dict]:
    """Every plotly figure on the page, in the order drawn."""
    return [json.loads(chart.proto.spec) for chart in at.main.get("plotly_chart")]


def chart(at: AppTest, key: str) -> dict:
    """The figure drawn with the widget key `key`."""
    for element in at.main.get("plotly_chart"):
        if element.proto.id.endswith(key):
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart {key}")


def frame(at: AppTest, column: str):
    """The table on the page that has a column whose name holds `column`."""
    for element in at.dataframe:
        if any(column in name for name in element.value.columns):
            return element.value
    raise AssertionError(f"no table with a column {column!r}")


def tick_labels(axis) -> list[str]:
    """An axis's labels in order (a figure's layout axis, as a dict or a Plotly object): its
    `ticktext`, or, for positions drawn as categories, the label each position is an alias of."""
    ticktext = axis["ticktext"] if "ticktext" in axis else None
    if ticktext is not None:
        return list(ticktext)
    return list((axis["labelalias"] or {}).values())


def panel_figures(at: AppTest, key: str) -> list[dict]:
    """The figures of small multiples drawn with `key` (`render.Panels`: `key.0`, `key.1`, ...),
    in order."""
    specs = {
        element.proto.id.rsplit(f"{key}.", 1)[-1]: json.loads(element.proto.spec)
        for element in at.main.get("plotly_chart")
        if f"{key}." in element.proto.id
    }
    return [specs[str(index)] for index in range(len(specs))]


def title_text(spec: dict) -> str:
    """A figure's title, without the bold that marks a chosen panel."""
    text = (spec["layout"].get("title") or {}).get("text") or ""
    return text.replace("<b>", "").replace("</b>", "")
