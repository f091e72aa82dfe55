"""Per-user HNSW indexes: the search plan for users with a very large history.

A global HNSW index cannot serve a per-user query: it returns the nearest rows of *all* users
and the `user_id` filter then throws most of them away (docs/decisions/0001-per-user-search.md).
A partial HNSW index `WHERE user_id = '<user>'` holds one user's rows only, so its scan loses
nothing to filtering. Users get one when their memory count reaches `user_index_threshold`.
"""

from __future__ import annotations

import hashlib
from typing import Any

import structlog
from psycopg import AsyncConnection, sql

from recall.db.hnswbuild import build_index, drop_index, lock_index_builds
from recall.db.sql import fetch_values, run

__all__ = ["build_user_index", "drop_user_index", "index_name", "users_over_threshold"]

log = structlog.stdlib.get_logger(__name__)


def index_name(user_id: str) -> str:
    """A stable, short index name for a user (the id itself may be any text)."""
    return "memories_hnsw_u_" + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:24]


async def users_over_threshold(conn: AsyncConnection[Any], threshold: int) -> list[str]:
    """Users with at least `threshold` memories and no index of their own, largest first."""
    users: list[str] = await fetch_values(conn, "users_over_threshold", {"threshold": threshold})
    return users


async def drop_user_index(conn: AsyncConnection[Any], name: str) -> None:
    """Drop a user's index without blocking other users' reads (`conn` must be autocommit)."""
    await lock_index_builds(conn)
    try:
        await drop_index(conn, name)
    finally:
        await run(conn, "unlock_index_builds")


async def build_user_index(
    conn: AsyncConnection[Any], user_id: str, *, m: int, ef_construction: int, wait: bool
) -> str | None:
    """Build the user's partial HNSW index concurrently and record it; return its name
    (`recall.db.hnswbuild.build_index`: serialized across processes; with `wait=False`, None
    at once when another build runs; `conn` must be autocommit).

    Raises:
        psycopg.Error: the build failed (the store wraps it).
    """
    name = index_name(user_id)
    create = sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON recall.memories "
        "USING hnsw (embedding vector_cosine_ops) "
        "WITH (m = {}, ef_construction = {}) WHERE user_id = {}"
    ).format(
        sql.Identifier(name), sql.Literal(m), sql.Literal(ef_construction), sql.Literal(user_id)
    )
    built = await build_index(
        conn,
        name,
        create,
        lambda: run(conn, "set_user_index", {"user_id": user_id, "index_name": name}),
        wait=wait,
        failed_event="db.user_index.failed",
    )
    if built is not None:
        log.info("db.user_index.built", index=name)
    return built
