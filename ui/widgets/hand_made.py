"""Q, K, V made by hand (typed, linked or uploaded): kept for the session, carried by the link."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import streamlit as st

from ui.widgets.state import MAX_URL_MATRIX_CELLS, PageState


class HandMadeExample:
    """Q, K, V made by hand (typed, linked or uploaded): kept for the session, carried by the link.

    A page shows a preset's numbers until the learner types into them, opens a link carrying
    edited numbers (`Q=1,0;0,1&K=...&V=...`, token names in `tq=the,cat`/`tk=`) or uploads a
    file. From then on those numbers replace the preset's, fitted to the sizes chosen, until a
    preset is chosen again (`drop`). An untouched preset never goes into the link: its settings
    rebuild it.

        hand = HandMadeExample(view, sizes=("n_q", "n_k", "d_k", "d_v"), max_size=8)
        hand.read_link()                             # before the size widgets are drawn
        shown, title = hand.shown(preset_example, seed=seed)  # title: None for the preset's
        ...                                          # the editors, seeded with `shown`
        hand.remember(on_screen, preset_example)     # put hand edits into the link

    Session keys: `<page>.custom` (the hand-made example), `<page>.custom.named` (whether its
    query and key tokens are its own, or the preset's name the rows), `<page>.current` (what is
    on screen, which an upload of one matrix completes), `<page>.link_read`.
    """

    def __init__(self, view: PageState, *, sizes: Sequence[str], max_size: int,
                 max_width: int | None = None, max_token_chars: int = 40):  # fmt: skip
        # max_size bounds the rows (tokens) a link may carry, max_width the columns.
        self.view, self.sizes, self.max_size = view, tuple(sizes), max_size
        self.max_width = max_size if max_width is None else max_width
        self.max_token_chars = max_token_chars
        self.max_link_tokens = 2 * max_size * (max_token_chars + 1)
        self._custom, self._named = view.key("custom"), view.key("custom.named")
        self._current = view.key("current")
        # Token names edited by hand travel in the link with the edited numbers.
        self._token_keys = {
            side: view.text_key(side, "", max_chars=self.max_link_tokens) for side in ("tq", "tk")
        }

    def read_link(self) -> None:
        """Take Q, K and V (and their token names) from the link, once, when the page opens."""
        from attention_core import AttentionInputError
        from attention_core.lessons.presets import Example

        if st.session_state.get(self.view.key("link_read")):
            return
        st.session_state[self.view.key("link_read")] = True
        linked = {
            name: self.view.matrix_from_url(name, max_rows=self.max_size, max_cols=self.max_width)
            for name in ("Q", "K", "V")
        }
        if any(m is None for m in linked.values()):
            if any(m is not None for m in linked.values()):
                self.view.notices.append(
                    "The link holds only some of Q, K and V, so the preset is shown."
                )
            return
        q_tokens = self._link_tokens("tq", linked["Q"].shape[0])
        k_tokens = self._link_tokens("tk", linked["K"].shape[0])
        try:
            example = Example(
                q=linked["Q"], k=linked["K"], v=linked["V"],
                query_labels=q_tokens or [f"q{i + 1}" for i in range(linked["Q"].shape[0])],
                key_labels=k_tokens or [f"k{j + 1}" for j in range(linked["K"].shape[0])],
                title="from the link",
            )  # fmt: skip
        except AttentionInputError as error:
            self.view.notices.append(f"The link's Q, K and V were ignored: {error}")
            return
        # Without names in the link, the preset's tokens label the rows.
        self.replace(example, named=(q_tokens is not None, k_tokens is not None))

    def _link_tokens(self, name: str, count: int) -> tuple[str, ...] | None:
        """Token names from the link (`tq=the,cat,sat`), if there is one per row."""
        raw = st.query_params.get(name)
        if raw and len(raw) > self.max_link_tokens:
            return None  # PageState has said why
        cut = self.max_token_chars
        tokens = tuple(t.strip()[:cut] for t in raw.split(",")) if raw else ()
        if raw and len(tokens) != count:
            self.view.notices.append(
                f"The link's `{name}` does not name one token per row; ignored."
            )
        return tokens if len(tokens) == count else None

    def replace(self, example: Any, *, named: tuple[bool, bool] = (True, True)) -> None:
        """Show `example`'s numbers from now on, at its sizes (before the size widgets run)."""
        st.session_state[self._custom] = example
        st.session_state[self._named] = named
        self.set_sizes(example.sizes)

    def set_sizes(self, sizes: Sequence[int]) -> None:
        for name, size in zip(self.sizes, sizes, strict=True):
            self.view.set(name, size)

    def custom(self) -> Any:
        """The hand-made example shown instead of the preset's, or None."""
        return st.session_state.get(self._custom)

    def drop(self) -> None:
        """Back to the preset's numbers (a new preset, seed or sentence was chosen)."""
        st.session_state.pop(self._custom, None)

    def shown(self, preset: Any, *, seed: int = 0) -> tuple[Any, str | None]:
        """The example to draw, and the hand-made one's title (None while the preset shows).

        The hand-made numbers are cut or grown to the preset's (the chosen) sizes.
        """
        from attention_core.lessons.presets import Example, fit_example

        custom = st.session_state.get(self._custom)
        if not custom:
            return preset, None
        fitted = fit_example(custom, *preset.sizes, seed=int(seed))
        named_q, named_k = st.session_state.get(self._named, (True, True))
        shown = Example(
            q=fitted.q, k=fitted.k, v=fitted.v,
            query_labels=fitted.query_labels if named_q else preset.query_labels,
            key_labels=fitted.key_labels if named_k else preset.key_labels,
            title=fitted.title,
        )  # fmt: skip
        return shown, custom.title

    def remember(self, on_screen: Any, preset: Any) -> None:
        """Keep what is on screen, and put it into the link if it differs from the preset."""
        st.session_state[self._current] = on_screen
        renamed = {
            "tq": on_screen.query_labels != preset.query_labels,
            "tk": on_screen.key_labels != preset.key_labels,
        }
        hand_edited = any(renamed.values()) or any(
            shown.shape != made.shape or not np.array_equal(shown, made)
            for shown, made in zip((on_screen.q, on_screen.k, on_screen.v),
                                   (preset.q, preset.k, preset.v), strict=True)
        )  # fmt: skip
        matrices = {"Q": on_screen.q, "K": on_screen.k, "V": on_screen.v}
        # All three or none: a link with only some of them opens the preset.
        linked = hand_edited and all(m.size <= MAX_URL_MATRIX_CELLS for m in matrices.values())
        for name, matrix in matrices.items():
            self.view.put_matrix(name, matrix if linked else None)
        for side, labels in (("tq", on_screen.query_labels), ("tk", on_screen.key_labels)):
            cut = self.max_token_chars
            tokens = ",".join(label.replace(",", " ")[:cut] for label in labels)
            st.session_state[self._token_keys[side]] = tokens if linked and renamed[side] else ""

    def current(self) -> Any:
        """The example last on screen."""
        return st.session_state[self._current]
