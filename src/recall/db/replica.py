"""WAL positions for reading one's own writes on a streaming replica: where the primary's WAL
ends after a write, and how far a standby has replayed it (decision 0021)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from recall.db.sql import fetch_value

__all__ = ["wal_replayed", "wal_written"]


async def wal_written(conn: AsyncConnection[Any]) -> int:
    """The primary's WAL end (bytes), taken after a write has committed: a standby that has
    replayed this far shows the write.

    Raises:
        psycopg.Error: the server is a standby, or failed.
    """
    return int(await fetch_value(conn, "wal_written"))


async def wal_replayed(conn: AsyncConnection[Any]) -> int | None:
    """How far this standby has replayed the primary's WAL (bytes); None on a server that is
    not a standby."""
    value = await fetch_value(conn, "wal_replayed")
    return None if value is None else int(value)
