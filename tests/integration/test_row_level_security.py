"""Row-level security: a query that forgets its user filter still sees one user's rows."""

from __future__ import annotations

import pytest

from recall.errors import StoreError
from recall.store import MemoryStore


async def test_store_connections_run_as_the_restricted_role(store: MemoryStore) -> None:
    async with store.pool.connection() as conn:
        cur = await conn.execute(b"SELECT current_user, session_user")
        row = await cur.fetchone()
    assert row is not None and row[0] == "recall_app" and row[1] != "recall_app"


async def test_a_query_without_a_user_filter_sees_only_the_scoped_user(
    store: MemoryStore, user: str
) -> None:
    other = user + "-other"
    await store.add_turn(user, "mine: the blue door", "ok")
    await store.add_turn(other, "theirs: the red door", "ok")
    forgot_the_filter = b"SELECT DISTINCT user_id FROM recall.memories"  # a buggy query
    async with store.connection(user) as conn:
        cur = await conn.execute(forgot_the_filter)
        assert {r[0] for r in await cur.fetchall()} == {user}
        cur = await conn.execute(b"SELECT DISTINCT user_id FROM recall.users")
        assert {r[0] for r in await cur.fetchall()} == {user}
    async with store.pool.connection() as conn:  # no scope at all: nothing
        cur = await conn.execute(forgot_the_filter)
        assert await cur.fetchall() == []
    async with store.connection(all_users=True) as conn:  # ingestion and statistics
        cur = await conn.execute(forgot_the_filter)
        assert {user, other} <= {r[0] for r in await cur.fetchall()}


async def test_writing_another_users_row_is_refused(store: MemoryStore, user: str) -> None:
    memory = await store.add_turn(user + "-victim", "the victim's memory", "ok")
    await store.add_turn(user, "my own memory", "ok")  # the forged row copies its vector
    # Citus refuses the INSERT ... SELECT before any policy check: "COPY FROM not supported
    # with row-level security"
    with pytest.raises(StoreError, match="row-level security"):
        async with store.connection(user) as conn:
            await conn.execute(
                b"INSERT INTO recall.memories (user_id, user_message, ai_response, content_hash,"
                b" embedding, embedding_model) SELECT %s, 'forged', 'x', '\\x00', embedding,"
                b" embedding_model FROM recall.memories LIMIT 1",
                (user + "-victim",),
            )
    async with store.connection(user) as conn:  # nor can it change or delete theirs
        cur = await conn.execute(
            b"UPDATE recall.memories SET user_message = 'changed' WHERE id = %s", (memory.id,)
        )
        assert cur.rowcount == 0
        cur = await conn.execute(b"DELETE FROM recall.memories WHERE id = %s", (memory.id,))
        assert cur.rowcount == 0
    assert (await store.recent(user + "-victim"))[0].user_message == "the victim's memory"


async def test_the_policy_reads_the_key_once_per_query(store: MemoryStore, user: str) -> None:
    """Migration 0008: the key is an InitPlan, read before the scan, not a call per row."""
    await store.add_turn(user, "a memory to scan", "ok")
    async with store.connection(user) as conn:
        cur = await conn.execute(b"EXPLAIN (VERBOSE) SELECT id FROM recall.memories")
        plan = "\n".join(r[0] for r in await cur.fetchall())
    filters = [line for line in plan.splitlines() if "Filter:" in line]
    assert "InitPlan" in plan
    assert filters and not any("current_setting" in line for line in filters), plan


PER_USER_CALLS = {
    "add_memory",
    "held_rows",
    "held_state",
    "held_versions",
    "search_details",
    "search_exact",
    "search_indexed",
    "search_keyword",
    "search_scoped",
    "search_terms",
}


async def test_the_per_user_calls_run_as_their_owner_and_only_the_app_role_may_call_them(
    store: MemoryStore,
) -> None:
    """Migration 0017 (decision 0025): their reads do not depend on where the key reached."""
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            b"SELECT p.proname, p.prosecdef, p.proconfig,"
            b" has_function_privilege('recall_app', p.oid, 'EXECUTE'),"
            b" EXISTS (SELECT 1 FROM aclexplode(p.proacl) AS a"
            b"         WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')"
            b" FROM pg_proc AS p WHERE p.pronamespace = 'recall'::regnamespace"
            b" AND p.proname = ANY(%s)",
            (sorted(PER_USER_CALLS),),
        )
        rows = await cur.fetchall()
    assert {r[0] for r in rows} == PER_USER_CALLS
    for name, definer, config, app_may, public_may in rows:
        assert definer, name
        paths = [c for c in config or [] if c.startswith("search_path=")]
        assert (
            paths
            and paths[0].startswith("search_path=pg_catalog, ")
            and paths[0].endswith(", pg_temp")
        ), (name, config)
        assert app_may and not public_may, name


async def test_a_per_user_call_reads_the_named_user_only_and_leaves_the_callers_key(
    store: MemoryStore, user: str
) -> None:
    """Owner's rights change no result: a search names its user and sees that user's rows,
    and the caller's own scope is as it was after the call."""
    other = user + "-other"
    await store.add_turn(user, "mine: the blue door", "ok")
    await store.add_turn(other, "theirs: the red door", "ok")
    vector = str([float(x) for x in await store.embedder.embed_query("door")])
    async with store.connection(user) as conn:
        cur = await conn.execute(
            b"SELECT user_message FROM recall.search_exact(%s, %s::vector, 2.0, 10)",
            (other, vector),
        )
        assert [r[0] for r in await cur.fetchall()] == ["theirs: the red door"]
        cur = await conn.execute(b"SELECT DISTINCT user_id FROM recall.memories")
        assert {r[0] for r in await cur.fetchall()} == {user}


async def test_one_statement_inserts_a_memory_row(store: MemoryStore) -> None:
    """Issue 31: of every live function, only recall.insert_memory inserts into
    recall.memories (migration 0018), add_memory goes through it, and the app role calls it
    with its own rights (store_chunk, inside the chunk's transaction)."""
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            b"SELECT p.proname, p.prosecdef, p.prosrc,"
            b" has_function_privilege('recall_app', p.oid, 'EXECUTE')"
            b" FROM pg_proc AS p WHERE p.pronamespace = 'recall'::regnamespace"
        )
        rows = await cur.fetchall()
    bodies = {name: source for name, _definer, source, _may in rows}
    inserting = sorted(n for n, src in bodies.items() if "INSERT INTO recall.memories" in src)
    assert inserting == ["insert_memory"]
    assert "recall.insert_memory(" in bodies["add_memory"]
    definer, may = next((d, m) for n, d, _s, m in rows if n == "insert_memory")
    assert not definer and may
