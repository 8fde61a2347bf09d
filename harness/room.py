"""A talk's room over Streamlit's websocket protocol: the speaker and the audience without a
browser, for the serving tests (tests/test_room_serving.py) and the room benchmark
(bench/bench_room.py).

A `RoomViewer` is a harness `Viewer` that also sees buttons and what each run wrote: it starts
a room, answers a question (a radio, then the lock-in button, inside the question's fragment, as
a phone sends them), reruns the speaker's count fragment as its one-second refresh does, and
reads the count it shows.
"""

from __future__ import annotations

import random
import re

from harness.stream import Viewer, Widget

COUNT = re.compile(r"\*\*(\d+) answers? so far\*\*")


class RoomViewer(Viewer):
    """One tab in a room: the audience's phone or the speaker's laptop."""

    def __init__(self, url: str, page: str, query: str, cookie: str | None, seed: int = 0):
        super().__init__(url, page, query, cookie, random.Random(seed))
        self.buttons: dict[str, Widget] = {}
        self.texts: list[str] = []  # what the last run (or fragment run) wrote, in order

    async def rerun(self, changed: str | None = None, *, fragment_id: str = "") -> None:
        self.texts = []
        if changed in self.buttons:  # the harness's Viewer knows value widgets only
            changed, fragment_id = None, self.buttons[changed].fragment_id
        if not (changed or fragment_id):
            self.buttons.clear()
        await super().rerun(changed, fragment_id=fragment_id)

    def read_delta(self, delta, path: tuple[int, ...]) -> str | None:
        drawn = super().read_delta(delta, path)
        if delta.WhichOneof("type") != "new_element":
            return drawn
        element = delta.new_element
        kind = element.WhichOneof("type")
        if kind == "button":
            self.buttons[element.button.id] = Widget(
                "button", element.button, delta.fragment_id, path
            )
            return element.button.id
        if kind == "markdown":
            self.texts.append(element.markdown.body)
        elif kind == "alert":
            self.texts.append(element.alert.body)
        elif kind == "code":
            self.texts.append(element.code.code_text)
        return drawn

    def _one(self, widgets: dict[str, Widget], key: str) -> str:
        found = [i for i, w in widgets.items() if i.endswith(key) or w.proto.label == key]
        if len(found) != 1:
            raise LookupError(f"{len(found)} widgets named {key!r} on {self.page}")
        return found[0]

    async def press(self, key: str) -> None:
        """Click the button whose key (or label) is `key`: its fragment alone reruns."""
        button = self._one(self.buttons, key)
        self.values[button] = ("trigger_value", True)
        try:
            await self.rerun(button)
        finally:
            self.values.pop(button, None)

    async def answer(self, question: str, option: int) -> None:
        """Choose option `option` (from 0) of `question` ("sdpa.winner") and lock it in."""
        (choice,) = [i for i in self.widgets if f"-quiz.{question}.choice." in i]
        self.values[choice] = ("string_value", self.widgets[choice].proto.options[option])
        await self.rerun(choice)
        await self.press(f"quiz.{question}.lock")

    async def count(self, question: str) -> int | None:
        """What the speaker's screen says now: rerun the count fragment of `question`, as its
        refresh does, and read the number of answers (None once revealed)."""
        reveal = self._one(self.buttons, f"quiz.{question}.reveal")
        await self.rerun(fragment_id=self.buttons[reveal].fragment_id)
        counts = [int(m.group(1)) for t in self.texts if (m := COUNT.fullmatch(t))]
        return counts[0] if counts else None

    def said(self, pattern: str) -> list[str]:
        return [text for text in self.texts if re.search(pattern, text)]
