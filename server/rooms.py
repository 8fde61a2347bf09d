"""A talk's room: the rules its viewers meet, over whichever store holds it (server.room_store).

The speaker starts a room and gets a short code to show and a secret to keep. Audience members
join with the code; their locked-in predictions count, one per viewer and question, and only
the secret's holder can reveal a question's answers, ask it again or close the room.

- Codes are 8 characters of 27 (no vowels, so no words; no 0/O or 1/I/L): 27**8 ~ 2.8e11. A
  session may try SESSION_MISSES wrong ones in MISS_WINDOW, an address ADDRESS_MISSES (a
  guesser opening a session per guess), so guessing a room takes centuries; a hall behind one
  address (a school's NAT, a proxy) has room for its typos.
- The secret is 128 random bits; the store keeps only its SHA-256, compared in constant time.
- A viewer is a random id the server gives their session when it first answers: never something
  the client sends, so a replayed message answers for the same viewer again, and no name is kept.
- An answer is an option the question has, checked here against the question the server built.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from server.room_store import ANSWERED, FULL, GONE, REVEALED, RoomStore, Tally

CODE_ALPHABET = "23456789BCDFGHJKMNPQRSTVWXZ"
CODE_LENGTH = 8
SESSION_MISSES, ADDRESS_MISSES, MISS_WINDOW = 10, 200, 600.0
# A room's bound: a hall of 500 answering 20 questions.
MAX_ROOM_ANSWERS = 10_000
# `<page>.<name>` and the digest of the question's prompt and options (ui.widgets.quiz).
QUESTION_KEY = re.compile(r"[a-z0-9_]{1,20}\.[a-z0-9_]{1,40}:[0-9a-f]{10}")

OUTCOMES = {
    ANSWERED: "Your answer is in.",
    REVEALED: "The speaker has revealed this question: answers are closed.",
    FULL: "This room is full: it holds as many answers as a room may.",
    GONE: "This room has closed.",
}


class RoomError(ValueError):
    """What a viewer is told when a room cannot do what they asked."""


@dataclass(frozen=True)
class Host:
    """A room as its speaker holds it: the code everyone sees and the secret only they have."""

    code: str
    secret: str


def normalised_code(raw: str) -> str | None:
    """`raw` as a code (upper case, without the spaces and dash a person may type), or None when
    it cannot be one."""
    code = re.sub(r"[\s-]", "", raw or "").upper()
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        return None
    return code


def shown_code(code: str) -> str:
    """The code as a slide shows it: two groups of four."""
    return f"{code[:4]}-{code[4:]}"


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_viewer() -> str:
    """What the store knows a viewer by: 128 random bits, made by the server for one session."""
    return secrets.token_hex(16)


def start_room(store: RoomStore, now: float) -> Host:
    while True:
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        secret = secrets.token_urlsafe(16)
        if store.create_room(code, _hash(secret), now):
            return Host(code, secret)


def join_room(store: RoomStore, raw: str, *, session: str, address: str, now: float) -> str:
    """The code of the room `raw` names, for a viewer (their session's id and their address).
    Raises RoomError, saying "no such room" for a code that is not one, and refusing a session
    or an address that has guessed too often, even with the right code."""
    guessers = ((f"session:{session}", SESSION_MISSES), (f"address:{address}", ADDRESS_MISSES))
    if any(store.misses(who, now, MISS_WINDOW) >= limit for who, limit in guessers):
        raise RoomError(
            "Too many wrong room codes from here: wait ten minutes, then try the code again."
        )
    code = normalised_code(raw)
    if code is None or store.room_host(code, now) is None:
        for who, _ in guessers:
            store.misses(who, now, MISS_WINDOW, add=True)
        raise RoomError(
            "There is no such room: check the code on the speaker's slide. "
            "The page works as usual without one."
        )
    return code


def is_host(store: RoomStore, code: str, secret: str | None, now: float) -> bool:
    host = store.room_host(code, now)
    return bool(host and secret) and hmac.compare_digest(host, _hash(secret))


def question_key(question_id: str, digest: str) -> str:
    return _checked(f"{question_id}:{digest}")


def _checked(question: str) -> str:
    if not QUESTION_KEY.fullmatch(question):
        raise RoomError(f"{question[:80]!r} does not name a question.")
    return question


def choice_text(chosen: int | Iterable[int] | None, options: int, multiple: bool) -> str:
    """The store's form of a choice: an option's index, or several joined by ","; refuses
    anything that is not among `options` options."""
    picked = sorted(set(chosen)) if multiple and chosen is not None else [chosen]
    if not picked or not all(isinstance(i, int) and 0 <= i < options for i in picked):
        raise RoomError(f"An answer is one of the question's {options} options.")
    return ",".join(map(str, picked))


def answer(
    store: RoomStore,
    code: str,
    question: str,
    viewer: str,
    chosen: int | Iterable[int] | None,
    *,
    options: int,
    multiple: bool,
    now: float,
) -> str:
    """Keep `viewer`'s choice for `question` (a `question_key`), replacing theirs; the outcome
    (server.room_store's ANSWERED, REVEALED, FULL or GONE: OUTCOMES says each to a viewer)."""
    choice = choice_text(chosen, options, multiple)
    return store.put_answer(code, _checked(question), viewer, choice, now, MAX_ROOM_ANSWERS)


def spread(tally: Tally, options: int) -> list[int]:
    """How many viewers chose each option (a viewer who chose several counts for each)."""
    chosen = [0] * options
    for choice, count in tally.counts.items():
        for index in map(int, choice.split(",")):
            if index < options:
                chosen[index] += count
    return chosen


def _as_host(store: RoomStore, code: str, secret: str | None, now: float) -> None:
    if not is_host(store, code, secret, now):
        raise RoomError("Only the speaker who started this room can do that.")


def reveal(store: RoomStore, code: str, secret: str | None, question: str, now: float) -> None:
    _as_host(store, code, secret, now)
    store.set_revealed(code, _checked(question), now)


def ask_again(store: RoomStore, code: str, secret: str | None, question: str, now: float) -> None:
    _as_host(store, code, secret, now)
    store.clear_question(code, _checked(question), now)


def close_room(store: RoomStore, code: str, secret: str | None, now: float) -> None:
    _as_host(store, code, secret, now)
    store.delete_room(code)
