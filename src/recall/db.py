"""Connections: where the database is (a URL or the embedded server) and the async pool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
import structlog
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from recall.config import Settings
from recall.embedded import EmbeddedServer
from recall.errors import ExtensionMissingError, StoreError
from recall.rls import use_app_role

__all__ = ["Database", "connect_once", "locate_database", "open_pool"]

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
    server = EmbeddedServer(settings.data_dir)
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
    if not await use_app_role(conn):
        log.warning(
            "db.rls.not_enforced",
            reason="this database user cannot SET ROLE recall_app (see docs/security.md)",
        )


async def open_pool(url: str, *, max_size: int, timeout: float = 30.0) -> AsyncConnectionPool:
    """Open an autocommit pool whose connections know pgvector's types.

    Connections are checked before use, so the pool recovers by itself after a server restart.

    Raises:
        StoreError: no connection could be opened within `timeout` seconds.
    """
    pool = AsyncConnectionPool(
        url,
        min_size=min(2, max_size),
        max_size=max_size,
        kwargs={"autocommit": True},
        configure=_configure,
        check=AsyncConnectionPool.check_connection,
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
