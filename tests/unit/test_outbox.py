"""The writer's outbox counts failed attempts per queued turn, and the writer records each."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from structlog.testing import capture_logs

from recall.config import Settings
from recall.errors import StoreError
from recall.memory import Turn
from recall.nodes.store_memories import create_store_memories_node
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox, QueuedTurn

TURN = {"user_id": "u", "user_message": "remember this", "ai_response": "ok"}


def _attempts_on_disk(path: Path) -> list[int]:
    """The `attempts` column as the file holds it (not as the outbox reports it)."""
    with sqlite3.connect(path) as db:
        return [int(n) for (n,) in db.execute("SELECT attempts FROM pending ORDER BY id")]


async def test_failed_attempts_are_counted_per_turn(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    outbox = Outbox(path)
    first = await outbox.put("u", TURN)
    second = await outbox.put("u", {**TURN, "user_message": "and this"})
    assert await outbox.attempt_failed(first) == 1
    assert await outbox.attempt_failed(first) == 2
    assert await outbox.attempt_failed(12345) == 0  # not queued: nothing to count
    assert await outbox.peek() == [
        QueuedTurn(id=first, turn=TURN, attempts=2),
        QueuedTurn(id=second, turn={**TURN, "user_message": "and this"}, attempts=0),
    ]
    outbox.close()
    assert _attempts_on_disk(path) == [2, 0]


async def test_the_writer_counts_each_failed_attempt(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    calls = 0
    fourth = asyncio.Event()

    class Down:
        settings = Settings()  # the limits a turn is checked against

        async def add_turn(self, **_: Any) -> None:
            nonlocal calls
            calls += 1
            if calls > 3:  # the fourth attempt waits until the writer closes: nothing races
                fourth.set()
                await asyncio.Event().wait()
            raise StoreError("database down")

    async def down() -> Any:
        return Down()

    writer = TurnWriter(down, Outbox(path), wait_s=1.0, retry_initial_s=0.01, retry_max_s=0.01)
    with capture_logs() as logs:
        outcome = await writer.submit(
            "u", "remember this", "ok", conversation_id=None, created_at=datetime.now(UTC)
        )
        assert outcome == "queued"
        # the first attempt, then the drainer's retries
        await asyncio.wait_for(fourth.wait(), timeout=30)
        await writer.close()
    counted = [e["attempts"] for e in logs if e["event"] == "memory.write.error"]
    assert counted == [1, 2, 3]
    # the kind is the metrics' vocabulary (recall.metrics.outcome_of), as for a retrieval
    assert {e["kind"] for e in logs if e["event"] == "memory.write.error"} == {"database"}
    assert _attempts_on_disk(path) == [3]


async def test_a_turn_is_checked_once_on_its_way_and_again_when_read_back(tmp_path: Path) -> None:
    """Issue 31: the writer checks a turn with the serving store's limits and hands that very
    turn to the same store (`add_checked_turn`); a turn read back from the queue file (after an
    outage or a restart) goes through `add_turn`, which checks it with the limits of the store
    that writes it then."""
    seen: list[tuple[str, Any]] = []

    class Serving:
        settings = Settings(max_message_length=40)

        async def add_checked_turn(self, turn: Turn) -> None:
            seen.append(("checked", turn))

        async def add_turn(self, **turn: Any) -> None:
            seen.append(("add_turn", turn))

    serving = Serving()

    async def provider() -> Any:
        return serving

    path = tmp_path / "outbox.sqlite3"
    writer = TurnWriter(provider, Outbox(path), wait_s=1.0)
    long = "word " * 20  # 100 characters: cut to the store's 40 when checked
    now = datetime.now(UTC)
    outcome = await writer.submit("u", long, "ok", conversation_id="c", created_at=now)
    assert outcome == "stored"
    [(how, turn)] = seen
    assert how == "checked" and isinstance(turn, Turn)
    assert len(turn.user_message) <= 40 and turn.conversation_id == "c"
    await writer.close()

    seen.clear()
    queued = Outbox(path)  # a turn left in the file by an earlier process
    await queued.put("u", {**TURN, "conversation_id": "c"})
    queued.close()
    restarted = TurnWriter(provider, Outbox(path), wait_s=1.0)
    assert await restarted.drain() == 1
    assert seen == [("add_turn", {**TURN, "conversation_id": "c"})]
    await restarted.close()


async def _unreachable() -> Any:
    raise StoreError("database down")


async def test_a_turn_queued_in_an_outage_is_checked_with_the_process_settings(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 37: while no store could be reached the writer checked a turn against
    `Settings()` defaults, not the process's settings, so a long message was cut to 2,000
    characters and metadata within the process's limit but over the default was refused."""
    monkeypatch.setenv("RECALL_MAX_MESSAGE_LENGTH", "5000")
    monkeypatch.setenv("RECALL_MAX_METADATA_BYTES", "200000")
    writer = TurnWriter(_unreachable, Outbox(tmp_path / "q.sqlite3"), wait_s=0.2)
    long, big = "a" * 4000, {"notes": "n" * 100_000}
    outcome = await writer.submit(
        "u", long, "ok", conversation_id=None, created_at=datetime.now(UTC), metadata=big
    )
    assert outcome == "queued"
    [queued] = await writer.outbox.peek()
    assert queued.turn["user_message"] == long and queued.turn["metadata"] == big
    await writer.close()


async def test_a_turn_queued_in_an_outage_is_checked_with_the_writers_settings(
    tmp_path: Path,
) -> None:
    """The settings a writer (or the node that makes one) is given win over the environment's:
    they are the limits of the store it writes to."""
    own = Settings(max_message_length=3000, queue_path=tmp_path / "node.sqlite3")
    writer = TurnWriter(_unreachable, Outbox(tmp_path / "q.sqlite3"), wait_s=0.2, settings=own)
    long = "b" * 2500
    now = datetime.now(UTC)
    assert await writer.submit("u", long, "ok", conversation_id=None, created_at=now) == "queued"
    [queued] = await writer.outbox.peek()
    assert queued.turn["user_message"] == long
    await writer.close()

    # the node's own writer: down while the turn is checked and queued, then back
    written: list[dict[str, Any]] = []
    arrived = asyncio.Event()
    up = False

    class Back:
        settings = own

        async def add_turn(self, **turn: Any) -> None:
            written.append(turn)
            arrived.set()

    async def provider() -> Any:
        if not up:
            raise StoreError("database down")
        return Back()

    node = create_store_memories_node(provider, settings=own, wait_s=0.2)
    config = {"configurable": {"thread_id": "t", "langgraph_auth_user": {"identity": "u"}}}
    state = {"messages": [HumanMessage(long), AIMessage("ok")]}
    assert await node(state, config) == {}  # type: ignore[arg-type]
    up = True
    await asyncio.wait_for(arrived.wait(), timeout=30)  # the node's drainer writes it
    assert [t["user_message"] for t in written] == [long]


class _PeekedAfterPut(Outbox):
    """An outbox whose reader sees a new turn before the writer that put it resumes: the
    interleaving in which the drainer and a turn's first attempt both had it in hand."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.put_done = asyncio.Event()
        self.peeked = asyncio.Event()

    async def put(self, user_id: str, turn: dict[str, Any]) -> int:
        queue_id = await super().put(user_id, turn)
        self.put_done.set()
        await self.peeked.wait()  # the drainer reads the entry (and goes on) first
        return queue_id

    async def peek(self, limit: int = 100) -> list[QueuedTurn]:
        await self.put_done.wait()
        batch = await super().peek(limit)
        self.peeked.set()
        return batch


async def test_a_turn_the_drainer_and_its_first_attempt_both_hold_is_written_once(
    tmp_path: Path,
) -> None:
    """CI run of stop 51: the writer node starts the drainer on its first turn; the drainer read
    the turn just queued before the first attempt had claimed it, and both wrote it (the second
    write was counted as a repeat of the first)."""
    writes: list[str] = []

    class Slow:
        settings = Settings()

        async def add_checked_turn(self, turn: Turn) -> None:
            writes.append("checked")
            await asyncio.sleep(0.05)

        async def add_turn(self, **turn: Any) -> None:
            writes.append("add_turn")
            await asyncio.sleep(0.05)

    store = Slow()

    async def provider() -> Any:
        return store

    outbox = _PeekedAfterPut(tmp_path / "q.sqlite3")
    writer = TurnWriter(provider, outbox, wait_s=5.0)
    writer.start()
    outcome = await writer.submit(
        "u", "remember this", "ok", conversation_id="c", created_at=datetime.now(UTC)
    )
    await writer.flush(timeout_s=10)
    assert outcome == "stored"
    assert len(writes) == 1
    assert await outbox.count() == 0
    await writer.close()


async def test_an_entry_written_since_the_drainer_read_it_is_not_written_again(
    tmp_path: Path,
) -> None:
    """A drainer's batch is read once; an entry another attempt wrote and removed meanwhile is
    skipped, not written a second time."""
    writes: list[dict[str, Any]] = []

    class Store:
        settings = Settings()

        async def add_turn(self, **turn: Any) -> None:
            writes.append(turn)

    store = Store()

    async def provider() -> Any:
        return store

    outbox = Outbox(tmp_path / "q.sqlite3")
    first = await outbox.put("u", TURN)
    second = await outbox.put("u", {**TURN, "user_message": "and this"})
    [stale, _] = await outbox.peek()
    await outbox.remove(first)  # written by another attempt after the drainer read it
    assert not await outbox.pending(first) and await outbox.pending(second)
    writer = TurnWriter(provider, outbox)
    assert await writer._claim(stale.id, stale.turn) is True
    assert writes == []
    assert await writer.drain() == 1
    assert [w["user_message"] for w in writes] == ["and this"]
    await writer.close()


async def test_finishing_at_exit_tries_each_queued_turn_once(tmp_path: Path) -> None:
    """`TurnWriter.finish` (a sync graph's writer at interpreter exit): with the database
    down, one attempt and the turns stay queued, where `flush` would retry until its time ran
    out; with it back, every queued turn is written."""
    outbox = Outbox(tmp_path / "outbox.sqlite3")
    for text in ("one turn here", "two turns here"):
        await outbox.put("u", {**TURN, "user_message": text})
    written: list[str] = []
    up = False

    class Store:
        settings = Settings()

        async def add_turn(self, **turn: Any) -> None:
            if not up:
                raise StoreError("database down")
            written.append(turn["user_message"])

    async def store() -> Any:
        return Store()

    writer = TurnWriter(store, outbox, retry_initial_s=0.01, retry_max_s=0.01)
    async with asyncio.timeout(5):
        await writer.finish()
    assert written == [] and await outbox.count() == 2
    up = True
    await writer.finish()
    assert written == ["one turn here", "two turns here"] and await outbox.count() == 0
    await writer.close()
