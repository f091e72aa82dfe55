"""`src/recall/db/schema.sql` is what the migrations leave in the database (issue 48, decision
0044): every function of the `recall` schema, the triggers and the row-level security policies,
each defined there as applying migrations 0001-NNNN defines it, and nothing more.

How: a fresh database gets every migration; in one transaction, rolled back, its functions,
triggers and policies are read (as PostgreSQL prints them: pg_get_functiondef,
pg_get_triggerdef, pg_policies), dropped, made again by running schema.sql, and read again.
The two readings must be the same, whitespace aside."""

from __future__ import annotations

import difflib
import re
from importlib import resources
from typing import Any

import pytest
from psycopg import AsyncConnection, sql

from recall.db.migrate import apply_migrations
from recall.db.pool import connect_once
from recall.db.sql import SCHEMA_FILE
from tests.conftest import Databases

# what the schema holds, each as ("function recall.f(args)" or the like, its definition)
_FUNCTIONS = b"""
SELECT 'function ' || p.oid::regprocedure::text, pg_get_functiondef(p.oid)
FROM pg_proc AS p
WHERE p.pronamespace = 'recall'::regnamespace
  AND NOT EXISTS (  -- an extension's own functions are not the schema's
      SELECT 1 FROM pg_depend AS d
      WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
"""
_TRIGGERS = b"""
SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass::text, pg_get_triggerdef(t.oid)
FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'recall'::regnamespace AND NOT t.tgisinternal
"""
_POLICIES = b"""
SELECT 'policy ' || policyname || ' on recall.' || tablename,
       format('%s %s to %s using %s with check %s', permissive, cmd, roles, qual, with_check)
FROM pg_policies
WHERE schemaname = 'recall'
"""


async def _definitions(conn: AsyncConnection[Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for statement in (_FUNCTIONS, _TRIGGERS, _POLICIES):
        cur = await conn.execute(statement)
        found.update({str(what): str(definition) for what, definition in await cur.fetchall()})
    return found


async def _drop_all(conn: AsyncConnection[Any], what: list[str]) -> None:
    """Drop every function, trigger and policy `_definitions` named (triggers and policies
    first: a trigger depends on its function)."""
    for name in sorted(what, key=lambda w: w.startswith("function")):
        kind, rest = name.split(" ", 1)
        if kind == "function":
            statement = sql.SQL("DROP FUNCTION {} CASCADE").format(sql.SQL(rest))
        else:
            own, table = rest.split(" on ")
            statement = sql.SQL("DROP {} {} ON {}").format(
                sql.SQL(kind.upper()), sql.Identifier(own), sql.SQL(table)
            )
        await conn.execute(statement)


def _normal(definition: str) -> str:
    return " ".join(definition.split())


def schema_sql() -> str:
    """The file as the package ships it."""
    return resources.files("recall.db").joinpath(SCHEMA_FILE).read_text("utf-8")


def differences(migrated: dict[str, str], from_file: dict[str, str]) -> list[str]:
    """What schema.sql gets wrong, one line per object (the first difference as a diff)."""
    out = [f"schema.sql lacks {w}" for w in sorted(migrated.keys() - from_file.keys())]
    out += [
        f"schema.sql has {w}, which the migrations do not make"
        for w in sorted(from_file.keys() - migrated.keys())
    ]
    for what in sorted(migrated.keys() & from_file.keys()):
        if _normal(migrated[what]) != _normal(from_file[what]):
            diff = difflib.unified_diff(
                migrated[what].splitlines(),
                from_file[what].splitlines(),
                "migrations",
                "schema.sql",
                lineterm="",
                n=1,
            )
            out.append(f"{what} differs:\n" + "\n".join(diff))
    return out


async def _compare(conn: AsyncConnection[Any], text: str) -> list[str]:
    """Run `text` in place of what the migrations made, in a transaction rolled back after."""
    async with conn.transaction(force_rollback=True):
        migrated = await _definitions(conn)
        await _drop_all(conn, list(migrated))
        assert await _definitions(conn) == {}
        await conn.execute(text.encode())
        return differences(migrated, await _definitions(conn))


@pytest.fixture(scope="module")
async def migrated(databases: Databases) -> Any:
    """A database with every migration, to itself (the test drops its functions for a while),
    its pgvector in `public` as schema.sql writes it."""
    conn = await connect_once(await databases.create("recall_schema"))
    try:
        await apply_migrations(conn)
        cur = await conn.execute(
            b"SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
        )
        assert await cur.fetchone() == ("public",)
        yield conn
    finally:
        await conn.close()


async def test_schema_sql_is_what_the_migrations_leave(migrated: AsyncConnection[Any]) -> None:
    wrong = await _compare(migrated, schema_sql())
    assert not wrong, "\n".join(wrong)


async def test_a_difference_is_named(migrated: AsyncConnection[Any]) -> None:
    """The comparison sees a changed body, a missing policy and a function too many, and names
    each (so the test above can fail, and says where)."""
    text = schema_sql().replace("greatest(p_limit, 0)", "greatest(p_limit, 1)", 1)
    cut = text.index("CREATE POLICY own_rows ON recall.summaries")
    changed = (
        text[:cut]
        + text[text.index(";", cut) + 1 :]
        + "CREATE FUNCTION recall.not_migrated() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"
    )
    wrong = await _compare(migrated, changed)
    assert [w.splitlines()[0] for w in wrong] == [
        "schema.sql lacks policy own_rows on recall.summaries",
        "schema.sql has function recall.not_migrated(), which the migrations do not make",
        "function recall.search_details(text,vector,integer,uuid[]) differs:",
    ]
    assert re.search(r"^\+.*greatest\(p_limit, 1\)", wrong[2], re.MULTILINE), wrong[2]
