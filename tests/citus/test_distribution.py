"""The schema on a Citus coordinator: what `recall migrate` distributes, how a user's queries
are routed, and that the counters, row-level security and RecallStore hold there."""

from __future__ import annotations

from typing import Any

from recall.basestore import RecallStore
from recall.config import Settings
from recall.db.migrate import apply_migrations, distribute, load_migrations
from recall.db.pool import connect_once
from recall.db.sql import query
from recall.memory import make_turn
from recall.search.provenance import provenance_of, repeats_of
from recall.store import MemoryStore
from recall.store.candidates import SCOPE
from recall.testing import FakeEmbeddings
from tests.conftest import Databases


async def _rows(url: str, statement: bytes, params: Any = None) -> list[tuple[Any, ...]]:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(statement, params)
        return list(await cur.fetchall())
    finally:
        await conn.close()


async def test_migrate_distributes_the_user_tables_by_user_colocated(
    store: MemoryStore, database_url: str
) -> None:
    rows = await _rows(
        database_url,
        b"SELECT logicalrelid::text, partmethod, column_to_column_name(logicalrelid, partkey),"
        b" colocationid FROM pg_dist_partition WHERE logicalrelid::text LIKE 'recall.%'"
        b" ORDER BY 1",
    )
    tables = {r[0]: r[1:] for r in rows}
    assert tables["recall.embedding_space"][0] == "n"  # a reference table
    user_tables = ["recall.memories", "recall.progress", "recall.summaries", "recall.users"]
    assert all(tables[t][:2] == ("h", "user_id") for t in user_tables)
    assert len({tables[t][2] for t in user_tables}) == 1  # one colocation group
    # RecallStore's tables (namespaces, not users) and the migration log stay on the coordinator
    assert not {"recall.store_items", "recall.store_vectors", "recall.schema_migrations"} & set(
        tables
    )
    functions = await _rows(
        database_url,
        b"SELECT objid::regproc::text FROM pg_dist_object"
        b" WHERE classid = 'pg_proc'::regclass AND distribution_argument_index = 0"
        b" ORDER BY 1",
    )
    assert [f[0] for f in functions] == [
        "recall.add_memory",
        "recall.add_turn",  # migration 0019: a turn's repeat lookup and write in one call
        "recall.held_rows",  # migration 0034: the rows a search holds between searches
        "recall.held_state",  # migration 0036: whether they changed, and the query's lexemes
        "recall.held_versions",  # migration 0034: whether they changed
        "recall.insert_memory",  # migration 0018: add_memory calls it on the user's worker
        "recall.search_details",  # migration 0014
        "recall.search_details",  # migration 0021: with or without the vectors
        "recall.search_exact",
        "recall.search_indexed",
        "recall.search_keyword",
        "recall.search_scoped",  # migration 0021
        "recall.search_terms",  # migration 0014
    ]
    # migration 0017 reached the workers too (and 0021, 0034 and 0036 for theirs): each runs
    # these calls with its owner's rights and a pinned search_path, and only recall_app (and the
    # owner) may call them
    workers = await _rows(
        database_url,
        b"SELECT success, result FROM run_command_on_workers($$"
        b" SELECT count(*) FILTER (WHERE prosecdef"
        b"   AND proconfig::text LIKE '%%search_path=pg_catalog, %%'"
        b"   AND NOT EXISTS (SELECT 1 FROM aclexplode(proacl) AS a WHERE a.grantee = 0))"
        b" FROM pg_proc WHERE pronamespace = 'recall'::regnamespace"
        b" AND proname IN ('add_memory', 'held_rows', 'held_state', 'held_versions',"
        b" 'search_details',"
        b" 'search_exact', 'search_indexed', 'search_keyword', 'search_scoped',"
        b" 'search_terms')$$)",
    )
    assert workers and all(w == (True, "11") for w in workers), workers
    # migration 0018: the one memory INSERT reached the workers, with its caller's rights
    inserts = await _rows(
        database_url,
        b"SELECT success, result FROM run_command_on_workers($$"
        b" SELECT count(*) FILTER (WHERE NOT prosecdef) FROM pg_proc"
        b" WHERE pronamespace = 'recall'::regnamespace AND proname = 'insert_memory'$$)",
    )
    assert inserts and all(w == (True, "1") for w in inserts), inserts


async def test_migrating_again_changes_nothing(store: MemoryStore, database_url: str) -> None:
    conn = await connect_once(database_url)
    try:
        assert await apply_migrations(conn) == []
        assert await distribute(conn) == 0
    finally:
        await conn.close()


async def test_a_users_search_is_one_call_on_one_worker(
    store: MemoryStore, database_url: str, user: str
) -> None:
    await store.add_turn(user, "I adopted a dog named Max", "Lovely name!")
    vector = await store.embedder.embed_query("dog")
    rows = await _rows(
        database_url,
        b"EXPLAIN SELECT * FROM recall.search_exact(%s, %s::vector, 2.0, 3)",
        (user, str([float(x) for x in vector])),
    )
    delegated = "\n".join(r[0] for r in rows)
    # outside a transaction block the call itself goes to the worker that holds the user
    assert "Custom Scan (Citus" in delegated and "Task Count: 1" in delegated, delegated


async def test_searches_inside_a_transaction_see_only_the_users_rows(
    store: MemoryStore, user: str
) -> None:
    other = user + "-other"
    mine = await store.add_turn(user, "the blue door is mine", "ok")
    await store.add_turn(other, "the blue door is theirs", "ok")
    vector = await store.embedder.embed_query("the blue door")
    params = {"user_id": user, "query": vector, "max_distance": 2.0, "limit": 5}
    async with store.connection(other) as conn:  # a transaction scoped to another user
        cur = await conn.execute(query("search_exact"), params)
        inside = [str(r[0]) for r in await cur.fetchall()]
        cur = await conn.execute(b"SELECT count(*) FROM recall.memories")
        visible = await cur.fetchone()
    assert inside == [mine.id]  # the function's own key reached the worker
    assert visible == (1,)  # and the caller's key was put back: only `other`'s row
    hits = await store.search(user, "the blue door", mode="semantic", similarity_threshold=0.0)
    assert [h.id for h in hits] == [mine.id]


async def test_counters_follow_bulk_imports_and_erasure(store: MemoryStore, user: str) -> None:
    users = [f"{user}-{i}" for i in range(12)]  # spread over the shards
    turns = [
        {"user_id": u, "user_message": f"fact {j} of {u}", "ai_response": "ok"}
        for u in users
        for j in range(1 + users.index(u))
    ]
    await store.add_turns(turns, batch_size=25)
    await store.add_turns(turns, batch_size=25)  # again: nothing stored twice, nothing counted
    await store.forget_user(users[0])
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(
            b"SELECT u.user_id, u.memory_count, u.total_tokens,"
            b" (SELECT count(*) FROM recall.memories m WHERE m.user_id = u.user_id),"
            b" (SELECT coalesce(sum(doc_len), 0) FROM recall.memories m"
            b"  WHERE m.user_id = u.user_id)"
            b" FROM recall.users u WHERE u.user_id = ANY(%s) ORDER BY u.user_id",
            (users,),
        )
        rows = await cur.fetchall()
    assert {r[0] for r in rows} == set(users[1:])
    assert all(r[1] == r[3] == 1 + users.index(r[0]) and r[2] == r[4] for r in rows), rows


async def test_the_retention_cap_removes_restatements_first_on_each_users_shard(
    databases: Databases,
) -> None:
    """Issue 37: the cap's one DELETE per user (restatements of a stored source first) is
    routed to the user's shard, for users spread over the shards."""
    url = await databases.create("recall_cap")
    async with MemoryStore.connect(
        Settings(database_url=url), embeddings=FakeEmbeddings(64)
    ) as store:
        users = [f"cap-{i}" for i in range(6)]
        for u in users:
            [source] = await store.add_turns(
                [{"user_id": u, "user_message": "I drive a Prius", "ai_response": "ok"}]
            )
            quoted = {"recall": {"sources": [source], "quoted": [source], "restates": True}}
            await store.add_turns(
                [
                    {"user_id": u, "user_message": f"What car? {n}", "ai_response": "A Prius.",
                     "metadata": quoted}
                    for n in range(3)
                ]
                + [{"user_id": u, "user_message": "I live in Oslo", "ai_response": "ok"}]
            )  # fmt: skip
        done = await store.apply_retention(max_per_user=2)
        assert (done.over_cap, done.users) == (3 * len(users), len(users))
        for u in users:
            kept = {m.user_message for m in await store.recent(u, 10)}
            assert kept == {"I drive a Prius", "I live in Oslo"}


async def test_recall_store_works_on_the_coordinator(databases: Databases) -> None:
    url = await databases.create("recall_items")
    async with RecallStore.connect(
        url, index={"dims": 64, "embed": FakeEmbeddings(64), "fields": ["$"]}
    ) as s:
        await s.aput(("alice", "memories"), "m1", {"text": "Allergic to peanuts"})
        await s.aput(("alice", "memories"), "m2", {"text": "Likes hiking"})
        await s.aput(("bob", "memories"), "m1", {"text": "Allergic to cats"})
        item = await s.aget(("alice", "memories"), "m1")
        assert item is not None and item.value == {"text": "Allergic to peanuts"}
        hits = await s.asearch(("alice",), query="Allergic to peanuts", limit=2)
        assert hits[0].key == "m1" and {h.namespace[0] for h in hits} == {"alice"}
        assert await s.alist_namespaces(prefix=("bob",)) == [("bob", "memories")]
        await s.adelete(("alice", "memories"), "m1")
        assert await s.aget(("alice", "memories"), "m1") is None


async def test_a_cluster_distributed_before_0018_gets_the_one_insert(databases: Databases) -> None:
    """Migrations 0018 and 0019 on a cluster already distributed by 0017's schema: add_memory's
    new body calls recall.insert_memory on the user's worker, a chunk's transaction calls it as
    the app role, and recall.add_turn finds a repeat there; all store their rows."""
    url = await databases.create("recall_upgrade_0018")
    conn = await connect_once(url)
    try:
        older = [m for m in load_migrations() if m.version < 18]
        await apply_migrations(conn, older)
        assert await distribute(conn) == 0  # apply_migrations distributed already
        # 0018 is the next to apply (later migrations, such as 0020, come after it)
        assert min(m.version for m in load_migrations() if m.version >= 18) == 18
    finally:
        await conn.close()
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        added = await store.add_turn("u-0018", "my dog is Rex", "noted", conversation_id="c1")
        again = await store.add_turn("u-0018", "my dog is Rex", "noted", conversation_id="c1")
        assert added.id == again.id  # the same turn, stored once
        # migration 0019: recall.add_turn looks for a repeat on the user's worker
        repeat = await store.add_turn("u-0018", "my dog is Rex", "noted", conversation_id="c2")
        assert repeat.id == added.id and repeats_of(repeat.metadata) == 1
        pending = await store.conversations.pending_turns("u-0018", "c1", 10)
        memory = make_turn("u-0018", "has a dog, Rex", "", conversation_id="c1", kind="summary")
        [vector] = await store.embedder.embed_documents([memory.text])
        stored = await store.conversations.store_chunk(
            "u-0018", "c1", [memory], [vector], through=pending[-1], dedup_threshold=0.95
        )
        assert stored.created == 1
        [summary] = await store.conversations.conversation_recent("u-0018", "c1", 5)
        assert (summary.kind, summary.user_message) == ("summary", "has a dog, Rex")
        [turn] = await store.conversations.conversation_recent("u-0018", "c1", 5, kinds=("turn",))
        assert turn.id == added.id


async def _distributed_before(databases: Databases, version: int) -> str:
    """A cluster database with every migration before `version` applied and distributed (a
    cluster made with an older release); its URL."""
    url = await databases.create(f"recall_upgrade_{version:04d}")
    conn = await connect_once(url)
    try:
        await apply_migrations(conn, [m for m in load_migrations() if m.version < version])
        assert await distribute(conn) == 0  # apply_migrations distributed already
    finally:
        await conn.close()
    return url


async def test_a_cluster_distributed_before_0021_gets_the_scoped_call(
    databases: Databases,
) -> None:
    """Migration 0021 on a cluster already distributed: recall.search_scoped runs on the user's
    worker, and a long history's search uses it."""
    url = await _distributed_before(databases, 21)
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        await store.add_turns(
            {"user_id": "u-0021", "user_message": f"entry {i} on subject {i % 50}",
             "ai_response": "ok"}
            for i in range(2050)
        )  # fmt: skip
        await store.search("u-0021", "subject 7")  # learns the plan
        vector = await store.embedder.embed_query("subject 7")
        rows, near = await store.candidates("u-0021", "subject 7", vector, 5)
        assert len(near) == 5 and rows[0].memories == SCOPE  # BM25 over the nearest
    functions = await _rows(
        url,
        b"SELECT count(*) FROM pg_dist_object WHERE classid = 'pg_proc'::regclass"
        b" AND objid = 'recall.search_scoped(text, vector, integer, integer, boolean, text,"
        b" text[], integer, integer, boolean)'::regprocedure AND distribution_argument_index = 0",
    )
    assert functions == [(1,)]


async def test_a_cluster_distributed_before_0024_indexes_own_words(databases: Databases) -> None:
    """Migration 0024 on a cluster already distributed: the trigger function the workers' shards
    run is replaced, so a turn's quoted sentence no longer finds it by keyword."""
    url = await _distributed_before(databases, 24)
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        fact = await store.add_turn("u-0024", "My daughter Mia is allergic to peanuts.", "Noted.")
        reply = "Remember that Mia is allergic to peanuts! Try a lentil curry tonight."
        source = {"id": fact.id, "user_message": fact.user_message, "ai_response": "Noted."}
        provenance = provenance_of("We're going vegetarian.", reply, [source])
        turn = await store.add_turn(
            "u-0024", "We're going vegetarian.", reply, provenance=provenance
        )
        found = await store.search("u-0024", "peanuts", mode="keyword", similarity_threshold=0.0)
        assert [m.id for m in found] == [fact.id]
        assert [m.id for m in await store.search("u-0024", "lentil", mode="keyword")] == [turn.id]
