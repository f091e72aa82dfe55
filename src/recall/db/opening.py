"""Opening a database for a store, one way for both stores (`MemoryStore`, `RecallStore`):
the server located (or the embedded one started), its schema brought up to date (or, with
`auto_migrate` off, refused while migrations are pending), then the store's own set-up on the
same connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection

from recall.config import Settings
from recall.db.migrate import apply_migrations, pending_migrations
from recall.db.pool import Database, connect_once, locate_database
from recall.errors import MigrationError, StoreError

__all__ = ["open_database"]

T = TypeVar("T")


async def open_database(
    settings: Settings, setup: Callable[[AsyncConnection[Any]], Awaitable[T]]
) -> tuple[Database, T]:
    """Locate (or start) the database, migrate it when `settings.auto_migrate` (else refuse
    when migrations are pending), then run `setup` on the same connection; return the
    database and what `setup` returned. The connection is closed either way.

    Raises:
        StoreError: the database cannot be reached, or a statement failed.
        MigrationError: a migration failed, or migrations are pending and `auto_migrate` is
            off (the message names them and `recall migrate`).
    """
    database = await locate_database(settings)
    conn = await connect_once(database.url)
    try:
        if settings.auto_migrate:
            await apply_migrations(conn)
        elif pending := await pending_migrations(conn):
            names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
            raise MigrationError(f"the database needs migrations ({names}): run `recall migrate`")
        return database, await setup(conn)
    except psycopg.Error as exc:
        raise StoreError(f"database set-up failed: {exc}") from exc
    finally:
        await conn.close()
