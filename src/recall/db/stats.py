"""Counts for operators (`recall stats`): the whole store, and users by size. The connection
must be scoped to all users."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from recall.db.sql import fetch_all, fetch_one
from recall.rows import StoreStats, UserBucket

__all__ = ["store_stats", "user_buckets"]


async def store_stats(conn: AsyncConnection[Any]) -> StoreStats:
    """Memories, users, indexed users, the largest user's count and the table's bytes."""
    row = await fetch_one(conn, "stats", None, StoreStats)
    assert row is not None  # an aggregate without GROUP BY returns one row
    return row


async def user_buckets(conn: AsyncConnection[Any]) -> list[UserBucket]:
    """Users and memories per user size bucket (1-10, 11-100, ... over 10,000), small first."""
    return await fetch_all(conn, "user_buckets", None, UserBucket)
