"""Bulk import: validated turns written with one binary COPY per batch, merged idempotently."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from recall.db.memories import MEMORY_COLUMNS, memory_params
from recall.db.sql import fetch_all, fetch_value, query, run
from recall.embeddings import Vector
from recall.memory import Turn
from recall.rows import ImportedId

__all__ = ["copy_turns", "import_clock"]

_IMPORT_TYPES = [
    "int4", "uuid", "text", "text", "text", "text", "timestamptz", "jsonb", "bytea", "vector",
    "text", "text",
]  # fmt: skip


async def import_clock(conn: AsyncConnection[Any]) -> datetime | None:
    """The server's time now: an import dates its undated turns from it, in the file's order."""
    clock: datetime | None = await fetch_value(conn, "import_clock")
    return clock


async def copy_turns(
    conn: AsyncConnection[Any],
    turns: list[Turn],
    vectors: list[Vector],
    model_name: str,
    *,
    clock: datetime,
    first: int,
    ids: list[UUID | None] | None = None,
) -> tuple[list[str], int]:
    """COPY the turns into a temporary table and merge them in one transaction.

    Rows already stored (same user and content hash, also within the batch) are skipped.
    A turn with an id in `ids` (a file `recall export` wrote) is stored with that id; the
    others get a new one.
    A turn without a date is dated `clock` plus `first` + its index in microseconds, so an
    import keeps its order however its batches' commits interleave.

    Returns:
        The id of each turn, in order (the existing id for a turn stored before), and how many
        rows the merge inserted (the others were stored before).
    """
    async with conn.transaction():
        await run(conn, "create_import_table")
        async with conn.cursor().copy(query("copy_import")) as copy:
            copy.set_types(_IMPORT_TYPES)
            given = ids if ids is not None else [None] * len(turns)
            for ordinal, (turn, vector, mid) in enumerate(zip(turns, vectors, given, strict=True)):
                row = memory_params(turn, vector, model_name)  # the columns of copy_import
                await copy.write_row((ordinal, mid, *(row[column] for column in MEMORY_COLUMNS)))
        inserted = await run(conn, "merge_import", {"clock": clock, "first": first})
        rows = await fetch_all(conn, "import_ids", None, ImportedId)
    by_ordinal = {row.ord: str(row.id) for row in rows}
    return [by_ordinal[i] for i in range(len(turns))], inserted
