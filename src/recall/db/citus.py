"""Citus, distributed PostgreSQL (docs/scaling.md, decision 0020): what the store does
differently on a Citus coordinator. Migration 0013's `recall.distribute()` distributes the
schema; this module covers the one thing Citus does not pass on to the shards by itself."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, sql

from recall.db.sql import fetch_all, fetch_value, run
from recall.errors import StoreError
from recall.rows import ShardResult

__all__ = ["is_citus", "keep_inline"]


async def is_citus(conn: AsyncConnection[Any]) -> bool:
    """Whether this database has the citus extension (a Citus coordinator or worker)."""
    return bool(await fetch_value(conn, "is_citus"))


def _set_main(column: str) -> sql.Composed:
    return sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE MAIN").format(
        sql.SQL("recall.memories"), sql.Identifier(column)
    )


async def keep_inline(conn: AsyncConnection[Any], column: str, *, citus: bool) -> None:
    """Keep `column` of recall.memories inside the row (storage MAIN, migration 0006).

    Citus refuses SET STORAGE on a distributed table: it is set on the coordinator's table
    without propagation, then on every shard. Outside a transaction on Citus (the shards are
    altered over connections of their own, which would wait for this one's locks).

    Raises:
        StoreError: a shard refused the change.
    """
    if not citus:
        await conn.execute(_set_main(column))
        return
    async with conn.transaction():
        await run(conn, "citus_local_ddl")
        await conn.execute(_set_main(column))
    command = sql.SQL("ALTER TABLE %s ALTER COLUMN {} SET STORAGE MAIN").format(
        sql.Identifier(column)
    )
    results = await fetch_all(
        conn, "citus_on_shards", {"command": command.as_string(conn)}, ShardResult
    )
    failed = [r for r in results if not r.success]
    if failed:
        raise StoreError(f"SET STORAGE MAIN failed on {len(failed)} shards: {failed[0].result}")
