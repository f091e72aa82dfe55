"""The writer's durable local queue: turns wait here (SQLite, fsynced) until the database has
them, so a turn is not lost when PostgreSQL is briefly down or the process dies."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Outbox", "QueuedTurn", "existing_outboxes"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    turn TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS dead (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    turn TEXT NOT NULL,
    error TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class QueuedTurn:
    """A turn waiting in the outbox.

    Attributes:
        id: its queue id.
        turn: the `MemoryStore.add_turn` arguments.
        attempts: how many attempts to store it have failed so far.
    """

    id: int
    turn: dict[str, Any]
    attempts: int


class Outbox:
    """A small persistent FIFO of turns (dicts of `MemoryStore.add_turn` arguments).

    Every call runs in a worker thread; the file is opened lazily on first use.

    Args:
        path: the SQLite file; its folder is created when missing.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")  # a queued turn survives a power cut
            conn.execute("PRAGMA busy_timeout=5000")  # other processes may share the file
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db().execute(sql, params)

    async def put(self, user_id: str, turn: dict[str, Any]) -> int:
        """Append a turn; return its queue id once it is on disk."""

        def go() -> int:
            cur = self._run(
                "INSERT INTO pending (user_id, turn) VALUES (?, ?)",
                (user_id, json.dumps(turn, ensure_ascii=False)),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

        return await asyncio.to_thread(go)

    async def peek(self, limit: int = 100) -> list[QueuedTurn]:
        """The oldest `limit` turns, without removing them."""

        def go() -> list[QueuedTurn]:
            rows = self._run(
                "SELECT id, turn, attempts FROM pending ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
            return [
                QueuedTurn(id=int(queue_id), turn=json.loads(turn), attempts=int(attempts))
                for queue_id, turn, attempts in rows
            ]

        return await asyncio.to_thread(go)

    async def attempt_failed(self, queue_id: int) -> int:
        """Count one more failed attempt to store a turn; return its count (0: not queued)."""

        def go() -> int:
            with self._lock:  # read to the end: the statement's transaction ends with it
                counts = (
                    self._db()
                    .execute(
                        "UPDATE pending SET attempts = attempts + 1 WHERE id = ? "
                        "RETURNING attempts",
                        (queue_id,),
                    )
                    .fetchall()
                )
            return sum(int(attempts) for (attempts,) in counts)

        return await asyncio.to_thread(go)

    async def pending(self, queue_id: int) -> bool:
        """Whether a turn still waits (not written, erased or set aside since it was read)."""

        def go() -> bool:
            with self._lock:  # read to the end under the lock, as `attempt_failed` does
                found = self._db().execute("SELECT 1 FROM pending WHERE id = ?", (queue_id,))
                return found.fetchone() is not None

        return await asyncio.to_thread(go)

    async def remove(self, queue_id: int) -> None:
        """Drop a turn that the database now holds."""
        await asyncio.to_thread(self._run, "DELETE FROM pending WHERE id = ?", (queue_id,))

    async def bury(self, queue_id: int, error: str) -> None:
        """Move a turn that can never be stored (invalid) aside, keeping it for inspection."""

        def go() -> None:
            with self._lock:
                db = self._db()
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.execute(
                        "INSERT OR REPLACE INTO dead (id, user_id, turn, error) "
                        "SELECT id, user_id, turn, ? FROM pending WHERE id = ?",
                        (error, queue_id),
                    )
                    db.execute("DELETE FROM pending WHERE id = ?", (queue_id,))
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise

        await asyncio.to_thread(go)

    async def count(self) -> int:
        """How many turns wait."""
        cur = await asyncio.to_thread(self._run, "SELECT count(*) FROM pending")
        return int(cur.fetchone()[0])

    async def forget(self, user_id: str) -> int:
        """Erase every queued (and dead) turn of a user; return how many were pending."""

        def go() -> int:
            with self._lock:
                db = self._db()
                n = db.execute("DELETE FROM pending WHERE user_id = ?", (user_id,)).rowcount
                db.execute("DELETE FROM dead WHERE user_id = ?", (user_id,))
                return int(n)

        return await asyncio.to_thread(go)

    def close(self) -> None:
        """Close the file (reopened on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@contextmanager
def existing_outboxes(path: Path) -> Iterator[list[Outbox]]:
    """The writer's queue at `path` as a list to erase from (empty when no queue was ever
    made there, so nothing is created), closed on leaving."""
    outboxes = [Outbox(path)] if path.exists() else []
    try:
        yield outboxes
    finally:
        for outbox in outboxes:
            outbox.close()
