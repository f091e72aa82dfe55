"""Named SQL blocks: the `.sql` files of this package (`queries.sql` for memories, `items.sql`
for `RecallStore`'s items) hold every statement, each after a `-- name: <name>` line, and the
few helpers that run one and return its rows as typed objects, never tuples."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg.rows import BaseRowFactory, class_row, scalar_row

from recall.errors import StoreError

__all__ = [
    "SCHEMA_FILE",
    "fetch_all",
    "fetch_one",
    "fetch_tuples",
    "fetch_value",
    "fetch_values",
    "parse_blocks",
    "query",
    "run",
]

_NAME = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)
SCHEMA_FILE = "schema.sql"
"""The current definition of every function, trigger and policy of the `recall` schema
(docs/architecture.md, "Migrations"): package data, never run."""

T = TypeVar("T")
Params = Mapping[str, Any] | None


def parse_blocks(text: str) -> dict[str, bytes]:
    """Split a file of named blocks into {name: statement}; duplicate names are an error.

    Raises:
        ValueError: a name appears twice or a block is empty.
    """
    parts = _NAME.split(text)
    blocks: dict[str, bytes] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statement = body.strip()
        if name in blocks:
            raise ValueError(f"SQL block {name!r} is defined twice")
        if not statement:
            raise ValueError(f"SQL block {name!r} is empty")
        # bytes: psycopg accepts them as a query, and they are not mistaken for user text.
        blocks[name] = statement.encode()
    return blocks


@cache
def _blocks() -> dict[str, bytes]:
    blocks: dict[str, bytes] = {}
    for entry in sorted(resources.files("recall.db").iterdir(), key=lambda e: e.name):
        # schema.sql is the reference of what the migrations leave in the database, not
        # statements this package runs
        if not entry.name.endswith(".sql") or entry.name == SCHEMA_FILE:
            continue
        for name, statement in parse_blocks(entry.read_text("utf-8")).items():
            if name in blocks:
                raise ValueError(f"SQL block {name!r} is defined in two files")
            blocks[name] = statement
    return blocks


def query(name: str) -> bytes:
    """Return the statement named `name` from this package's `.sql` files (read once).

    Raises:
        KeyError: no block has that name.
    """
    return _blocks()[name]


async def run(conn: AsyncConnection[Any], name: str, params: Params = None) -> int:
    """Run the block `name` for its effect; return the rows it affected (-1 if not known)."""
    cur = await conn.execute(query(name), params)
    return cur.rowcount


def _row_factory(row: type[T]) -> BaseRowFactory[T]:
    """Rows as `row` objects by column name (psycopg's `class_row`), built positionally when
    the columns are `row`'s dataclass fields in their order: the same objects, without a
    keyword dictionary per row (about a fifth of the decoding time of a search's candidates)."""
    by_name = class_row(row)
    declared = dataclasses.fields(row) if dataclasses.is_dataclass(row) else ()
    positional = bool(declared) and all(f.init and not f.kw_only for f in declared)
    fields = tuple(f.name for f in declared) if positional else None

    def factory(cursor: Any) -> Callable[[Sequence[Any]], T]:
        names = tuple(c.name for c in cursor.description or ())
        if fields is not None and names == fields:
            return lambda values: row(*values)
        return by_name(cursor)

    return factory


async def fetch_all(
    conn: AsyncConnection[Any], name: str, params: Params, row: type[T], *, binary: bool = False
) -> list[T]:
    """Run the block `name` and return its rows as `row` objects, built from the column names
    (so a block's columns are named as `row`'s fields). `binary`: results in PostgreSQL's
    binary format (vectors arrive without parsing their text)."""
    cur = conn.cursor(row_factory=_row_factory(row), binary=binary)
    await cur.execute(query(name), params)
    return await cur.fetchall()


async def fetch_tuples(
    conn: AsyncConnection[Any],
    name: str,
    params: Params,
    columns: Sequence[str],
    *,
    binary: bool = False,
) -> list[tuple[Any, ...]]:
    """Run the block `name` and return its rows as tuples, for a block whose rows are many and
    are read once (`recall.rows.SCOPED_COLUMNS`); its columns are checked against `columns`, so
    a block that changes them fails here instead of being read by position wrongly.

    Raises:
        StoreError: the block's columns are not `columns`.
    """
    cur = conn.cursor(binary=binary)
    await cur.execute(query(name), params)
    got = tuple(c.name for c in cur.description or ())
    if got != tuple(columns):
        raise StoreError(f"block {name} returned the columns {got}, not {tuple(columns)}")
    return await cur.fetchall()


async def fetch_one(
    conn: AsyncConnection[Any], name: str, params: Params, row: type[T]
) -> T | None:
    """Run the block `name` and return its first row as a `row` object, or None."""
    cur = conn.cursor(row_factory=_row_factory(row))
    await cur.execute(query(name), params)
    return await cur.fetchone()


async def fetch_value(conn: AsyncConnection[Any], name: str, params: Params = None) -> Any:
    """Run the block `name` (one column) and return its first row's value, or None."""
    cur = conn.cursor(row_factory=scalar_row)
    await cur.execute(query(name), params)
    return await cur.fetchone()


async def fetch_values(conn: AsyncConnection[Any], name: str, params: Params = None) -> list[Any]:
    """Run the block `name` (one column) and return the value of every row."""
    cur = conn.cursor(row_factory=scalar_row)
    await cur.execute(query(name), params)
    return await cur.fetchall()
