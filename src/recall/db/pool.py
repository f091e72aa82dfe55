"""Connections: where the database is (a URL or the embedded server) and the async pool."""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any

import psycopg
import structlog
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from recall.config import Settings
from recall.db.embedded import EmbeddedServer
from recall.db.rls import use_app_role
from recall.db.sql import run
from recall.errors import ExtensionMissingError, StoreError

__all__ = ["Database", "RecentUseCheck", "connect_once", "locate_database", "open_pool"]

log = structlog.stdlib.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Database:
    """Where to connect: the URL, and the embedded server behind it when there is one."""

    url: str
    embedded: EmbeddedServer | None


async def locate_database(settings: Settings, *, stop_at_exit: bool = True) -> Database:
    """Use `settings.database_url`, or start (or reuse) the embedded server in `data_dir`.

    Raises:
        StoreError: the embedded server could not start.
    """
    if settings.database_url:
        return Database(settings.database_url, None)
    server = EmbeddedServer(settings.data_dir, settings.embedded_shared_buffers_mb)
    url = await server.astart(stop_at_exit=stop_at_exit)
    return Database(url, server)


async def connect_once(url: str) -> AsyncConnection[TupleRow]:
    """One autocommit connection without pgvector types (for migrations and admin work).

    Raises:
        StoreError: the server cannot be reached.
    """
    try:
        return await AsyncConnection.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc


async def _configure(conn: AsyncConnection[Any]) -> None:
    try:
        await register_vector_async(conn)
    except psycopg.ProgrammingError as exc:
        raise ExtensionMissingError(
            "the 'vector' type is missing in this database: run `recall migrate` (or ask a "
            "superuser to run CREATE EXTENSION vector)"
        ) from exc
    await run(conn, "session_utc")
    # the first full-text parse of a connection loads the dictionaries (~7 ms): here, not in
    # the first write or keyword search that the connection serves
    await run(conn, "warm_text_search")
    if not await use_app_role(conn):
        log.warning(
            "db.rls.not_enforced",
            reason="this database user cannot SET ROLE recall_app (see docs/security.md)",
        )


class RecentUseCheck:
    """The pool's check before lending a connection, skipped for one back within `window_s`.

    A check is a round trip (~0.15 ms, 15% of a typical search): worth it for a connection
    that sat idle, where a server restart or an idle timeout may have closed it, and not for
    one that just served a query. A connection broken in that window fails its one query
    (the pool then discards it); searches fall back and writes are retried, as for any error.
    """

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self._returned: weakref.WeakKeyDictionary[AsyncConnection[Any], float] = (
            weakref.WeakKeyDictionary()
        )

    async def returned(self, conn: AsyncConnection[Any]) -> None:
        """The pool's `reset` callback: note when the connection came back."""
        self._returned[conn] = time.monotonic()

    async def check(self, conn: AsyncConnection[Any]) -> None:
        """The pool's `check` callback: a round trip unless the connection is fresh from use."""
        back = self._returned.get(conn)
        if back is not None and time.monotonic() - back < self.window_s:
            return
        await AsyncConnectionPool.check_connection(conn)


async def open_pool(url: str, *, max_size: int, timeout: float = 30.0) -> AsyncConnectionPool:
    """Open an autocommit pool whose connections know pgvector's types.

    Connections idle for more than two seconds are checked before use, so the pool recovers by
    itself after a server restart (see `RecentUseCheck`).

    Raises:
        StoreError: no connection could be opened within `timeout` seconds.
    """
    checker = RecentUseCheck()
    pool = AsyncConnectionPool(
        url,
        min_size=min(2, max_size),
        max_size=max_size,
        kwargs={"autocommit": True},
        configure=_configure,
        check=checker.check,
        reset=checker.returned,
        timeout=timeout,
        open=False,
        name="recall",
    )
    try:
        await pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        await pool.close()
        raise StoreError(f"cannot open a connection pool to PostgreSQL: {exc}") from exc
    return pool
