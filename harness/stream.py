"""A browser tab's side of Streamlit's websocket protocol, without the browser.

A `Viewer` opens `/_stcore/stream`, asks for a page (a deep link) with a `BackMsg`
`rerun_script`, reads `ForwardMsg`s until the run finishes, and can then change one of the
page's real widgets (a slider a step or two, another option of a select, a toggle) and send the
new widget states the way the frontend does: inside an `st.fragment` only that fragment reruns.
It keeps the frontend's message cache (`cached_message_hashes`), so unchanged elements come
back as references, and it records what a viewer would see: exceptions, dropped connections,
time to the first page and from each action to its finished run, and the page of each.

A viewer either stays on its page, acting after a think time (`run`), or tours the pages it is
given back to back (`tour`).

Shared by the load benchmark (bench/bench_live_audience.py) and the serving tests
(tests/test_serve.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
import time
import urllib.request
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

# Chrome around every page that an audience would not touch while following a talk.
IGNORED_LABELS = (
    "Presenter mode",
    "Chart downloads (camera button)",
    # Opt-in comparisons that import torch (where it is installed at all: not on Community
    # Cloud); a room following a talk measures the pages, not a torch import (nor, for the
    # check against transformers, a process starting transformers).
    "Compare with torch",
    "Compare with torch.nn.MultiheadAttention",
    "Check these tokens against Hugging Face transformers",
)
FINISHED = ForwardMsg.ScriptFinishedStatus
# What `ViewerLog.acted_on` says for going to another page rather than moving a widget.
VISIT = "(visit)"
RUN_TIMEOUT = 120.0
MAX_VIEWERS = 200


def run_to_end(coroutine):
    """Run `coroutine` in an event loop of its own thread and return its result.

    Playwright's sync API keeps a loop running in the test thread for the whole browser session,
    and `asyncio.run` refuses to start inside a running loop.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


@dataclass
class Widget:
    kind: str
    proto: object
    fragment_id: str
    delta_path: tuple[int, ...] = ()


@dataclass
class ViewerLog:
    page: str
    first_page: float | None = None
    actions: list[float] = field(default_factory=list)
    acted_on: list[str] = field(default_factory=list)  # each action's widget label, or VISIT
    # Each action's page, for a touring viewer's figures: `page` is only where it started.
    on_page: list[str] = field(default_factory=list)
    runs: int = 0
    exceptions: list[str] = field(default_factory=list)
    dropped: str | None = None


class Viewer:
    """One browser tab's side of the protocol."""

    def __init__(self, url: str, page: str, query: str, cookie: str | None, rng: random.Random):
        self.url, self.page, self.query, self.cookie, self.rng = url, page, query, cookie, rng
        self.widgets: dict[str, Widget] = {}
        self.values: dict[str, tuple[str, object]] = {}
        self.cache: dict[str, bytes] = {}
        self.page_hash = ""
        self.log = ViewerLog(page=self.page_name)
        # What the page last said: its progress bar's text, and a fragment's auto-rerun (the
        # fragment's id and its interval, s), which a browser follows on its own.
        self.progress = ""
        self.auto_rerun: tuple[str, float] | None = None

    @contextlib.asynccontextmanager
    async def connected(self):
        """The tab's websocket, open for the body of the `async with`."""
        headers = {"Cookie": self.cookie} if self.cookie else {}
        async with websockets.connect(
            self.url,
            subprotocols=["streamlit"],
            additional_headers=headers,
            max_size=None,
            open_timeout=RUN_TIMEOUT,
        ) as socket:
            self.socket = socket
            yield self

    async def run(self, until: float, think: float, min_actions: int = 0) -> ViewerLog:
        """Load the page; act every `think` s until `until`, and at least `min_actions` times."""
        async with self.on_its_page():
            while time.monotonic() < until or len(self.log.actions) < min_actions:
                if think:
                    await asyncio.sleep(think * self.rng.uniform(0.6, 1.4))
                if not await self.act():
                    break
        return self.log

    async def tour(self, links, until: float, actions_per_page: int) -> ViewerLog:
        """Load the page; act `actions_per_page` times back to back, go to the link after it in
        `links` (after the last, the first), and so on until `until`.

        A page with nothing left to move is left early. With one link, the tour visits that page
        again: the same kind of work for a single-page script.
        """
        links = list(links)
        here = links.index((self.page, self.query)) if (self.page, self.query) in links else -1
        async with self.on_its_page():
            while time.monotonic() < until:
                for _ in range(actions_per_page):
                    if time.monotonic() >= until or not await self.act():
                        break
                if time.monotonic() < until:
                    here = (here + 1) % len(links)
                    await self.visit(*links[here])
        return self.log

    @contextlib.asynccontextmanager
    async def on_its_page(self):
        """The tab connected and its page loaded (`first_page` timed) for the body of the
        `async with`; a dropped connection ends the body and is logged, not raised."""
        started = time.monotonic()
        try:
            async with self.connected():
                await self.rerun()
                self.log.first_page = time.monotonic() - started
                yield
        except (websockets.ConnectionClosed, OSError, TimeoutError) as error:
            self.log.dropped = f"{type(error).__name__}: {error}"[:200]

    async def act(self) -> bool:
        """Move one widget and wait for the run it causes; False if nothing can move."""
        widget_id = self.pick_widget()
        if widget_id is None:
            return False
        await self.timed_run(self.widgets[widget_id].proto.label, widget_id)
        return True

    async def visit(self, page: str, query: str = "") -> None:
        """Go to another page in the same session, as a click in the sidebar does."""
        self.page, self.query, self.page_hash = page, query, ""
        self.values.clear()
        await self.timed_run(VISIT)

    async def timed_run(self, label: str, changed: str | None = None) -> None:
        """`rerun(changed)`, logged as one step: its label, its seconds and its page."""
        # Noted before the run, so an exception it shows can say which widget moved.
        self.log.acted_on.append(label)
        started = time.monotonic()
        await self.rerun(changed)
        self.log.actions.append(time.monotonic() - started)
        self.log.on_page.append(self.page_name)

    @property
    def page_name(self) -> str:
        """The page as figures name it: a script without pages ("") is the bare page."""
        return self.page or "bare"

    async def rerun(self, changed: str | None = None, *, fragment_id: str = "") -> None:
        """Run the page again with `changed`'s new value (its fragment alone, if it is in
        one), or the fragment `fragment_id` (as its auto-rerun asks), or the whole page."""
        fragment_id = self.widgets[changed].fragment_id if changed else fragment_id
        if not fragment_id:
            self.widgets.clear()
        message = BackMsg()
        state = message.rerun_script
        state.query_string = self.query
        state.page_name = self.page
        state.page_script_hash = self.page_hash
        state.fragment_id = fragment_id
        state.cached_message_hashes.extend(self.cache)
        state.context_info.url = self.url.replace("ws", "http", 1).replace(
            "/_stcore/stream", "/" + self.page
        )
        for widget_id, (kind, value) in self.values.items():
            widget = state.widget_states.widgets.add()
            widget.id = widget_id
            if kind == "double_array_value":
                widget.double_array_value.data.extend(value)
            elif kind == "string_array_value":
                widget.string_array_value.data.extend(value)
            else:
                setattr(widget, kind, value)
        await self.socket.send(message.SerializeToString())
        drawn = await asyncio.wait_for(self.read_until_finished(), RUN_TIMEOUT)
        if fragment_id and drawn:
            self.forget_undrawn(drawn)

    def forget_undrawn(self, drawn: dict[str, tuple[int, ...]]) -> None:
        """After a fragment run, drop the widgets of its region that it did not draw again.

        The frontend clears what a fragment run did not redraw, a nested fragment that is no
        longer called included; a widget of it would name a fragment the server has forgotten,
        and the server ignores a rerun of a fragment it does not know.
        """
        paths = list(drawn.values())
        region = paths[0]
        for path in paths[1:]:
            while path[: len(region)] != region:
                region = region[:-1]
        for widget_id, widget in list(self.widgets.items()):
            if widget.delta_path[: len(region)] == region and widget_id not in drawn:
                del self.widgets[widget_id]

    async def read_until_finished(self) -> dict[str, tuple[int, ...]]:
        """Read the run's messages; return where each element it drew landed, by widget id."""
        drawn: dict[str, tuple[int, ...]] = {}
        while True:
            raw = await self.socket.recv()
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            path = tuple(msg.metadata.delta_path)
            kind = msg.WhichOneof("type")
            if kind == "ref_hash":
                msg.ParseFromString(self.cache[msg.ref_hash])
                kind = msg.WhichOneof("type")
            elif msg.metadata.cacheable:
                self.cache[msg.hash] = raw
            if kind == "new_session":
                self.page_hash = msg.new_session.page_script_hash
            elif kind == "navigation":
                self.page_hash = msg.navigation.page_script_hash or self.page_hash
            elif kind == "auto_rerun":
                self.auto_rerun = (msg.auto_rerun.fragment_id, msg.auto_rerun.interval)
            elif kind == "delta":
                drawn[self.read_delta(msg.delta, path) or f"element at {path}"] = path
            elif kind == "script_finished":
                if msg.script_finished != FINISHED.FINISHED_EARLY_FOR_RERUN:
                    self.log.runs += 1
                    return drawn

    def read_delta(self, delta, path: tuple[int, ...]) -> str | None:
        """Note an exception or a widget the delta draws; return the widget's id, if any."""
        if delta.WhichOneof("type") != "new_element":
            return None
        element = delta.new_element
        kind = element.WhichOneof("type")
        if kind == "progress":
            self.progress = element.progress.text
        if kind == "exception":
            error = element.exception
            where = f" at {error.stack_trace[-2].strip()}" if len(error.stack_trace) > 1 else ""
            # The page and the last widget moved: a server that hides error details (this
            # project's config) sends neither type nor trace, so this is what tells where.
            after = f", after {self.log.acted_on[-1]!r}" if self.log.acted_on else ""
            self.log.exceptions.append(f"[{self.page}{after}] {error.type}: {error.message}{where}")
            return None
        if kind not in {"slider", "selectbox", "radio", "checkbox", "button_group", "number_input"}:
            return None
        proto = getattr(element, kind)
        if proto.label in IGNORED_LABELS or proto.disabled:
            return None
        self.widgets[proto.id] = Widget(kind, proto, delta.fragment_id, path)
        if proto.id not in self.values or getattr(proto, "set_value", False):
            current = current_value(kind, proto)
            if current is not None:
                self.values[proto.id] = current
        return proto.id

    def pick_widget(self) -> str | None:
        choices = [w for w in self.widgets if w in self.values]
        self.rng.shuffle(choices)
        for widget_id in choices:
            changed = next_value(self.widgets[widget_id], self.values[widget_id], self.rng)
            if changed is not None:
                self.values[widget_id] = changed
                return widget_id
        return None


def current_value(kind: str, proto) -> tuple[str, object] | None:
    """The widget state the frontend would send for a widget as the server drew it."""
    if kind == "slider":
        if proto.options and proto.set_value and proto.raw_value:
            # A select_slider set from the script (session state) says its value as text.
            return "string_array_value", list(proto.raw_value)
        if proto.options:
            index = list(proto.value if proto.set_value else proto.default)
            return "string_array_value", [proto.options[int(i)] for i in index]
        return "double_array_value", list(proto.value if proto.set_value else proto.default)
    if kind in ("selectbox", "radio"):
        if not proto.options:
            return None
        index = proto.default[0] if proto.default else 0
        return "string_value", proto.raw_value if proto.set_value else proto.options[index]
    if kind == "checkbox":
        return "bool_value", proto.value if proto.set_value else proto.default
    if kind == "button_group":
        options = [o.content for o in proto.options]
        if proto.set_value:
            return "string_array_value", list(proto.raw_values)
        return "string_array_value", [options[i] for i in proto.default]
    if kind == "number_input":
        return "double_value", proto.value if proto.set_value else proto.default
    return None


def next_value(widget: Widget, current: tuple[str, object], rng: random.Random):
    """A nudge a person would make: a slider moved a step or two, another option, a toggle."""
    proto, (value_type, value) = widget.proto, current
    if widget.kind == "slider" and not proto.options:
        step = (proto.step or 1.0) * rng.choice((-2, -1, 1, 2))
        for move in (step, -step):  # at an end of the range, the nudge goes the other way
            moved = sorted(min(max(v + move, proto.min), proto.max) for v in value)
            if moved != list(value):
                return value_type, moved
        return None
    if widget.kind == "slider":
        options = list(proto.options)
        index = options.index(value[0]) if value and value[0] in options else 0
        for moved in (index + rng.choice((-1, 1)), index - 1, index + 1):
            if 0 <= moved < len(options) and moved != index:
                return value_type, [options[moved]]
        return None
    if widget.kind in ("selectbox", "radio"):
        others = [o for o in proto.options if o != value]
        return (value_type, rng.choice(others)) if others else None
    if widget.kind == "checkbox":
        return value_type, not value
    if widget.kind == "button_group":
        options = [o.content for o in proto.options]
        others = [o for o in options if [o] != list(value)]
        return (value_type, [rng.choice(others)]) if others else None
    if widget.kind == "number_input":
        step = proto.step or 1.0
        moved = value + rng.choice((-1, 1)) * step
        if (proto.has_min and moved < proto.min) or (proto.has_max and moved > proto.max):
            moved = value - (moved - value)
        return value_type, moved
    return None


def worker_cookie(http_url: str) -> str | None:
    """The load balancer's affinity cookie, as a browser gets it with the page's HTML."""
    with urllib.request.urlopen(http_url + "/", timeout=RUN_TIMEOUT) as response:
        cookies = [c.split(";")[0] for c in response.headers.get_all("Set-Cookie") or []]
    return "; ".join(cookies) or None


async def audience(
    port: int,
    links,
    viewers: int,
    seconds: float,
    think: float,
    spread: float,
    seed: int = 0,
    min_actions: int = 0,
    actions_per_page: int | None = None,
) -> list[ViewerLog]:
    """`viewers` tabs, dealt `links` round-robin, arriving within `spread` s: each stays on its
    page (`Viewer.run`), or, given `actions_per_page`, tours every link from its own
    (`Viewer.tour`, back to back: `think` and `min_actions` do not apply)."""
    rng = random.Random(seed)
    http_url = f"http://127.0.0.1:{port}"
    url = f"ws://127.0.0.1:{port}/_stcore/stream"
    start = time.monotonic()
    until = start + spread + seconds

    async def one(index: int) -> ViewerLog:
        await asyncio.sleep(rng.uniform(0, spread))
        page, query = links[index % len(links)]
        cookie = await asyncio.to_thread(worker_cookie, http_url)
        viewer = Viewer(url, page, query, cookie, random.Random(seed * 1000 + index))
        if actions_per_page is not None:
            return await viewer.tour(links, until, actions_per_page)
        return await viewer.run(until, think, min_actions)

    return await asyncio.gather(*(one(i) for i in range(viewers)))
