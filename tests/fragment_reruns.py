"""Change one widget of a page on a real server and see what its fragment rerun sends back.

AppTest reruns the whole script for every widget change, so it cannot show that a widget inside
an `st.fragment` reruns only its fragment, nor that the link (written at the fragment's end,
since the page's closing `sync_url` does not run then) follows it. This drives `streamlit run`
over its websocket protocol as a browser tab does (harness/stream.py) and records, per
run, the link the server set (`page_info_changed`), the text and metric values it drew and how
many elements it sent.

`torch_after_a_plain_visit(page)` opens a page in a fresh interpreter (AppTest) and says whether
torch got imported: a plain visit must not pay its 190 MB and seconds.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import dataclass, field

import websockets
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from harness.stream import Viewer, Widget, run_to_end
from server.serve import ROOT, Deployment


@dataclass
class Run:
    """What one run sent: the link, every markdown/caption/metric text and chart title (as
    "chart: <title>"), the element count."""

    query_string: str | None = None
    texts: list[str] = field(default_factory=list)
    elements: int = 0


class RecordingViewer(Viewer):
    def __init__(self, url: str, page: str, query: str):
        super().__init__(url, page, query, None, random.Random(0))
        self.runs: list[Run] = []

    async def rerun(self, changed: str | None = None) -> None:
        self.runs.append(Run())
        await super().rerun(changed)

    def read_delta(self, delta, path: tuple[int, ...]) -> str | None:
        widget_id = super().read_delta(delta, path)
        if delta.WhichOneof("type") != "new_element":
            return widget_id
        run = self.runs[-1]
        element = delta.new_element
        kind = element.WhichOneof("type")
        if kind == "spinner":
            # A cache's spinner appears only when its computation outlasts Streamlit's delay:
            # on a busy machine, not otherwise. It is not part of the page.
            return widget_id
        run.elements += 1
        if kind == "markdown":
            run.texts.append(element.markdown.body)
        elif kind == "metric":
            run.texts.append(f"{element.metric.label}: {element.metric.body}")
        elif kind == "plotly_chart":
            chart = element.plotly_chart
            title = json.loads(chart.spec or "{}").get("layout", {}).get("title") or {}
            run.texts.append(f"chart: {title.get('text', '')}")
            if chart.id:  # a chart that reports selections is a widget
                self.widgets[chart.id] = Widget(kind, chart, delta.fragment_id, path)
                return chart.id
        return widget_id

    def widget(self, label: str) -> str:
        """The id of the widget labelled `label` (as last drawn)."""
        (found,) = [
            w for w, widget in self.widgets.items() if getattr(widget.proto, "label", "") == label
        ]
        return found


class _Tap:
    """The websocket, with each `page_info_changed` (the link) noted on the current run."""

    def __init__(self, socket, viewer: RecordingViewer):
        self.socket, self.viewer = socket, viewer

    async def send(self, data: bytes) -> None:
        await self.socket.send(data)

    async def recv(self) -> bytes:
        raw = await self.socket.recv()
        message = ForwardMsg()
        message.ParseFromString(raw)
        if message.WhichOneof("type") == "page_info_changed":
            self.viewer.runs[-1].query_string = message.page_info_changed.query_string
        return raw


def change_in_fragment(page: str, query: str, label: str, value: tuple[str, object]):
    """Open `page?query` on a fresh server, set the widget `label` to `value` (a widget-state
    kind and value, e.g. ("double_array_value", [40.0])); return (full run, widget rerun,
    the widget's fragment id). A chart's selection is `label` "chart <part of its key>" and a
    ("string_value", <selection JSON>) value."""

    async def visit(port: int):
        viewer = RecordingViewer(f"ws://127.0.0.1:{port}/_stcore/stream", page, query)
        async with websockets.connect(viewer.url, subprotocols=["streamlit"], max_size=None) as s:
            viewer.socket = _Tap(s, viewer)
            await viewer.rerun()
            if label.startswith("chart "):
                (widget_id,) = [w for w in viewer.widgets if label.removeprefix("chart ") in w]
            else:
                widget_id = viewer.widget(label)
            fragment_id = viewer.widgets[widget_id].fragment_id
            viewer.values[widget_id] = value
            await viewer.rerun(widget_id)
        assert viewer.log.exceptions == [], viewer.log.exceptions
        return viewer.runs[0], viewer.runs[1], fragment_id

    with Deployment(ROOT / "app.py") as server:
        return run_to_end(visit(server.port))


def torch_after_a_plain_visit(page_file: str, then: str = "") -> bool:
    """Whether opening `page_file` (e.g. "pages/real_model.py") at its defaults imports torch,
    in a fresh interpreter (the test process has long imported torch for other tests).

    `then`: AppTest statements on `at` run after the page opened (one more plain action).
    """
    script = (
        "import sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({str(ROOT / 'app.py')!r}, default_timeout=180)\n"
        f"at.switch_page({page_file!r}).run()\n"
        f"{then}\n"
        "assert not at.exception, [e.value for e in at.exception]\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.split()[-1] == "True"
