"""A talk's room on every page: the speaker starts it, the audience joins by link, QR code or
code, and the page's questions are answered together (ui.widgets.quiz asks them).

The room lives in the deployment's store (server.room_store), never in this process, so the
workers behind a load balancer share it; its rules (codes, the speaker's secret, guessing) are
server.rooms'. Without a room nothing is read or written anywhere.

    ?room=BCDF2345              an audience link: joins the room, keeps it from page to page
    ?room=BCDF2345&host=SECRET  the speaker's link (presenter mode): reveal, ask again, close

Session keys: `room.code` (the room joined), `room.secret` (the speaker's), `room.notice` (why
a link's room was not joined), `room.seen` (the link's room and host, last read), `room.viewer`
(who this session is to the room).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlencode, urlparse

import numpy as np
import streamlit as st

from server import room_store, rooms
from server.room_store import RoomStore, Tally
from server.rooms import RoomError
from ui.widgets import describe, render
from ui.widgets.byte_cache import MB, bounded_by_bytes
from ui.widgets.describe import ChartTable
from ui.widgets.state import (
    LINK_EXTRAS_KEY,
    PRESENT_KEY,
    PRESENT_PARAM,
    TABLES_KEY,
    is_presenting,
)
from ui.widgets.theme import BAR_COLOR, font_size

ROOM_PARAM, HOST_PARAM = "room", "host"
CODE_KEY, SECRET_KEY, NOTICE_KEY, SEEN_KEY = "room.code", "room.secret", "room.notice", "room.seen"
VIEWER_KEY, STARTED_KEY, TYPED_KEY = "room.viewer", "room.started", "room.typed"
# How often the speaker's count and the audience's waiting answers look at the store (s): the
# speaker sees an answer within about a second; fifty phones cost 25 small reads a second.
SPEAKER_REFRESH_S, AUDIENCE_REFRESH_S = 1.0, 2.0
QR_WIDTH = 300  # px: scanned from the back of a hall off a projector
RIGHT_BAR_COLOR = "#009e73"  # Okabe & Ito's green; the right bar is also labelled "right"


@dataclass(frozen=True)
class Room:
    """The room this session is in, as the session holds it."""

    code: str
    secret: str | None  # the speaker's; None for the audience

    @property
    def shown(self) -> str:
        return rooms.shown_code(self.code)

    @property
    def speaker(self) -> bool:
        return self.secret is not None


@bounded_by_bytes(MB, name="room store", lane=None, size=lambda _: 1024, max_entries=4)
def _opened(url: str) -> RoomStore:
    # Dropped (a cache cleared), it is opened again: the store keeps nothing the process needs.
    return room_store.open_store(url)


def store() -> RoomStore:
    """The deployment's room store, opened once per process (ATTENTION_EXPLORER_ROOM_STORE)."""
    return _opened(room_store.store_url())


def current() -> Room | None:
    code = st.session_state.get(CODE_KEY)
    return Room(code, st.session_state.get(SECRET_KEY)) if code else None


def viewer() -> str:
    """This viewer, as the room knows them: an id the server made for this session."""
    if VIEWER_KEY not in st.session_state:
        st.session_state[VIEWER_KEY] = rooms.new_viewer()
    return st.session_state[VIEWER_KEY]


def _address() -> str:
    """Where this viewer's requests come from, for the limit on guessed codes. Behind a proxy on
    this machine (HAProxy in `make serve`) that is the last address it forwarded."""
    direct = st.context.ip_address
    direct = direct if isinstance(direct, str) else ""  # no client at all under AppTest
    try:
        local = not direct or ipaddress.ip_address(direct).is_loopback
    except ValueError:
        local = False
    forwarded = st.context.headers.get("X-Forwarded-For")
    forwarded = forwarded.split(",")[-1].strip() if isinstance(forwarded, str) else ""
    return (forwarded if local and forwarded else direct) or "unknown"


def follow_link() -> None:
    """Join the room a link names, once per link: the URL keeps the room from page to page."""
    seen = (st.query_params.get(ROOM_PARAM), st.query_params.get(HOST_PARAM))
    if seen[0] is not None and seen != st.session_state.get(SEEN_KEY):
        st.session_state[SEEN_KEY] = seen
        room = current()
        # The room this session is in, written into its own URL: nothing to look up.
        if room is None or (rooms.normalised_code(seen[0]), seen[1]) != (room.code, room.secret):
            _join(*seen)
    _keep_in_link()


def _join(raw: str, secret: str | None) -> None:
    try:
        code = rooms.join_room(
            store(), raw[:40], session=viewer(), address=_address(), now=room_store.now()
        )
    except RoomError as error:
        _leave()
        st.session_state[NOTICE_KEY] = str(error)
        return
    speaker = rooms.is_host(store(), code, secret, room_store.now())
    st.session_state.update({CODE_KEY: code, SECRET_KEY: secret if speaker else None})
    st.session_state.pop(NOTICE_KEY, None)
    if speaker:
        st.session_state[PRESENT_KEY] = True


def _leave() -> None:
    for key in (CODE_KEY, SECRET_KEY):
        st.session_state.pop(key, None)
    _keep_in_link()


def _keep_in_link() -> None:
    """The room's part of every link this session writes (ui.widgets.state.PageState)."""
    room = current()
    extras = {ROOM_PARAM: room.code} if room else {}
    if room and room.speaker:
        extras[HOST_PARAM] = room.secret
    st.session_state[LINK_EXTRAS_KEY] = extras


def _start() -> None:
    st.session_state[STARTED_KEY] = True
    host = rooms.start_room(store(), room_store.now())
    st.session_state.update({CODE_KEY: host.code, SECRET_KEY: host.secret})
    st.session_state[SEEN_KEY] = (host.code, host.secret)
    _keep_in_link()


def _close(room: Room) -> None:
    try:
        rooms.close_room(store(), room.code, room.secret, room_store.now())
    except RoomError:
        pass  # already closed, or expired: leaving is all there is left to do
    _leave()


def read_question(
    room: Room, key: str, viewer: str | None = None
) -> tuple[Tally, str | None] | None:
    """A question's tally in the room and `viewer`'s own answer, read at each refresh; None when
    the store does not answer (said on the page). A room that is gone (closed elsewhere, idle
    for 12 hours) is left, and the page runs again without it."""
    try:
        rooms_store = store()
        tally = rooms_store.tally(room.code, key)
        mine = rooms_store.viewer_choice(room.code, key, viewer) if viewer else None
        here = rooms_store.room_host(room.code, room_store.now()) is not None
    except Exception:  # the store is another program: its failure must not break the page
        st.warning(
            "The room's store does not answer right now; retrying.", icon=":material/sync_problem:"
        )
        return None
    if not here:
        gone()
        st.rerun()
    return tally, mine


def gone(error_message: str = rooms.OUTCOMES[room_store.GONE]) -> None:
    """The room closed under this viewer: leave it and say so."""
    _leave()
    st.session_state[NOTICE_KEY] = error_message


# -- the sidebar and the top of the page ---------------------------------------------------------


def sidebar() -> None:
    room = current()
    with st.sidebar:
        if room and room.speaker:
            st.markdown(f"**Room {room.shown}** is open.")
            with st.expander("Your speaker link (keep it off the screen)", icon=":material/key:"):
                st.caption("It reveals and resets this room's answers: open it to continue.")
                st.code(_link(room, speaker=True), language=None, wrap_lines=True)
            st.button("Close the room", icon=":material/close:", on_click=_close, args=(room,))
        elif room:
            st.button("Leave the room", icon=":material/logout:", on_click=_leave)
        elif is_presenting():
            start_button("room.start")
        else:
            st.text_input(
                "Join a talk's room",
                key=TYPED_KEY,
                max_chars=12,
                placeholder="the code on the slide",
                on_change=_join_typed,
                help="Your predictions then go to the speaker, without your name.",
            )


def _join_typed() -> None:
    typed = st.session_state.pop(TYPED_KEY, "")
    if typed.strip():
        _join(typed, None)
        _keep_in_link()


def start_button(key: str) -> None:
    """*Start a room*, where a speaker looks for it: the sidebar, and a page's questions (in
    presenter mode the sidebar starts closed)."""
    st.button(
        "Start a room",
        key=key,
        icon=":material/groups:",
        on_click=_start,
        help="The audience answers this talk's questions on their phones; you reveal the "
        "room's answers.",
    )


def redraw_if_started() -> None:
    """A room started from a button inside a fragment: the whole page runs again, so that its
    top shows the QR code and its sidebar the room."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    if st.session_state.pop(STARTED_KEY, False) and get_script_run_ctx().fragment_ids_this_run:
        st.rerun()


def banner() -> None:
    """What a room shows at the top of a page: the QR code for the speaker, the room for the
    audience, or why a link's room was not joined."""
    st.session_state.pop(STARTED_KEY, None)  # a whole run draws the room as it is
    notice = st.session_state.get(NOTICE_KEY)
    if notice:
        st.warning(notice, icon=":material/group_off:")
    room = current()
    if room is None:
        return
    if not room.speaker:
        st.info(
            f"You are in room **{room.shown}**: your locked-in predictions go to the speaker, "
            "without your name.",
            icon=":material/groups:",
        )
        return
    link = _link(room, speaker=False)
    with st.expander(f"Room {room.shown}: answer on your phone", expanded=True):
        picture, words = st.columns([1, 2], vertical_alignment="center")
        picture.image(qr_svg(link), width=QR_WIDTH, alt=f"QR code that opens {link}")
        words.markdown(f"## {room.shown}")
        words.markdown(f"Scan the code, or open **{link}**")
        if urlparse(link).hostname in {"localhost", "127.0.0.1", "::1"}:
            words.warning(
                "This link names this computer itself, which phones cannot open: open the app "
                "at the computer's network address (its IP or name) and start the room there.",
                icon=":material/wifi_off:",
            )


def _link(room: Room, *, speaker: bool) -> str:
    """The link to this view in the room: the page's own parameters, the room, and for the
    speaker the secret and presenter mode (an audience link never carries either)."""
    page = (st.context.url or "").split("?")[0]
    params = {
        name: value
        for name, value in st.query_params.to_dict().items()
        if name not in (ROOM_PARAM, HOST_PARAM, PRESENT_PARAM)
    }
    params[ROOM_PARAM] = room.code
    if speaker:
        params.update({HOST_PARAM: room.secret, PRESENT_PARAM: "1"})
    return f"{page}?{urlencode(params)}"


@bounded_by_bytes(MB, name="room QR codes", lane=None, size=len, max_entries=64)
def qr_svg(link: str) -> str:
    """The QR code of `link` as SVG, drawn here (segno; no network), dark on white whatever the
    theme, as scanners expect."""
    import segno

    return segno.make(link, error="m").svg_inline(scale=6, border=4, dark="#000", light="#fff")


# -- the room's answers --------------------------------------------------------------------------


def answers_figure(options: tuple[str, ...], counts: tuple[int, ...], correct: frozenset[int]):
    """A horizontal bar per option, the right one(s) green and labelled, each with its count
    and share of the viewers who answered."""
    answered = max(sum(counts), 1)
    letters = [chr(ord("A") + i) for i in range(len(options))]
    labels = [
        f"{letter}. {_short(option)}" for letter, option in zip(letters, options, strict=True)
    ]
    text = [
        f"{n} ({100 * n / answered:.0f}%)" + (" · right" if i in correct else "")
        for i, n in enumerate(counts)
    ]
    colors = [RIGHT_BAR_COLOR if i in correct else BAR_COLOR for i in range(len(options))]
    figure = render.figure(
        [{
            "type": "bar", "orientation": "h", "x": list(counts), "y": labels, "text": text,
            "textposition": "auto", "marker": {"color": colors},
            "hovertemplate": "%{y}: %{x} viewers<extra></extra>",
        }],
        {
            "title": {"text": "The room's answers", "font": {"size": font_size() + 3}},
            "xaxis": {"title": {"text": "viewers"}, "rangemode": "tozero", "dtick": _tick(counts)},
            "yaxis": {"autorange": "reversed", "automargin": True},
            "height": 120 + 48 * len(options),
            "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        },
    )  # fmt: skip
    right = "; ".join(labels[i] for i in sorted(correct))
    summary = (
        f"Bar chart of the room's {sum(counts)} answers: "
        + "; ".join(f"{label}: {t}" for label, t in zip(labels, text, strict=True))
        + f". The right answer: {right}."
    )
    return describe.attach(figure, summary, answers_table(options, counts, correct))


def answers_table(
    options: tuple[str, ...], counts: tuple[int, ...], correct: frozenset[int]
) -> ChartTable:
    answered = max(sum(counts), 1)
    letters = [chr(ord("A") + i) for i in range(len(options))]
    return ChartTable(
        np.array([[n, round(100 * n / answered, 1)] for n in counts]),
        tuple(
            f"{letter}. {option}" + (" (right)" if i in correct else "")
            for i, (letter, option) in enumerate(zip(letters, options, strict=True))
        ),
        ("viewers", "% of answers"),
        row_title="option",
        title="The room's answers",
    )


def show_answers(options: tuple[str, ...], tally: Tally, correct: frozenset[int], key: str) -> None:
    """The room's spread: the chart, then its numbers as a table (always: a talk reads both)."""
    counts = tuple(rooms.spread(tally, len(options)))
    render.show(
        render.cached(answers_figure, options, counts, correct), filename="room-answers", key=key
    )
    if not st.session_state.get(TABLES_KEY):  # else `show` has drawn it
        st.dataframe(answers_table(options, counts, correct).arrow, key=f"{key}.table")


def _short(option: str, limit: int = 16) -> str:
    # Short enough to leave a phone's chart its bars: the table below names each option whole.
    return option if len(option) <= limit else option[: limit - 1] + "…"


def _tick(counts: tuple[int, ...]) -> int:
    return max(1, -(-max(counts, default=1) // 5))
