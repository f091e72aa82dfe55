"""TurnWriter: stores turns without losing or duplicating any, and without holding up a reply.

Each turn goes to the durable `Outbox` first, then to PostgreSQL. The caller waits at most
`wait_s`; after that (or on a database error) the turn stays queued and a background drainer
writes it when the database is back. Storing is idempotent (content hash), so a retry that
races a slow first attempt stores the turn once. Each failed attempt is counted with the queued
turn (`QueuedTurn.attempts`) and logged with its count.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any, Literal

import structlog

from recall.config import Settings, process_settings
from recall.errors import InvalidInputError
from recall.memory import Turn, make_turn
from recall.metrics import outcome_of
from recall.outbox import Outbox
from recall.search.provenance import Provenance, with_provenance
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider

__all__ = ["TurnWriter", "WriteOutcome"]

log = structlog.stdlib.get_logger(__name__)

WriteOutcome = Literal["stored", "queued"]


Checked = tuple[MemoryStore, Turn]
"""A turn checked with a store's limits, and that store (the first attempt hands it over)."""


def _queued(checked: Turn, created_at: datetime, provenance: Provenance | None) -> dict[str, Any]:
    """A checked turn as the queue keeps it (JSON: `add_turn`'s keyword arguments)."""
    return {
        "user_id": checked.user_id,
        "user_message": checked.user_message,
        "ai_response": checked.ai_response,
        "conversation_id": checked.conversation_id,
        "created_at": created_at.isoformat(),
        "metadata": checked.metadata,
        "kind": checked.kind,
        "provenance": None if provenance is None else provenance.as_dict(),
    }


class TurnWriter:
    """Writes turns to the store through a durable queue.

    Args:
        store: provides the store (see `recall.store.shared.provider_for`).
        outbox: the durable queue.
        wait_s: how long `submit` waits for the database before handing the turn off.
        retry_initial_s: first pause of the drainer after a failure (doubles up to `retry_max_s`).
        retry_max_s: longest pause between drain attempts.
        settings: the limits a turn is checked against while no store can be reached (those
            of the store it will be written to); `process_settings()` when None.
    """

    def __init__(
        self,
        store: StoreProvider,
        outbox: Outbox,
        *,
        wait_s: float = 2.0,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 10.0,
        settings: Settings | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self.outbox = outbox
        self._wait_s = wait_s
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._tasks: set[asyncio.Task[Any]] = set()
        self._drainer: asyncio.Task[None] | None = None
        # the attempt writing each queue id now: one at a time per turn, whoever starts it
        self._writing: dict[int, asyncio.Task[bool]] = {}

    async def submit(
        self,
        user_id: str,
        user_message: str,
        ai_response: str,
        *,
        conversation_id: str | None,
        created_at: datetime,
        metadata: dict[str, Any] | None = None,
        kind: str = "turn",
        provenance: Provenance | None = None,
    ) -> WriteOutcome:
        """Queue the turn durably, then try to store it within `wait_s` (`kind` and
        `provenance` as in `MemoryStore.add_turn`).

        Returns:
            "stored" when the database has it, "queued" when it will be written later.

        Raises:
            InvalidInputError: the turn can never be stored; nothing is queued.
        """
        # refuse what can never be stored before it is queued, with the serving store's limits
        # (this writer's settings while the store cannot be reached), and queue the turn as
        # checked
        loop = asyncio.get_running_loop()
        started = loop.time()  # the caller waits at most `wait_s` in all
        checked_by, limits = await self._limits()
        checked = make_turn(
            user_id,
            user_message,
            ai_response,
            conversation_id=conversation_id,
            created_at=created_at,
            metadata=metadata or {},
            kind=kind,
            max_length=limits.max_message_length,
            max_metadata_bytes=limits.max_metadata_bytes,
        )
        turn = _queued(checked, created_at, provenance)
        queue_id = await self.outbox.put(checked.user_id, turn)
        # the first attempt hands the checked turn to the store that gave the limits (checked
        # once); a turn read back from the queue is checked by the store again (the file
        # outlives this process and its settings)
        checked = with_provenance(checked, provenance)
        first = (checked_by, checked) if checked_by is not None else None
        attempt = self._claim(queue_id, turn, first, fresh=True)
        left = max(0.0, self._wait_s - (loop.time() - started))
        done, _ = await asyncio.wait({attempt}, timeout=left)
        if done and attempt.result():
            return "stored"
        log.warning("memory.write.queued", reason="slow" if not done else "error")
        self._ensure_drainer()
        return "queued"

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _limits(self) -> tuple[MemoryStore | None, Settings]:
        """The store whose limits a turn is checked against, and its settings: the serving
        store's, or, when it cannot be reached within `wait_s`, None and this writer's settings
        (the process's unless it was given its own; never fresh defaults, which would cut or
        refuse what the process's store accepts). The turn is then queued, and a turn the store
        refuses later is set aside and logged."""
        try:
            async with asyncio.timeout(self._wait_s):
                store = await self._store()
        except Exception:  # no store now: the turn must still be queued, with these limits
            return None, self._settings or process_settings()
        return store, store.settings

    def _claim(
        self,
        queue_id: int,
        turn: dict[str, Any],
        checked: Checked | None = None,
        *,
        fresh: bool = False,
    ) -> asyncio.Task[bool]:
        """The attempt that writes queue entry `queue_id`: the one already under way, or a new
        one. Claimed in one step of the event loop, so the first attempt and the drainer, which
        may both have the entry in hand, never write it twice (a second write of a turn that a
        concurrent first has just committed was counted as its repeat)."""
        running = self._writing.get(queue_id)
        if running is not None:
            return running
        attempt = self._spawn(self._attempt(queue_id, turn, checked, fresh=fresh))
        self._writing[queue_id] = attempt
        attempt.add_done_callback(lambda _: self._writing.pop(queue_id, None))
        return attempt

    async def _attempt(
        self,
        queue_id: int,
        turn: dict[str, Any],
        checked: Checked | None = None,
        *,
        fresh: bool = False,
    ) -> bool:
        """Write one queue entry; true once nothing is left to write of it. An entry read from
        the queue earlier (not `fresh`) may have been written and removed since: it is written
        only while it is still queued (an attempt removes its entry before its claim ends)."""
        if not fresh and not await self.outbox.pending(queue_id):
            return True
        try:
            store: MemoryStore = await self._store()  # its type named: calls read on to its methods
            if checked is not None and store is checked[0]:
                await store.add_checked_turn(checked[1])
            else:
                await store.add_turn(**turn)
        except InvalidInputError as exc:
            await self.outbox.bury(queue_id, str(exc))
            log.error("memory.write.error", kind=outcome_of(exc), error=str(exc))
            return False
        except Exception as exc:  # the turn stays queued; the drainer retries it
            attempts = await self.outbox.attempt_failed(queue_id)
            log.warning(
                "memory.write.error", kind=outcome_of(exc), error=str(exc), attempts=attempts
            )
            return False
        await self.outbox.remove(queue_id)
        return True

    def _ensure_drainer(self) -> None:
        if self._drainer is None or self._drainer.done():
            self._drainer = self._spawn(self.drain())

    async def drain(self) -> int:
        """Write every queued turn, retrying with backoff until the queue is empty.

        Returns:
            How many turns this call stored.
        """
        stored = 0
        pause = self._retry_initial_s
        while True:
            batch = [q for q in await self.outbox.peek(100) if q.id not in self._writing]
            if not batch:
                if stored:
                    log.info("memory.write.drained", count=stored)
                return stored
            failed = False
            for queued in batch:
                # shielded: a drainer cancelled (`finish`) leaves the attempt to end its write
                if await asyncio.shield(self._claim(queued.id, queued.turn)):
                    stored += 1
                else:
                    failed = True
                    break
            if failed:
                await asyncio.sleep(pause)
                pause = min(pause * 2, self._retry_max_s)
            else:
                pause = self._retry_initial_s

    def start(self) -> None:
        """Start draining what an earlier process left in the queue (needs a running loop)."""
        self._ensure_drainer()

    async def flush(self, timeout_s: float | None = None) -> None:
        """Wait until in-flight writes and the queue are done (or `timeout_s` passes)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while self._tasks:
                    await asyncio.gather(*list(self._tasks), return_exceptions=True)
                if await self.outbox.count():
                    await self.drain()

    async def finish(self) -> None:
        """At interpreter exit: the attempts in flight awaited, then each queued turn tried once,
        oldest first, until one fails (the database is down: what is left stays queued for the
        next process). Unlike `flush`, it does not retry."""
        if self._drainer is not None:
            self._drainer.cancel()
        await asyncio.gather(*(t for t in list(self._tasks) if t is not self._drainer),
                             return_exceptions=True)  # fmt: skip
        while batch := await self.outbox.peek(100):
            for queued in batch:
                if not await self._claim(queued.id, queued.turn):
                    return

    async def close(self) -> None:
        """Stop background work; queued turns stay on disk for the next process."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.outbox.close()
