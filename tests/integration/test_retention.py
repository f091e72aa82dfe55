"""Issue 37, point 4: a user's memories exported and imported back unchanged (ids kept), erased
before a date or one by id, and retention by age and per-user cap; every removal logged with
its count. Each test that removes across users has a database of its own."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.language_models import FakeListChatModel
from structlog.testing import capture_logs

from recall.cli.importing import export_line
from recall.config import MAX_RETENTION_DAYS, Settings
from recall.creation.consolidate import Consolidator
from recall.creation.extraction import RunnableExtractor
from recall.errors import ConfigError, InvalidInputError, StoreError
from recall.memory import Memory
from recall.store import MemoryStore, Retention
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def own_store(databases: Databases) -> AsyncIterator[MemoryStore]:
    """A store on a database of its own (retention works across every user of a database)."""
    url = await databases.create("recall_retention")
    async with MemoryStore.connect(
        Settings(database_url=url), embeddings=FakeEmbeddings(16)
    ) as store:
        yield store


def _turns(user: str, ages_days: list[int]) -> list[dict[str, Any]]:
    """One turn per age, dated that many days before NOW; `fact <user> <i>`."""
    return [
        {
            "user_id": user,
            "user_message": f"fact {user} {i}",
            "ai_response": "ok",
            "conversation_id": "c",
            "created_at": NOW - timedelta(days=age),
        }
        for i, age in enumerate(ages_days)
    ]


async def _texts(store: MemoryStore, user: str) -> set[str]:
    return {m.user_message for m in await store.recent(user, 1000)}


async def _all(store: MemoryStore, user: str) -> list[Memory]:
    return [m async for m in store.export(user, page_size=2)]


async def test_export_reads_every_memory_of_the_user_newest_first(
    own_store: MemoryStore,
) -> None:
    await own_store.add_turns(_turns("ann", [5, 4, 3, 2, 1]) + _turns("bob", [1]))
    with capture_logs() as logs:
        exported = await _all(own_store, "ann")  # pages of 2: three pages
    assert [m.user_message for m in exported] == [f"fact ann {i}" for i in (4, 3, 2, 1, 0)]
    assert [e["count"] for e in logs if e["event"] == "memory.export.done"] == [5]
    assert await _all(own_store, "nobody") == []


async def test_an_imported_memory_keeps_the_id_and_fields_it_was_exported_with(
    databases: Databases,
) -> None:
    """Export from one database, import into an empty one: the same memories, ids included."""
    source_url, target_url = await databases.create(), await databases.create()
    turns = [
        *_turns("ann", [3, 2]),
        {"user_id": "ann", "user_message": "a note", "ai_response": "", "kind": "note",
         "metadata": {"source": "MEMORY.md", "tags": ["é", 1]}, "created_at": NOW},
        {"user_id": "ann", "user_message": "no thread", "ai_response": "ok",
         "created_at": NOW - timedelta(microseconds=7)},
    ]  # fmt: skip
    async with MemoryStore.connect(
        Settings(database_url=source_url), embeddings=FakeEmbeddings(16)
    ) as source:
        await source.add_turns(turns)
        exported = await _all(source, "ann")
    lines = [
        {"id": m.id, "user_id": "ann", "conversation_id": m.conversation_id,
         "user_message": m.user_message, "ai_response": m.ai_response,
         "created_at": m.created_at.isoformat(), "metadata": m.metadata, "kind": m.kind}
        for m in exported
    ]  # fmt: skip
    async with MemoryStore.connect(
        Settings(database_url=target_url), embeddings=FakeEmbeddings(16)
    ) as target:
        ids = await target.add_turns(lines)
        assert ids == [m.id for m in exported]
        assert await _all(target, "ann") == exported
        assert await target.add_turns(lines) == ids  # again: nothing twice, same ids
        assert await _all(target, "ann") == exported
    assert {m.kind for m in exported} == {"turn", "note"}


async def test_a_bad_or_clashing_id_is_refused_and_loses_nothing(own_store: MemoryStore) -> None:
    [kept] = await own_store.add_turns(_turns("ann", [1]))
    with pytest.raises(InvalidInputError, match=r"turn #1: id must be a memory id"):
        await own_store.add_turns([*_turns("ann", [2]), {**_turns("ann", [3])[0], "id": "x"}])
    # the user's id for another text: the batch is refused whole
    clash = {**_turns("ann", [4])[0], "user_message": "other text", "id": kept}
    with pytest.raises(StoreError):
        await own_store.add_turns([clash])
    assert await _texts(own_store, "ann") == {"fact ann 0"}
    # the same id under another user is that user's own memory
    assert await own_store.add_turns([{**clash, "user_id": "bob"}]) == [kept]
    [theirs] = await own_store.recent("bob")
    assert (theirs.id, theirs.user_message) == (kept, "other text")
    mine = await own_store.get("ann", kept)
    assert mine is not None and mine.user_message == "fact ann 0"


async def test_a_long_model_written_memory_exports_and_imports_whole(
    databases: Databases,
) -> None:
    """Memory creation stores a summary up to 4,000 characters, over the 2,000 a turn is cut
    to: imported with its id, it keeps its text, into its own database (already there, no clash
    on the id) and into an empty one (the same memory)."""
    source_url, target_url = await databases.create(), await databases.create()
    long = {"title": "Bees", "summary": ("bees " * 599)[:2994]}  # "Bees: ...": 3,000 characters
    extractor = RunnableExtractor(FakeListChatModel(responses=[json.dumps(long)]))
    async with MemoryStore.connect(
        Settings(database_url=source_url), embeddings=FakeEmbeddings(16)
    ) as source:
        await source.add_turns(_turns("ann", [1]))
        assert (await Consolidator(source, extractor, chunk_size=1).run("ann", "c")).created == 1
        exported = await _all(source, "ann")
        assert [(m.kind, len(m.user_message)) for m in exported] == [
            ("summary", 3000),
            ("turn", 10),
        ]
        lines = [export_line("ann", m) for m in exported]
        assert await source.add_turns(lines) == [m.id for m in exported]
        assert await _all(source, "ann") == exported
    async with MemoryStore.connect(
        Settings(database_url=target_url), embeddings=FakeEmbeddings(16)
    ) as target:
        assert await target.add_turns(lines) == [m.id for m in exported]
        assert await _all(target, "ann") == exported


async def test_a_text_with_an_id_is_refused_rather_than_cut(own_store: MemoryStore) -> None:
    """Cut, it would be another memory under the id; without an id it is cut as before."""
    note = {"user_id": "ann", "user_message": "n" * 2500, "ai_response": "", "kind": "note",
            "id": str(uuid4())}  # fmt: skip
    with pytest.raises(InvalidInputError, match=r"turn #0: user_message is 2,500 characters, ov"):
        await own_store.add_turns([note])
    for kind, limit in (("summary", 4000), ("turn", 2000)):  # a summary's limit, a turn's
        too_long = {**note, "kind": kind, "ai_response": "ok", "user_message": "s" * (limit + 1)}
        with pytest.raises(InvalidInputError, match=f"over the {limit:,} it would be cut to"):
            await own_store.add_turns([too_long])
    assert await own_store.recent("ann") == []
    [cut] = await own_store.add_turns([{**note, "id": None}])
    stored = await own_store.get("ann", cut)
    assert stored is not None and len(stored.user_message) == 2000


async def test_forget_before_erases_only_the_users_older_memories(
    own_store: MemoryStore,
) -> None:
    await own_store.add_turns(_turns("ann", [400, 200, 10, 0]) + _turns("bob", [400]))
    with capture_logs() as logs:
        assert await own_store.forget_before("ann", NOW - timedelta(days=100)) == 2
        assert await own_store.forget_before("ann", NOW - timedelta(days=100)) == 0
    assert await _texts(own_store, "ann") == {"fact ann 2", "fact ann 3"}
    assert await _texts(own_store, "bob") == {"fact bob 0"}
    forgot = [(e["scope"], e["count"]) for e in logs if e["event"] == "memory.forget.done"]
    assert forgot == [("before", 2), ("before", 0)]
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        await own_store.forget_before("ann", datetime(2030, 1, 1))  # naive: refused
    assert len(await _texts(own_store, "ann")) == 2


async def test_deleting_another_users_memory_deletes_nothing(own_store: MemoryStore) -> None:
    [ann] = await own_store.add_turns(_turns("ann", [1]))
    with capture_logs() as logs:
        assert await own_store.delete("bob", ann) is False
        assert await own_store.delete("ann", ann) is True
    assert [e["count"] for e in logs if e["event"] == "memory.forget.done"] == [0, 1]
    assert await own_store.recent("ann") == []


async def test_retention_removes_the_old_then_the_oldest_over_the_cap(
    own_store: MemoryStore,
) -> None:
    await own_store.add_turns(
        _turns("ann", [100, 40, 20, 10, 5, 1]) + _turns("bob", [90, 2]) + _turns("cy", [1])
    )
    with capture_logs() as logs:
        done = await own_store.apply_retention(days=30, max_per_user=2, now=NOW)
    # ann: 100 and 40 days are too old, then 20 and 10 are over the cap; bob: 90 days
    assert done == Retention(expired=3, over_cap=2, users=2)
    assert await _texts(own_store, "ann") == {"fact ann 4", "fact ann 5"}
    assert await _texts(own_store, "bob") == {"fact bob 1"}
    assert await _texts(own_store, "cy") == {"fact cy 0"}
    [event] = [e for e in logs if e["event"] == "memory.retention.done"]
    assert (event["expired"], event["over_cap"], event["users"]) == (3, 2, 2)
    assert (event["days"], event["max_per_user"]) == (30, 2)
    # the bookkeeping counts followed the deletes: a second run finds nothing to do
    again = await own_store.apply_retention(days=30, max_per_user=2, now=NOW)
    assert again == Retention()


async def test_retention_takes_its_limits_from_the_stores_settings(
    databases: Databases,
) -> None:
    url = await databases.create("recall_retention")
    keep_all = Settings(database_url=url)
    async with MemoryStore.connect(keep_all, embeddings=FakeEmbeddings(16)) as store:
        await store.add_turns(_turns("ann", [1000, 3, 2, 1]))
        assert await store.apply_retention(now=NOW) == Retention()  # nothing set: keep all
        with pytest.raises(InvalidInputError, match="max_per_user must be >= 1"):
            await store.apply_retention(max_per_user=0)
        # a cutoff further back than year 1 is no date: refused, not an OverflowError
        with pytest.raises(InvalidInputError, match="days must be <= 36500"):
            await store.apply_retention(days=1_000_000)
        assert await store.apply_retention(days=MAX_RETENTION_DAYS, now=NOW) == Retention()
        assert len(await _texts(store, "ann")) == 4
    capped = keep_all.replace(retention_days=365, retention_max_per_user=2)
    async with MemoryStore.connect(capped, embeddings=FakeEmbeddings(16)) as store:
        assert await store.apply_retention(now=NOW) == Retention(expired=1, over_cap=1, users=1)
        assert await _texts(store, "ann") == {"fact ann 2", "fact ann 3"}


def test_retention_days_past_a_century_are_refused_where_they_enter() -> None:
    """A cutoff that far back is no date (OverflowError): the setting says so at start-up."""
    with pytest.raises(ConfigError, match="RECALL_RETENTION_DAYS=1000000 is invalid"):
        Settings.from_env({"RECALL_RETENTION_DAYS": "1000000"})
    assert Settings(retention_days=MAX_RETENTION_DAYS).retention_days == 36500


async def test_the_cap_removes_restatements_whose_source_is_stored_first(
    own_store: MemoryStore,
) -> None:
    """Issue 37: over the cap, the restatements of a stored source go first (oldest first),
    then the other memories oldest first; a restatement whose source was erased, or metadata
    under "recall" that is not provenance, is an ordinary memory."""
    [source] = await own_store.add_turns(_turns("ann", [50]))
    gone = str(uuid4())  # a source erased earlier: its id dangles

    def restating(text: str, age: int, quoted: Any, restates: Any = True) -> dict[str, Any]:
        recall = {"sources": quoted, "quoted": quoted, "restates": restates}
        return {**_turns("ann", [age])[0], "user_message": text, "metadata": {"recall": recall}}

    await own_store.add_turns(
        [
            restating("old restatement", 40, [source]),
            restating("new restatement", 2, [gone, source]),
            restating("orphan", 45, [gone]),
            restating("not one", 44, [source], restates=False),
            restating("hand-written", 43, "not a list"),
            restating("bad ids", 42, ["x", 7, {"a": 1}]),
            *[
                {**t, "user_message": f"plain {t['created_at'].day}"}
                for t in _turns("ann", [30, 20])
            ],
        ]
    )
    assert len(await _texts(own_store, "ann")) == 9
    # 9 memories, cap 6: the two restatements of `source` (though one is the newest memory),
    # then the oldest other memory (`source` itself, 50 days)
    assert await own_store.apply_retention(max_per_user=6, now=NOW) == Retention(
        over_cap=3, users=1
    )
    assert await _texts(own_store, "ann") == {
        "orphan", "not one", "hand-written", "bad ids", "plain 2", "plain 12",
    }  # fmt: skip
    # with its source gone, no restatement is left to go first: the oldest go
    assert await own_store.apply_retention(max_per_user=4, now=NOW) == Retention(
        over_cap=2, users=1
    )
    assert await _texts(own_store, "ann") == {"hand-written", "bad ids", "plain 2", "plain 12"}
