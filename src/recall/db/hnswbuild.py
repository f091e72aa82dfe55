"""Building an HNSW index beside live traffic, one way for every partial index (a user's,
`recall.db.userindex`; a RecallStore namespace's or every namespace's,
`recall.db.storeindex`): one advisory lock serializes the builds across processes (two
CREATE INDEX CONCURRENTLY on one table deadlock), a build that died half-way (an invalid
index) is dropped and done again, the build gets more memory, and the index is recorded once
it is valid."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import structlog
from psycopg import AsyncConnection, sql

from recall.db.sql import fetch_value, run

__all__ = ["build_index", "drop_index", "lock_index_builds", "try_lock_index_builds"]

log = structlog.stdlib.get_logger(__name__)


async def try_lock_index_builds(conn: AsyncConnection[Any]) -> bool:
    """Take the one advisory lock of every HNSW build (user or store namespace) if free."""
    return bool(await fetch_value(conn, "try_lock_index_builds"))


async def lock_index_builds(conn: AsyncConnection[Any]) -> None:
    """Wait for the one advisory lock of every HNSW build (release: `unlock_index_builds`)."""
    # poll between statements: a session blocked inside pg_advisory_lock holds a snapshot, which
    # a running CREATE INDEX CONCURRENTLY waits for, and the two deadlock
    # (noqa: the lock lives in PostgreSQL, there is no Event to wait on)
    while not await try_lock_index_builds(conn):  # noqa: ASYNC110
        await asyncio.sleep(0.2)


async def _is_valid(conn: AsyncConnection[Any], name: str) -> bool | None:
    valid = await fetch_value(conn, "index_is_valid", {"index_name": name})
    return None if valid is None else bool(valid)


async def drop_index(conn: AsyncConnection[Any], name: str) -> None:
    """Drop index `name` of schema recall, if it exists, without blocking reads and writes
    (`conn` must be autocommit; the caller holds the build lock)."""
    await conn.execute(
        sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS recall.{}").format(sql.Identifier(name))
    )


async def build_index(
    conn: AsyncConnection[Any],
    name: str,
    create: sql.Composed,
    record: Callable[[], Awaitable[Any]],
    *,
    wait: bool,
    failed_event: str,
    before: Callable[[], Awaitable[Any]] | None = None,
) -> str | None:
    """Build index `name` with `create` (a CREATE INDEX CONCURRENTLY IF NOT EXISTS) unless a
    valid one exists, then `record` it; return its name.

    With `wait=False` the call returns None at once when another build runs. `before` runs
    under the lock when a build is due (an ANALYZE: outside the lock it would deadlock with
    another process's CREATE INDEX CONCURRENTLY, which waits for its transaction while it waits
    for the build's lock on the table). `conn` must be
    autocommit (CREATE INDEX CONCURRENTLY cannot run in a transaction); reads and writes go on
    meanwhile. A failure is logged as `failed_event`, with the index's name.

    Raises:
        psycopg.Error: the build failed (the stores wrap it).
    """
    if wait:
        await lock_index_builds(conn)
    elif not await try_lock_index_builds(conn):
        return None
    try:
        if await _is_valid(conn, name) is False:  # a build that died half-way leaves an invalid one
            await drop_index(conn, name)
        if await _is_valid(conn, name) is None:
            if before is not None:
                await before()
            await run(conn, "index_build_memory")
            await conn.execute(create)
            await run(conn, "reset_index_build_memory")
        await record()
        return name
    except psycopg.Error:
        log.exception(failed_event, index=name)
        raise
    finally:
        await run(conn, "unlock_index_builds")
