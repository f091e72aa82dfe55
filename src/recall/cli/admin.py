"""What the database and model commands open: a migrated admin connection, the model a
database is bound to, and the embedding model loaded ahead of the first request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import typer
from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from recall.config import Settings
from recall.db.migrate import apply_migrations, bound_model
from recall.db.pool import connect_once, locate_database
from recall.embeddings import MiniLMEmbeddings, configured_embeddings, embedding_model_name

__all__ = [
    "AdminConnection",
    "admin_connection",
    "model_of",
    "prepare_model",
]


class AdminConnection(NamedTuple):
    """An autocommit connection for migrations and maintenance, and what opening it applied."""

    conn: AsyncConnection[TupleRow]
    applied: list[int]  # the migrations applied on opening (none when up to date)


@asynccontextmanager
async def admin_connection(settings: Settings) -> AsyncIterator[AdminConnection]:
    """One connection to the database `settings` name (the embedded server starts when no URL
    is set), with every pending migration applied first; closed on exit.

    Raises:
        StoreError, MigrationError: the database cannot be reached or migrated.
    """
    database = await locate_database(settings)
    conn = await connect_once(database.url)
    try:
        yield AdminConnection(conn, await apply_migrations(conn))
    finally:
        await conn.close()


async def model_of(url: str) -> str | None:
    """The model the database at `url` is bound to (None: none yet, or not migrated).

    Raises:
        StoreError: the server cannot be reached.
    """
    conn = await connect_once(url)
    try:
        return await bound_model(conn)
    finally:
        await conn.close()


async def prepare_model(settings: Settings, bound: str | None) -> Embeddings:
    """Load the embedding model for a database bound to `bound` (the setting, else the
    database's model, else the default: `configured_embeddings` decides) and embed one text,
    so that a one-off ONNX export (all-MiniLM-L6-v2's) happens now, not in the first request.
    Prints `model ready: <model> (...)`.

    Returns:
        The loaded embeddings.

    Raises:
        ConfigError, EmbeddingError: the model cannot be loaded.
    """
    embeddings = configured_embeddings(settings, bound)
    await asyncio.to_thread(embeddings.embed_query, "warm-up")
    where = ""
    if isinstance(embeddings, MiniLMEmbeddings):  # a provider's model has no local cache
        onnx = embeddings.backend == "onnx"
        where = f" (cache {settings.model_cache_dir})" if onnx else " (torch backend)"
    typer.echo(f"model ready: {embedding_model_name(embeddings)}{where}")
    return embeddings
