"""The cluster changing under the store: a worker restarting while turns are written, and a
worker added and the shards rebalanced while searches run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from recall.config import Settings
from recall.db.pool import connect_once
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox
from recall.store import MemoryStore
from recall.store.shared import provider_for
from recall.testing import FakeEmbeddings
from tests.citus.conftest import Cluster
from tests.conftest import Databases

pytestmark = pytest.mark.slow


async def test_the_writer_loses_and_duplicates_nothing_through_a_worker_restart(
    databases: Databases, cluster: Cluster, tmp_path: Path
) -> None:
    url = await databases.create("recall_restart")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    users = [f"writer-{i}" for i in range(8)]  # on both workers
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        writer = TurnWriter(
            provider_for(store), Outbox(tmp_path / "q.sqlite3"), wait_s=0.5, retry_initial_s=0.2
        )

        async def write(n: int) -> list[str]:
            outcomes: list[str] = []
            for i in range(n):
                outcomes.append(
                    await writer.submit(
                        users[i % len(users)],
                        f"turn {i} of the restart test",
                        "ok",
                        conversation_id="c",
                        created_at=datetime.now(UTC),
                    )
                )
                await asyncio.sleep(0.02)
            return outcomes

        writing = asyncio.create_task(write(200))
        await asyncio.sleep(0.5)
        await cluster.restart_worker(1, down_s=2.0)
        outcomes = await writing
        await writer.flush(timeout_s=60)
        assert await writer.outbox.count() == 0
        await writer.close()
        stored = [m.user_message for u in users for m in await store.recent(u, 1000)]
        assert sorted(stored) == sorted(f"turn {i} of the restart test" for i in range(200))
        assert "queued" in outcomes  # the restart was felt, and waited out


async def test_adding_a_worker_and_rebalancing_while_searches_run(
    databases: Databases, cluster: Cluster
) -> None:
    url = await databases.create("recall_rebalance")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    users = [f"rebalance-{i}" for i in range(24)]
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        await store.add_turns(
            [
                {"user_id": u, "user_message": f"{u} fact {j}", "ai_response": "ok"}
                for u in users
                for j in range(20)
            ]
        )
        expected = {
            u: [
                m.id
                for m in await store.search(
                    u, f"{u} fact 3", limit=3, mode="hybrid", similarity_threshold=0.0
                )
            ]
            for u in users
        }
        assert all(len(ids) == 3 for ids in expected.values())
        searches = errors = 0
        lost: list[str] = []
        done = asyncio.Event()

        async def search_forever() -> None:
            nonlocal searches, errors
            while not done.is_set():
                for u in users:
                    try:
                        hits = await store.search(
                            u, f"{u} fact 3", limit=3, mode="hybrid", similarity_threshold=0.0
                        )
                    except Exception:  # counted: the test fails on any
                        errors += 1
                        continue
                    searches += 1
                    if [h.id for h in hits] != expected[u]:
                        lost.append(u)

        searching = [asyncio.create_task(search_forever()) for _ in range(2)]
        worker = await cluster.add_worker(url)
        conn = await connect_once(url)
        try:
            await conn.execute(b"SELECT rebalance_table_shards(shard_transfer_mode => 'auto')")
            cur = await conn.execute(
                b"SELECT count(*) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid)"
                b" WHERE logicalrelid = 'recall.memories'::regclass AND nodeport = %s",
                (int(str(conninfo_to_dict(worker)["port"])),),
            )
            nodes = await cur.fetchone()
        finally:
            await conn.close()
            done.set()
            await asyncio.gather(*searching)
        assert nodes is not None and nodes[0] > 0  # the new worker holds shards now
        assert errors == 0 and lost == [] and searches > 0, (errors, lost, searches)
        total = sum([len(await store.recent(u, 100)) for u in users])
        assert total == len(users) * 20
