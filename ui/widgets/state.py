"""Page state that survives a link: widget keys, URL query parameters and their validation.

Every widget that defines a view gets its key from a `PageState`, which seeds the widget from
the URL on first load (validated and capped: a link is untrusted input), remembers the value
across page switches, and writes the view back into the URL as it changes, so a copied link
reopens the same example.

    view = PageState("scaled_dot_product")
    n_q = st.slider("Queries", 1, 8, key=view.int_key("n_q", 3, lo=1, hi=8))
    ...
    view.sync_url()  # at the end of the page: writes the URL and any notices

Pages must not also pass `value=`/`index=` to a keyed widget: the seeded session state is the
value, and Streamlit warns when both are given.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st
from streamlit.errors import StreamlitAPIException
from streamlit.runtime.scriptrunner import get_script_run_ctx

# A link is typed by a stranger: no parameter may make the server read or allocate much.
MAX_PARAM_CHARS = 2_000
MAX_URL_MATRIX_CELLS = 64

PRESENT_PARAM = "present"
PRESENT_KEY = "app.present"
FIGURE_FORMAT_KEY = "app.figure_format"
# Parameters every link of the session carries, whatever the page (a talk's room, ui.widgets.room).
LINK_EXTRAS_KEY = "app.link_extras"
TABLES_KEY = "app.chart_tables"  # "Show chart data as tables": a table under every chart
_SHADOW_PREFIX = "_remembered."


def widget_key(page: str, name: str) -> str:
    """The session-state key of a page's widget: `"multi_head.num_heads"`."""
    return f"{page}.{name}"


@dataclass(frozen=True)
class _Param:
    key: str
    default: Any
    encode: Callable[[Any], str]
    parse: Callable[[str], Any]
    fit: Callable[[Any], Any]
    # Longer raw values are refused before they are parsed: a link is typed by a stranger.
    max_chars: int = MAX_PARAM_CHARS


class PageState:
    """The URL-backed state of one page. Create one per page run."""

    def __init__(self, page: str):
        self.page = page
        self._params: dict[str, _Param] = {}
        self.notices: list[str] = []
        self._matrices: dict[str, str | None] = {}
        self._notice_slot = None

    def key(self, name: str) -> str:
        return widget_key(self.page, name)

    # -- typed parameters -------------------------------------------------------------------

    def int_key(self, name: str, default: int, *, lo: int, hi: int) -> str:
        """Key of an integer widget in [lo, hi]."""

        def parse(raw: str) -> int:
            value = int(raw)
            if not lo <= value <= hi:
                raise ValueError(f"must be between {lo} and {hi}")
            return value

        def fit(value: Any) -> int:
            return int(min(max(int(value), lo), hi))

        return self._bind(name, default, parse, fit, str)

    def float_key(self, name: str, default: float, *, lo: float, hi: float) -> str:
        """Key of a float widget in [lo, hi]."""

        def parse(raw: str) -> float:
            value = float(raw)
            if not math.isfinite(value) or not lo <= value <= hi:
                raise ValueError(f"must be a number between {lo:g} and {hi:g}")
            return value

        def fit(value: Any) -> float:
            return float(min(max(float(value), lo), hi))

        return self._bind(name, default, parse, fit, lambda v: f"{v:g}")

    def choice_key(self, name: str, default: Any, options: Sequence[Any]) -> str:
        """Key of a selectbox/radio whose value is one of `options` (matched by str)."""
        by_text = {str(option): option for option in options}

        def parse(raw: str) -> Any:
            if raw not in by_text:
                shown = ", ".join(list(by_text)[:8])
                raise ValueError(f"must be one of {shown}")
            return by_text[raw]

        def fit(value: Any) -> Any:
            return by_text.get(str(value), default)

        return self._bind(name, default, parse, fit, str)

    def multi(self, name: str, default: Sequence[Any], options: Sequence[Any]) -> str:
        """Key of a multiselect: a comma-separated list in the URL."""
        by_text = {str(option): option for option in options}

        def parse(raw: str) -> list[Any]:
            items = [item for item in raw.split(",") if item != ""]
            unknown = [item for item in items if item not in by_text]
            if unknown:
                raise ValueError(f"{unknown[0]!r} is not one of the options")
            return [by_text[item] for item in items]

        def fit(value: Any) -> list[Any]:
            return [by_text[str(item)] for item in value if str(item) in by_text]

        return self._bind(
            name, list(default), parse, fit, lambda v: ",".join(str(item) for item in v)
        )

    def ids_key(
        self, name: str, options: Sequence[str], read: Callable[[str], tuple[list[str], list[str]]]
    ) -> str:
        """Key of a multiselect of ids (`?quiz=sdpa.winner,mask.row2`) that keeps the valid ones.

        `read(raw)` returns the ids to keep and one sentence for each id it dropped; a link that
        names one bad id still opens the others, and says what it dropped.
        """

        def parse(raw: str) -> list[str]:
            kept, problems = read(raw)
            self.notices.extend(f"The link's `{name}`: {problem}" for problem in problems)
            return [item for item in kept if item in options]

        def fit(value: Any) -> list[str]:
            return [str(item) for item in value if str(item) in options]

        return self._bind(name, [], parse, fit, ",".join)

    def bool_key(self, name: str, default: bool) -> str:
        """Key of a checkbox or toggle: `1`/`0` in the URL."""

        def parse(raw: str) -> bool:
            if raw.lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError("must be 1 or 0")

        return self._bind(name, default, parse, bool, lambda v: "1" if v else "0")

    def text_key(self, name: str, default: str, *, max_chars: int = 300) -> str:
        """Key of a text input, cut to `max_chars` (a link may carry that much of it, even past
        MAX_PARAM_CHARS: a page that reads long texts says how long)."""

        def parse(raw: str) -> str:
            if len(raw) > max_chars:
                raise ValueError(f"is longer than {max_chars:,} characters")
            return raw

        return self._bind(
            name, default, parse, lambda v: str(v)[:max_chars], str,
            max_chars=max(max_chars, MAX_PARAM_CHARS),
        )  # fmt: skip

    def value(self, name: str) -> Any:
        """The current value of a bound parameter, fitted to its range or options as binding
        fits it. A fragment's rerun binds nothing, and a select box whose options follow the
        text (a token's "3 · cat") hands back a label they no longer hold as a plain string;
        read before its widget is drawn, such a value is put back in range."""
        param = self._params[name]
        current = st.session_state[param.key]
        fitted = _fitted(param, current)
        if fitted is not current and fitted != current:
            with contextlib.suppress(StreamlitAPIException):  # its widget is drawn: run keeps it
                st.session_state[param.key] = fitted
        return fitted

    def set(self, name: str, value: Any) -> None:
        """Change a bound parameter before its widget is drawn (presets use this)."""
        st.session_state[self.key(name)] = value
        st.session_state[_SHADOW_PREFIX + self.key(name)] = value

    def follow_link(self, names: Sequence[str]) -> None:
        """Take the bound parameters `names` from the URL again if it holds new values for them.

        A parameter is read from the URL when the page first binds it in a session; a link
        followed later in the session (an `st.page_link` on another page) brings values the URL
        did not hold when last read, and those replace the bound ones (checked like any link).
        A URL that only lags behind the page (a run that ended before `sync_url`) is not new.
        """
        in_url = tuple(st.query_params.get(name) for name in names)
        seen = _SHADOW_PREFIX + self.key("link:" + ",".join(names))
        # The first time, binding has just read the URL: only remember what it held.
        new = seen in st.session_state and in_url != st.session_state[seen]
        if new and any(raw is not None for raw in in_url):
            for name, raw in zip(names, in_url, strict=True):
                param = self._params[name]
                if raw is None:
                    self.set(name, param.default)
                    continue
                try:
                    if len(raw) > param.max_chars:
                        raise ValueError(f"is longer than {param.max_chars:,} characters")
                    self.set(name, param.parse(raw))
                except (TypeError, ValueError) as error:
                    self.notices.append(f"The link's `{name}` was ignored: it {error}.")
                    self.set(name, param.default)
        st.session_state[seen] = in_url

    # -- matrices in the URL ----------------------------------------------------------------

    def matrix_from_url(self, name: str, *, max_rows: int, max_cols: int) -> np.ndarray | None:
        """A small matrix from the URL (`rows;rows` of comma-separated numbers), if valid."""
        raw = st.query_params.get(name)
        if raw is None:
            return None
        try:
            return decode_matrix(raw, max_rows=max_rows, max_cols=max_cols)
        except ValueError as error:
            self.notices.append(f"The link's `{name}` was ignored: {error}.")
            return None

    def put_matrix(self, name: str, matrix: np.ndarray | None) -> None:
        """Put a small matrix into the URL at the next `sync_url` (None removes it)."""
        if matrix is None or matrix.size > MAX_URL_MATRIX_CELLS:
            self._matrices[name] = None
        else:
            self._matrices[name] = encode_matrix(matrix)

    # -- URL ----------------------------------------------------------------------------------

    def sync_url(self) -> None:
        """Write every parameter that differs from its default into the URL, and the notices."""
        self.write_url()
        self._write_notices()

    def write_url(self) -> None:
        """Write every parameter that differs from its default into the URL.

        A fragment calls this at its end: when only the fragment reruns, the page's closing
        `sync_url` does not run, and the link must still follow the widgets inside it.
        """
        wanted: dict[str, str] = dict(st.session_state.get(LINK_EXTRAS_KEY, {}))
        if is_presenting():
            wanted[PRESENT_PARAM] = "1"
        for name, param in self._params.items():
            value = st.session_state.get(param.key, param.default)
            st.session_state[_SHADOW_PREFIX + param.key] = value
            if value != param.default:
                wanted[name] = param.encode(value)
        for name, encoded in self._matrices.items():
            if encoded is not None:
                wanted[name] = encoded
        if st.query_params.to_dict() != wanted:
            st.query_params.from_dict(wanted)

    def show_notices(self) -> None:
        """Reserve the place, near the top of the page, where refused link parts are explained.

        The notices are written there by `sync_url`, once every parameter has been read.
        """
        self._notice_slot = st.container()

    def _write_notices(self) -> None:
        slot = self._notice_slot or st.container()
        for notice in self.notices:
            slot.warning(notice, icon=":material/link_off:")

    def _bind(
        self,
        name: str,
        default: Any,
        parse: Callable[[str], Any],
        fit: Callable[[Any], Any],
        encode: Callable[[Any], str],
        max_chars: int = MAX_PARAM_CHARS,
    ) -> str:
        key = self.key(name)
        param = self._params[name] = _Param(key, default, encode, parse, fit, max_chars)
        if key in st.session_state:
            # Restated every run: a widget whose range or options follow another control
            # would otherwise restart at its minimum when that range changes.
            st.session_state[key] = _fitted(param, st.session_state[key])
            return key
        st.session_state[key] = self._initial(name, key, default, parse, max_chars)
        return key

    def _initial(
        self, name: str, key: str, default: Any, parse: Callable[[str], Any], max_chars: int
    ) -> Any:
        raw = st.query_params.get(name)
        if raw is not None:
            if len(raw) > max_chars:
                self.notices.append(
                    f"The link's `{name}` is {len(raw):,} characters long, more than a link may "
                    f"carry here ({max_chars:,}); the default is shown instead."
                )
                return default
            try:
                return parse(raw)
            except (TypeError, ValueError) as error:
                shown = raw if len(raw) <= 40 else raw[:40] + "…"
                self.notices.append(
                    f"The link's `{name}={shown}` was ignored: it {error}. "
                    f"Showing the default ({encode_default(default)}) instead."
                )
                return default
        return st.session_state.get(_SHADOW_PREFIX + key, default)


def _fitted(param: _Param, value: Any) -> Any:
    try:
        return param.fit(value)
    except (TypeError, ValueError):
        return param.default


def encode_default(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def encode_matrix(matrix: np.ndarray) -> str:
    """`1,0;0,1` for [[1, 0], [0, 1]], with the shortest text that round-trips float64."""
    return ";".join(",".join(repr(float(x)).removesuffix(".0") for x in row) for row in matrix)


def decode_matrix(raw: str, *, max_rows: int, max_cols: int) -> np.ndarray:
    if len(raw) > MAX_PARAM_CHARS:
        raise ValueError("it is too long")
    rows = [row.split(",") for row in raw.split(";")]
    if len(rows) > max_rows or any(len(row) > max_cols for row in rows):
        raise ValueError(f"it is larger than {max_rows}×{max_cols}")
    if len({len(row) for row in rows}) != 1:
        raise ValueError("its rows have different lengths")
    try:
        matrix = np.array([[float(x) for x in row] for row in rows])
    except ValueError:
        raise ValueError("it holds something that is not a number") from None
    if not np.isfinite(matrix).all():
        raise ValueError("it holds NaN or infinity")
    return matrix


def is_presenting() -> bool:
    """Whether presenter mode is on (the sidebar toggle, or `?present=1` in the link)."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return False  # a figure built outside a page run (tests, benchmarks)
    if PRESENT_KEY not in st.session_state:
        st.session_state[PRESENT_KEY] = st.query_params.get(PRESENT_PARAM) in {"1", "true"}
    return bool(st.session_state[PRESENT_KEY])


def write_url_after_fragment(view: PageState) -> None:
    """The end of a fragment: write the link, but only when the fragment reran on its own.

    In a full run the page's closing `sync_url` writes the link once every parameter is bound;
    writing it from a fragment half-way down would drop the link's parameters of the widgets
    below, before those widgets had read them.
    """
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is not None and ctx.fragment_ids_this_run:
        view.write_url()


def stored(view: PageState, name: str, default: Any) -> Any:
    """What a page's widget last held, or `default` if it has not been drawn (callbacks that run
    before the widget, like a preset's, read it this way)."""
    return st.session_state.get(view.key(name), default)
