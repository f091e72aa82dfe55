"""Faults: a killed bulk import, a failing or hanging embedder, more work than connections."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from recall.config import Settings
from recall.db.pool import connect_once
from recall.nodes import create_retrieve_memories_node, create_store_memories_node
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox
from recall.store import MemoryStore
from recall.store.shared import provider_for
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

pytestmark = pytest.mark.slow


async def _count(url: str, user: str) -> tuple[int, int]:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(
            b"SELECT count(*), count(DISTINCT content_hash) FROM recall.memories "
            b"WHERE user_id = %s",
            (user,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])
    finally:
        await conn.close()


async def test_sigkill_during_bulk_import_leaves_whole_batches_only(
    databases: Databases, tmp_path: Path
) -> None:
    url = await databases.create()
    total, batch = 6000, 250
    rng = np.random.default_rng(5)
    path = tmp_path / "turns.jsonl"
    with path.open("w") as fh:
        for i in range(total):
            vector = [round(float(x), 4) for x in rng.normal(size=384)]
            fh.write(json.dumps({"user_id": "importer", "user_message": f"turn {i}",
                                 "ai_response": "ok", "embedding": vector}) + "\n")  # fmt: skip
    env = {**os.environ, "RECALL_DATABASE_URL": url}
    cmd = [sys.executable, "-m", "recall", "import", str(path), "--batch-size", str(batch)]
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    stored = 0
    while time.monotonic() < deadline:
        try:
            stored, _ = await _count(url, "importer")
        except Exception:  # the schema may not exist yet
            stored = 0
        if stored >= 3 * batch:
            break
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    await asyncio.wait_for(proc.wait(), timeout=30)
    stored, distinct = await _count(url, "importer")
    assert 0 < stored < total, "the kill must land in the middle of the import"
    assert stored % batch == 0 and stored == distinct  # whole batches, nothing twice

    rerun = await asyncio.create_subprocess_exec(
        *cmd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(rerun.communicate(), timeout=300)
    assert rerun.returncode == 0, err.decode()
    assert await _count(url, "importer") == (total, total)


class Hanging(FakeEmbeddings):
    async def aembed_query(self, text: str) -> list[float]:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


class Switchable(FakeEmbeddings):
    def __init__(self) -> None:
        super().__init__(32)
        self.broken = True

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.broken:
            raise RuntimeError("embedding service down")
        return self.embed_documents(texts)


def cfg(user: str) -> Any:
    return {"configurable": {"thread_id": "t", "langgraph_auth_user": {"identity": user}}}


async def test_a_hanging_embedder_times_retrieval_out(databases: Databases) -> None:
    url = await databases.create()
    async with MemoryStore.connect(Settings(database_url=url), embeddings=Hanging(32)) as store:
        node = create_retrieve_memories_node(store, search_timeout_ms=200)
        started = time.perf_counter()
        out = await node({"messages": [HumanMessage("anything")]}, cfg("u"))
        assert out == {"retrieved_memories": []}
        assert time.perf_counter() - started < 0.2 + 1.0


async def test_writes_wait_out_a_failing_embedder(databases: Databases, tmp_path: Path) -> None:
    url = await databases.create()
    embeddings = Switchable()
    async with MemoryStore.connect(Settings(database_url=url), embeddings=embeddings) as store:
        writer = TurnWriter(
            provider_for(store), Outbox(tmp_path / "q.sqlite3"), wait_s=0.3, retry_initial_s=0.1
        )
        node = create_store_memories_node(writer=writer)
        for i in range(3):
            await node(
                {"messages": [HumanMessage(f"remember fact {i}"), AIMessage("ok")]}, cfg("w")
            )
        assert await writer.outbox.count() == 3 and await store.recent("w") == []
        embeddings.broken = False
        await writer.flush(timeout_s=30)
        stored = sorted(m.user_message for m in await store.recent("w"))
        assert stored == ["remember fact 0", "remember fact 1", "remember fact 2"]
        await writer.close()


async def test_more_concurrent_work_than_connections_waits_not_fails(
    databases: Databases,
) -> None:
    url = await databases.create()
    settings = Settings(database_url=url, connection_pool_size=2)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(32)) as store:

        async def turn(i: int) -> int:
            await store.add_turn(f"user-{i % 5}", f"concurrent turn {i}", "ok")
            found = await store.search(f"user-{i % 5}", "concurrent turn", mode="hybrid")
            return len(found)

        results = await asyncio.gather(*(turn(i) for i in range(60)))
        assert all(r >= 1 for r in results)
        counts = [len(await store.recent(f"user-{u}", 100)) for u in range(5)]
        assert sum(counts) == 60
