"""Numbered migrations from `migrations/`, applied under a PostgreSQL advisory lock.

Each file runs in its own transaction together with its version row, and every transaction
first takes `pg_advisory_xact_lock`, so two processes migrating at once apply each file once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

import psycopg
import structlog
from psycopg import AsyncConnection, sql

from recall.db.citus import is_citus, keep_inline
from recall.db.sql import fetch_one, fetch_value, fetch_values, run
from recall.errors import EmbeddingMismatchError, ExtensionMissingError, MigrationError, StoreError
from recall.rows import EmbeddingSpace, VectorExtension

__all__ = [
    "MIN_PGVECTOR",
    "MIN_SERVER_VERSION",
    "Migration",
    "apply_migrations",
    "bind_embedding_space",
    "bound_model",
    "distribute",
    "ensure_extension",
    "load_migrations",
    "lock_schema",
    "pending_migrations",
]

log = structlog.stdlib.get_logger(__name__)

MIN_SERVER_VERSION = 150000
MIN_PGVECTOR = (0, 7)
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered migration file."""

    version: int
    name: str
    statements: str

    @property
    def checksum(self) -> str:
        """sha256 of the file: an applied file that changes afterwards is refused."""
        return hashlib.sha256(self.statements.encode()).hexdigest()


def _migrations_dir() -> Traversable:
    packaged = resources.files("recall").joinpath("migrations")
    if packaged.is_dir():  # installed from a wheel: the files ship inside the package
        return packaged
    # editable install: the top-level migrations/ of the source tree
    return Path(__file__).resolve().parents[3] / "migrations"


def load_migrations(directory: Traversable | None = None) -> list[Migration]:
    """Read the migration files in version order.

    Raises:
        MigrationError: a file name does not follow `NNNN_name.sql`, or two files share a number.
    """
    folder = directory if directory is not None else _migrations_dir()
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE.match(entry.name)
        if match is None:
            raise MigrationError(f"migration file {entry.name!r} is not named NNNN_name.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"two migration files have number {version:04d}")
        found[version] = Migration(version, match.group(2), entry.read_text("utf-8"))
    return [found[v] for v in sorted(found)]


async def ensure_extension(conn: AsyncConnection[Any]) -> None:
    """Check the server version and make sure pgvector is installed in the database.

    Raises:
        ExtensionMissingError: pgvector is missing, too old, or may not be created by this role.
        StoreError: the server is older than PostgreSQL 15.
    """
    if conn.info.server_version < MIN_SERVER_VERSION:
        raise StoreError(
            f"recall needs PostgreSQL 15 or newer; this server is {conn.info.server_version}"
        )
    extension = await fetch_one(conn, "vector_extension", None, VectorExtension)
    installed, available = (extension.installed, extension.available) if extension else (None, None)
    if installed is None and available is None:
        raise ExtensionMissingError(
            "the PostgreSQL server has no 'vector' extension: install pgvector 0.7 or newer on it "
            "(https://github.com/pgvector/pgvector#installation), or unset RECALL_DATABASE_URL "
            "and DATABASE_URL to use the embedded server, which ships pgvector"
        )
    if installed is None:
        try:
            async with conn.transaction():
                await lock_schema(conn)  # two processes creating it at once would collide
                await run(conn, "create_vector_extension")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ExtensionMissingError(
                "pgvector is available on the server but not installed in this database, and this "
                "role may not install it: ask a superuser to run CREATE EXTENSION vector; "
                "in this database"
            ) from exc
        extension = await fetch_one(conn, "vector_extension", None, VectorExtension)
        installed = extension.installed if extension else None
    version = tuple(int(p) for p in re.findall(r"\d+", str(installed))[:2])
    if version < MIN_PGVECTOR:
        raise ExtensionMissingError(
            f"pgvector {installed} is too old: recall needs 0.7 or newer "
            "(ALTER EXTENSION vector UPDATE after upgrading the package)"
        )


async def lock_schema(conn: AsyncConnection[Any]) -> None:
    """Take the schema lock for the current transaction (migrations, model changes)."""
    await run(conn, "lock_migrations")


async def pending_migrations(
    conn: AsyncConnection[Any], migrations: list[Migration] | None = None
) -> list[Migration]:
    """Return the migrations not yet applied (all of them on a fresh database)."""
    todo = migrations if migrations is not None else load_migrations()
    if not await fetch_value(conn, "migrations_table_exists"):
        return list(todo)
    done = set(await fetch_values(conn, "applied_migrations"))
    return [m for m in todo if m.version not in done]


async def apply_migrations(
    conn: AsyncConnection[Any], migrations: list[Migration] | None = None
) -> list[int]:
    """Apply every pending migration; return the versions applied by this call.

    Safe to call from several processes at once and to call again (a no-op then).

    Raises:
        MigrationError: a file fails, or an applied file was edited afterwards.
        ExtensionMissingError: pgvector is not available (see `ensure_extension`).
    """
    todo = migrations if migrations is not None else load_migrations()
    async with conn.transaction():
        await lock_schema(conn)
        await run(conn, "bootstrap_migrations")
    await ensure_extension(conn)
    applied: list[int] = []
    for migration in todo:
        async with conn.transaction():
            await lock_schema(conn)
            checksum = await fetch_value(conn, "migration_checksum", {"version": migration.version})
            if checksum is not None:
                if checksum != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.version:04d}_{migration.name}.sql changed after it "
                        "was applied; released migrations are append-only: add a new file instead"
                    )
                continue
            try:
                await conn.execute(migration.statements.encode())
            except psycopg.Error as exc:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name}.sql failed: {exc}"
                ) from exc
            await run(
                conn,
                "record_migration",
                {
                    "version": migration.version,
                    "name": migration.name,
                    "checksum": migration.checksum,
                },
            )
            applied.append(migration.version)
            log.info("db.migrate.applied", version=migration.version, name=migration.name)
    await distribute(conn)
    return applied


async def distribute(conn: AsyncConnection[Any]) -> int:
    """On a Citus coordinator, distribute what is not yet distributed (migration 0013's
    `recall.distribute()`: user tables by user_id, the per-user functions with them); a no-op
    elsewhere and once done. Returns the number of tables it distributed.

    Raises:
        MigrationError: Citus refused a step (the transaction is rolled back whole).
    """
    async with conn.transaction():
        await lock_schema(conn)
        if not await fetch_value(conn, "can_distribute"):
            return 0
        try:
            count = int(await fetch_value(conn, "distribute"))
        except psycopg.Error as exc:
            raise MigrationError(f"distributing the tables on Citus failed: {exc}") from exc
    if count:
        log.info("db.citus.distributed", tables=count)
    return count


async def bound_model(conn: AsyncConnection[Any]) -> str | None:
    """The model the database's vectors come from (None: none bound yet, or not migrated):
    what `recall.embeddings.configured_embeddings` keeps when no model is configured."""
    if not await fetch_value(conn, "embedding_space_exists"):
        return None
    space = await fetch_one(conn, "get_embedding_space", None, EmbeddingSpace)
    return None if space is None else space.model_name


async def bind_embedding_space(
    conn: AsyncConnection[Any], model_name: str, dimensions: int
) -> None:
    """Record which model fills the vector column, or check it against the recorded one.

    The first call fixes the column's dimension (`vector(N)`), which an HNSW index needs.

    Raises:
        EmbeddingMismatchError: the database was built with another model or dimension.
    """
    citus = False
    async with conn.transaction():
        await lock_schema(conn)
        space = await fetch_one(conn, "get_embedding_space", None, EmbeddingSpace)
        if space is None:
            await run(
                conn, "set_embedding_space", {"model_name": model_name, "dimensions": dimensions}
            )
            await conn.execute(
                sql.SQL(
                    "ALTER TABLE recall.memories ALTER COLUMN embedding TYPE vector({})"
                ).format(sql.Literal(dimensions))
            )
            # a new type resets the storage: keep vectors in the row (migration 0006)
            citus = await is_citus(conn)
            if not citus:
                await keep_inline(conn, "embedding", citus=False)
    if space is None:
        if citus:  # the shards are altered over connections of their own: after the commit
            await keep_inline(conn, "embedding", citus=True)
        log.info("db.embedding_space.bound", model=model_name, dimensions=dimensions)
        return
    stored_model, stored_dims = space.model_name, space.dimensions
    if (stored_model, stored_dims) != (model_name, dimensions):
        raise EmbeddingMismatchError(
            f"this database holds embeddings from {stored_model!r} ({stored_dims} dimensions) "
            f"but recall is configured with {model_name!r} ({dimensions} dimensions): run "
            f"`recall reembed` to rebuild the stored embeddings with {model_name!r}, or set "
            f"RECALL_EMBEDDING_MODEL={stored_model} to keep using the stored ones"
        )
