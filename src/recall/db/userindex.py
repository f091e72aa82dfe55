"""Per-user HNSW indexes: the search plan for users with a very large history.

A global HNSW index cannot serve a per-user query: it returns the nearest rows of *all* users
and the `user_id` filter then throws most of them away (docs/decisions/0001-per-user-search.md).
A partial HNSW index `WHERE user_id = '<user>'` holds one user's rows only, so its scan loses
nothing to filtering. Users get one when their memory count reaches `user_index_threshold`.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import psycopg
import structlog
from psycopg import AsyncConnection, sql

from recall.db.sql import fetch_value, fetch_values, run

__all__ = [
    "build_user_index",
    "drop_user_index",
    "index_name",
    "lock_index_builds",
    "try_lock_index_builds",
    "users_over_threshold",
]

log = structlog.stdlib.get_logger(__name__)


def index_name(user_id: str) -> str:
    """A stable, short index name for a user (the id itself may be any text)."""
    return "memories_hnsw_u_" + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:24]


async def users_over_threshold(conn: AsyncConnection[Any], threshold: int) -> list[str]:
    """Users with at least `threshold` memories and no index of their own, largest first."""
    users: list[str] = await fetch_values(conn, "users_over_threshold", {"threshold": threshold})
    return users


async def _is_valid(conn: AsyncConnection[Any], name: str) -> bool | None:
    valid = await fetch_value(conn, "index_is_valid", {"index_name": name})
    return None if valid is None else bool(valid)


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


async def _drop(conn: AsyncConnection[Any], name: str) -> None:
    await conn.execute(
        sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS recall.{}").format(sql.Identifier(name))
    )


async def drop_user_index(conn: AsyncConnection[Any], name: str) -> None:
    """Drop a user's index without blocking other users' reads (`conn` must be autocommit)."""
    await lock_index_builds(conn)
    try:
        await _drop(conn, name)
    finally:
        await run(conn, "unlock_index_builds")


async def build_user_index(
    conn: AsyncConnection[Any], user_id: str, *, m: int, ef_construction: int, wait: bool
) -> str | None:
    """Build the user's partial HNSW index concurrently and record it; return its name.

    Builds are serialized across processes by one advisory lock: two concurrent
    CREATE INDEX CONCURRENTLY on one table deadlock. With `wait=False` the call returns None at
    once when another build runs. `conn` must be autocommit (CREATE INDEX CONCURRENTLY cannot
    run in a transaction); reads and writes go on meanwhile.

    Raises:
        psycopg.Error: the build failed (the store wraps it).
    """
    name = index_name(user_id)
    if wait:
        await lock_index_builds(conn)
    elif not await try_lock_index_builds(conn):
        return None
    try:
        if await _is_valid(conn, name) is False:  # a build that died half-way leaves an invalid one
            await _drop(conn, name)
        if await _is_valid(conn, name) is None:
            await run(conn, "index_build_memory")
            await conn.execute(
                sql.SQL(
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON recall.memories "
                    "USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = {}, ef_construction = {}) WHERE user_id = {}"
                ).format(
                    sql.Identifier(name),
                    sql.Literal(m),
                    sql.Literal(ef_construction),
                    sql.Literal(user_id),
                )
            )
            await run(conn, "reset_index_build_memory")
        await run(conn, "set_user_index", {"user_id": user_id, "index_name": name})
        log.info("db.user_index.built", index=name)
        return name
    except psycopg.Error:
        log.exception("db.user_index.failed", index=name)
        raise
    finally:
        await run(conn, "unlock_index_builds")
