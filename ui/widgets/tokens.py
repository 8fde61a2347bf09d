"""Tokens as the model pages write them, and pickers: a token chosen by position, kept inside
the text."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ui.widgets.state import PageState


def fit_token(view: PageState, name: str, n: int) -> str | None:
    """Keep the token parameter `name` (from 1) inside a text of `n` tokens. Returns the message
    to show next to its control when it was past the end (a link for a longer text)."""
    asked = view.value(name)
    if asked <= n:
        return None
    view.set(name, n)
    return (
        f"Token {asked} does not exist: this text has {n} tokens (1 to {n}). Showing token {n} "
        "instead; pick another below."
    )


def token_options(tokens: list[str]) -> tuple[list[int], Callable[[int], str]]:
    """Positions from 1 and how a selectbox writes them: "11 · it"."""
    return list(range(1, len(tokens) + 1)), lambda i: f"{i} · {tokens[i - 1]}"


def token_label(text: str) -> str:
    """A token as the pages write it: whitespace and escapes visible (∅ for an empty one)."""
    return repr(text)[1:-1] or "∅"


def labels(tokens: Iterable[str]) -> list[str]:
    """Tick labels: position and token (positions keep repeated tokens apart)."""
    return [f"{i + 1} {token_label(t)}"[:24] for i, t in enumerate(tokens)]
