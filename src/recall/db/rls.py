"""Row-level security: which role the store's connections use, and how a transaction is
scoped to one user (or, for ingestion and statistics, to all of them). Migration 0004 holds
the policies; docs/security.md explains the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog
from psycopg import AsyncConnection

from recall.db.sql import fetch_value, run

__all__ = ["as_owner", "scope", "use_app_role"]

log = structlog.stdlib.get_logger(__name__)


async def use_app_role(conn: AsyncConnection[Any]) -> bool:
    """Switch the session to `recall_app` (subject to row-level security) when it may.

    Returns False, and the session keeps its own role, when the role does not exist or the
    session user is not a member of it (then only non-owner roles are restricted).
    """
    if not await fetch_value(conn, "can_use_app_role"):
        return False
    await run(conn, "use_app_role")
    return True


@asynccontextmanager
async def scope(
    conn: AsyncConnection[Any], *, user_id: str | None = None, all_users: bool = False
) -> AsyncIterator[AsyncConnection[Any]]:
    """A transaction whose row-level security key is `user_id` (or every user)."""
    async with conn.transaction():
        if user_id is not None:
            await run(conn, "set_user", {"user_id": user_id})
        if all_users:
            await run(conn, "set_all_users")
        yield conn


@asynccontextmanager
async def as_owner(conn: AsyncConnection[Any]) -> AsyncIterator[AsyncConnection[Any]]:
    """The session's own role for schema work (index builds and drops), then back."""
    await run(conn, "use_owner_role")
    try:
        yield conn
    finally:
        await use_app_role(conn)
