"""Where a room's answers live: outside every process, so that all workers see the same room.

Streamlit shares nothing between sessions, and `make serve WORKERS=N` puts a room's viewers in N
processes: a module-level dict would show each worker its own part of the room. Two stores
behind one interface, `RoomStore`:

    SQLiteStore   a file every worker of one host opens (WAL, so readers never wait for the
                  writer; a busy timeout, so two writers queue rather than fail)
    RedisStore    a Redis server, for workers on several hosts behind one load balancer

    open_store("sqlite:///var/lib/ae/rooms.db")    open_store("redis://10.0.0.5:6379/0")

The store keeps what it is given and enforces only what must hold at once for every worker
(one answer per viewer and question, a room's bound, nothing accepted after a reveal, a room's
idle expiry). The rules a viewer meets (codes, the host's secret, guessing limits, valid
options) are `server.rooms`'.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlparse

if TYPE_CHECKING:
    import sqlite3

STORE_ENV_VAR = "ATTENTION_EXPLORER_ROOM_STORE"
DATA_DIR_ENV_VAR = "ATTENTION_EXPLORER_DATA_DIR"

# A room that nobody has answered, revealed or reset in so long is forgotten.
IDLE_SECONDS = 12 * 3600

# `put_answer`'s outcomes.
ANSWERED, REVEALED, FULL, GONE = "answered", "revealed", "full", "gone"


@dataclass(frozen=True)
class Tally:
    """One question's answers in a room: how many viewers chose each choice (a choice is the
    option's index, or indices joined by "," for a question with several right options)."""

    counts: dict[str, int]
    revealed: bool

    @property
    def answers(self) -> int:
        return sum(self.counts.values())


class RoomStore(Protocol):
    """What a room needs from a store. `code` and `question` arrive checked (server.rooms)."""

    def create_room(self, code: str, host: str, now: float) -> bool:
        """Keep a new room whose host holds the secret hashing to `host`; False if `code` is
        taken."""

    def room_host(self, code: str, now: float) -> str | None:
        """The room's host hash, or None for a room that never was, was closed or expired."""

    def put_answer(
        self, code: str, question: str, viewer: str, choice: str, now: float, max_answers: int
    ) -> str:
        """Keep `viewer`'s choice, replacing theirs: ANSWERED, or why not (REVEALED, FULL when
        the room already holds `max_answers` answers, GONE)."""

    def viewer_choice(self, code: str, question: str, viewer: str) -> str | None: ...

    def tally(self, code: str, question: str) -> Tally: ...

    def set_revealed(self, code: str, question: str, now: float) -> None: ...

    def clear_question(self, code: str, question: str, now: float) -> None:
        """Forget the question's answers and its reveal: the question is asked again."""

    def delete_room(self, code: str) -> None: ...

    def misses(self, who: str, now: float, window: float, *, add: bool = False) -> int:
        """How many wrong room codes `who` tried in the last `window` s (about that many in
        Redis, whose windows are fixed), `add` noting one more first."""


class SQLiteStore:
    """A SQLite file shared by every worker of one host; one connection per thread."""

    SCHEMA = """
        CREATE TABLE IF NOT EXISTS rooms (
            code TEXT PRIMARY KEY, host TEXT NOT NULL, touched REAL NOT NULL,
            answers INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE IF NOT EXISTS answers (
            code TEXT NOT NULL, question TEXT NOT NULL, viewer TEXT NOT NULL, choice TEXT NOT NULL,
            PRIMARY KEY (code, question, viewer));
        CREATE TABLE IF NOT EXISTS revealed (
            code TEXT NOT NULL, question TEXT NOT NULL, PRIMARY KEY (code, question));
        CREATE TABLE IF NOT EXISTS misses (who TEXT NOT NULL, at REAL NOT NULL);
        CREATE INDEX IF NOT EXISTS misses_by_who ON misses (who, at);
    """

    def __init__(self, path: str | Path, busy_timeout: float = 10.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._connection().executescript(self.SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            import sqlite3  # a page without a room never loads it

            # isolation_level=None: transactions are the explicit BEGIN IMMEDIATE below, so a
            # write takes the lock before it reads what it depends on.
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def _transaction(self):
        return _Immediate(self._connection())

    def _read(self, sql: str, parameters: tuple) -> list[tuple]:
        return self._connection().execute(sql, parameters).fetchall()

    def _forget_idle(self, db: sqlite3.Connection, now: float) -> None:
        idle = [(code,) for (code,) in db.execute(
            "SELECT code FROM rooms WHERE touched < ?", (now - IDLE_SECONDS,)
        )]  # fmt: skip
        for table in ("answers", "revealed", "rooms"):
            db.executemany(f"DELETE FROM {table} WHERE code = ?", idle)

    def create_room(self, code: str, host: str, now: float) -> bool:
        with self._transaction() as db:
            self._forget_idle(db, now)
            taken = db.execute("SELECT 1 FROM rooms WHERE code = ?", (code,)).fetchone()
            if taken:
                return False
            db.execute(
                "INSERT INTO rooms (code, host, touched) VALUES (?, ?, ?)", (code, host, now)
            )
            return True

    def room_host(self, code: str, now: float) -> str | None:
        rows = self._read(
            "SELECT host FROM rooms WHERE code = ? AND touched >= ?", (code, now - IDLE_SECONDS)
        )
        return rows[0][0] if rows else None

    def put_answer(
        self, code: str, question: str, viewer: str, choice: str, now: float, max_answers: int
    ) -> str:
        with self._transaction() as db:
            room = db.execute(
                "SELECT answers FROM rooms WHERE code = ? AND touched >= ?",
                (code, now - IDLE_SECONDS),
            ).fetchone()
            if room is None:
                return GONE
            if db.execute(
                "SELECT 1 FROM revealed WHERE code = ? AND question = ?", (code, question)
            ).fetchone():
                return REVEALED
            known = db.execute(
                "SELECT 1 FROM answers WHERE code = ? AND question = ? AND viewer = ?",
                (code, question, viewer),
            ).fetchone()
            if not known and room[0] >= max_answers:
                return FULL
            db.execute(
                "INSERT INTO answers (code, question, viewer, choice) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (code, question, viewer) DO UPDATE SET choice = excluded.choice",
                (code, question, viewer, choice),
            )
            db.execute(
                "UPDATE rooms SET touched = ?, answers = answers + ? WHERE code = ?",
                (now, 0 if known else 1, code),
            )
            return ANSWERED

    def viewer_choice(self, code: str, question: str, viewer: str) -> str | None:
        rows = self._read(
            "SELECT choice FROM answers WHERE code = ? AND question = ? AND viewer = ?",
            (code, question, viewer),
        )
        return rows[0][0] if rows else None

    def tally(self, code: str, question: str) -> Tally:
        counts = self._read(
            "SELECT choice, COUNT(*) FROM answers WHERE code = ? AND question = ? GROUP BY choice",
            (code, question),
        )
        revealed = self._read(
            "SELECT 1 FROM revealed WHERE code = ? AND question = ?", (code, question)
        )
        return Tally(dict(counts), bool(revealed))

    def set_revealed(self, code: str, question: str, now: float) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO revealed VALUES (?, ?)", (code, question))
            db.execute("UPDATE rooms SET touched = ? WHERE code = ?", (now, code))

    def clear_question(self, code: str, question: str, now: float) -> None:
        with self._transaction() as db:
            gone = db.execute(
                "DELETE FROM answers WHERE code = ? AND question = ?", (code, question)
            ).rowcount
            db.execute("DELETE FROM revealed WHERE code = ? AND question = ?", (code, question))
            db.execute(
                "UPDATE rooms SET touched = ?, answers = answers - ? WHERE code = ?",
                (now, gone, code),
            )

    def delete_room(self, code: str) -> None:
        with self._transaction() as db:
            for table in ("answers", "revealed", "rooms"):
                db.execute(f"DELETE FROM {table} WHERE code = ?", (code,))

    def misses(self, who: str, now: float, window: float, *, add: bool = False) -> int:
        if not add:
            query = "SELECT COUNT(*) FROM misses WHERE who = ? AND at >= ?"
            return self._read(query, (who, now - window))[0][0]
        with self._transaction() as db:
            db.execute("DELETE FROM misses WHERE at < ?", (now - window,))
            db.execute("INSERT INTO misses VALUES (?, ?)", (who, now))
            return db.execute("SELECT COUNT(*) FROM misses WHERE who = ?", (who,)).fetchone()[0]


class _Immediate:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an error): a write transaction that holds the
    file's write lock from its first read, so a check and the write it allows are one step."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, *rest) -> None:
        self.db.execute("ROLLBACK" if kind else "COMMIT")


# One answer, atomically: the room exists, the question is not revealed, the room has room.
# KEYS: the room's hash, the question's answers, the room's revealed set, its questions set.
# ARGV: viewer, choice, max answers, idle seconds, question.
_PUT_ANSWER = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
if redis.call('SISMEMBER', KEYS[3], ARGV[5]) == 1 then return 'revealed' end
local new = redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0
if new and tonumber(redis.call('HGET', KEYS[1], 'answers') or '0') >= tonumber(ARGV[3]) then
    return 'full'
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[5])
if new then redis.call('HINCRBY', KEYS[1], 'answers', 1) end
for _, key in ipairs(KEYS) do redis.call('EXPIRE', key, ARGV[4]) end
for _, asked in ipairs(redis.call('SMEMBERS', KEYS[4])) do
    redis.call('EXPIRE', KEYS[1] .. ':a:' .. asked, ARGV[4])
end
return 'answered'
"""

# Forget a question's answers and reveal. KEYS: room, question's answers, revealed. ARGV: question.
_CLEAR_QUESTION = """
local gone = redis.call('HLEN', KEYS[2])
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HINCRBY', KEYS[1], 'answers', -gone) end
return gone
"""


class RedisStore:
    """Rooms in a Redis server, for workers on several hosts. Keys expire after IDLE_SECONDS
    without a write, which is Redis's own way of forgetting an idle room."""

    def __init__(self, url: str, prefix: str = "ae:room:"):
        import redis  # only a deployment across hosts needs it

        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.prefix = prefix
        self._put_answer = self.client.register_script(_PUT_ANSWER)
        self._clear_question = self.client.register_script(_CLEAR_QUESTION)

    def _keys(self, code: str, question: str = "") -> tuple[str, str, str, str]:
        room = self.prefix + code
        return room, f"{room}:a:{question}", f"{room}:revealed", f"{room}:questions"

    def create_room(self, code: str, host: str, now: float) -> bool:
        room = self._keys(code)[0]
        created = self.client.hsetnx(room, "host", host)
        if created:
            self.client.hset(room, "answers", 0)
            self.client.expire(room, IDLE_SECONDS)
        return bool(created)

    def room_host(self, code: str, now: float) -> str | None:
        return self.client.hget(self._keys(code)[0], "host")

    def put_answer(
        self, code: str, question: str, viewer: str, choice: str, now: float, max_answers: int
    ) -> str:
        args = [viewer, choice, max_answers, IDLE_SECONDS, question]
        return self._put_answer(keys=list(self._keys(code, question)), args=args)

    def viewer_choice(self, code: str, question: str, viewer: str) -> str | None:
        return self.client.hget(self._keys(code, question)[1], viewer)

    def tally(self, code: str, question: str) -> Tally:
        _, answers, revealed, _ = self._keys(code, question)
        with self.client.pipeline() as pipe:
            choices, shown = pipe.hvals(answers).sismember(revealed, question).execute()
        counts: dict[str, int] = {}
        for choice in choices:
            counts[choice] = counts.get(choice, 0) + 1
        return Tally(counts, bool(shown))

    def set_revealed(self, code: str, question: str, now: float) -> None:
        room, _, revealed, _ = self._keys(code, question)
        with self.client.pipeline() as pipe:
            pipe.sadd(revealed, question).expire(revealed, IDLE_SECONDS)
            pipe.expire(room, IDLE_SECONDS).execute()

    def clear_question(self, code: str, question: str, now: float) -> None:
        room, answers, revealed, _ = self._keys(code, question)
        self._clear_question(keys=[room, answers, revealed], args=[question])

    def delete_room(self, code: str) -> None:
        room, _, revealed, questions = self._keys(code)
        asked = self.client.smembers(questions)
        self.client.delete(room, revealed, questions, *(f"{room}:a:{q}" for q in asked))

    def misses(self, who: str, now: float, window: float, *, add: bool = False) -> int:
        key = f"{self.prefix}misses:{who}:{int(now // window)}"
        if not add:
            return int(self.client.get(key) or 0)
        with self.client.pipeline() as pipe:
            tried, _ = pipe.incr(key).expire(key, int(window) + 1).execute()
        return int(tried)


def open_store(url: str) -> RoomStore:
    """The store an `ATTENTION_EXPLORER_ROOM_STORE` URL names: `sqlite:///var/lib/ae/rooms.db`
    (the file /var/lib/ae/rooms.db) or `redis://host:port/db` (`rediss://` for TLS)."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        if parsed.netloc or parsed.path in ("", "/"):
            raise ValueError(f"{url!r}: a SQLite store is named sqlite:///path/to/rooms.db")
        return SQLiteStore(parsed.path)
    if parsed.scheme in ("redis", "rediss", "unix"):
        return RedisStore(url)
    raise ValueError(
        f"{url!r} is not a room store: use sqlite:///path/to/rooms.db or redis://host:6379/0"
    )


def store_url() -> str:
    """The store this deployment's rooms live in: ATTENTION_EXPLORER_ROOM_STORE, or a SQLite
    file in the app's data directory (ATTENTION_EXPLORER_DATA_DIR, else
    $XDG_DATA_HOME/attention-explorer, else ~/.local/share/attention-explorer)."""
    if os.environ.get(STORE_ENV_VAR):
        return os.environ[STORE_ENV_VAR]
    data = os.environ.get(DATA_DIR_ENV_VAR) or Path(
        os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share", "attention-explorer"
    )
    return f"sqlite://{Path(data).resolve()}/rooms.db"


def now() -> float:
    """Wall-clock time, which every worker on every host agrees on (not time.monotonic)."""
    return time.time()
