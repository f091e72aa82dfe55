"""forget_user leaves nothing of the user in any table, nor in the writer's queue."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from langchain_core.language_models import FakeListChatModel
from psycopg import sql

from recall.config import Settings
from recall.creation.consolidate import Consolidator
from recall.creation.extraction import RunnableExtractor, RunnableSummarizer
from recall.outbox import Outbox
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

MARK = "zqxmarker"  # appears in everything the user stored


async def _rows_mentioning(store: MemoryStore, needles: list[str]) -> list[str]:
    """Every (table, column) in schema recall whose text holds one of the needles."""
    found = []
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(
            b"SELECT table_name, column_name FROM information_schema.columns "
            b"WHERE table_schema = 'recall' AND data_type IN ('text', 'jsonb', 'tsvector')"
        )
        columns = await cur.fetchall()
        for table, column in columns:
            for needle in needles:
                cur = await conn.execute(
                    sql.SQL("SELECT count(*) FROM recall.{} WHERE {}::text ILIKE {}").format(
                        sql.Identifier(table), sql.Identifier(column), sql.Literal(f"%{needle}%")
                    )
                )
                row = await cur.fetchone()
                if row and row[0]:
                    found.append(f"{table}.{column} ~ {needle}")
        cur = await conn.execute(
            b"SELECT indexname FROM pg_indexes WHERE schemaname = 'recall' AND indexdef ILIKE %s",
            (f"%{needles[0]}%",),
        )
        found += [f"index {r[0]}" for r in await cur.fetchall()]
    return found


async def test_nothing_of_the_user_remains(databases: Databases, tmp_path: Path) -> None:
    url = await databases.create()
    user = f"{MARK}-user"
    settings = Settings(database_url=url, user_index_threshold=30)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(16)) as store:
        # turns (enough for a per-user HNSW index), a note, model-written memories, a summary
        await store.add_turns(
            {"user_id": user, "user_message": f"{MARK} fact {i}", "ai_response": f"{MARK} ok",
             "conversation_id": f"{MARK}-thread"}
            for i in range(40)
        )  # fmt: skip
        await store.add_turns(
            [{"user_id": user, "user_message": f"{MARK} note", "ai_response": "", "kind": "note",
              "metadata": {"source": f"{MARK}.md"}}]
        )  # fmt: skip
        memory = {"title": f"{MARK} title", "summary": f"{MARK} summary",
                  "entities": [MARK], "key_phrases": [MARK]}  # fmt: skip
        worker = Consolidator(
            store,
            RunnableExtractor(FakeListChatModel(responses=[json.dumps(memory)] * 10)),
            summarizer=RunnableSummarizer(FakeListChatModel(responses=[f"{MARK} rolling"] * 10)),
            chunk_size=40,
        )
        await worker.run(user, f"{MARK}-thread")
        assert await store.optimize() == [user]
        await store.add_turn("bystander", "unrelated memory", "ok")  # must survive
        # a turn still waiting in the writer's queue
        outbox = Outbox(tmp_path / "outbox.sqlite3")
        await outbox.put(user, {"user_id": user, "user_message": f"{MARK} queued"})
        await outbox.bury(await outbox.put(user, {"user_message": f"{MARK} dead"}), "invalid")

        before = await _rows_mentioning(store, [MARK])
        assert any(b.startswith("memories.") for b in before)
        assert any(b.startswith("summaries.") for b in before)
        assert any(b.startswith("index ") for b in before)  # the partial index names the user

        erased = await store.forget_user(user, outboxes=[outbox])
        assert erased == 40 + 1 + 1 + 1  # turns, note, model-written memory, queued turn

        assert await _rows_mentioning(store, [MARK]) == []
        outbox.close()
        with sqlite3.connect(tmp_path / "outbox.sqlite3") as db:
            for table in ("pending", "dead"):
                assert db.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)  # noqa: S608
        async with store.connection(all_users=True) as conn:
            for table in ("memories", "users", "progress", "summaries"):
                cur = await conn.execute(
                    sql.SQL("SELECT count(*) FROM recall.{} WHERE user_id = %s").format(
                        sql.Identifier(table)
                    ),
                    (user,),
                )
                assert await cur.fetchone() == (0,)
        assert len(await store.recent("bystander")) == 1
