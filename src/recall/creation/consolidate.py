"""Memory creation off the hot path: every `chunk_size` new turns of a conversation become
model-written memories (kind "summary"), a rolling summary is kept, and nothing is processed
twice (a tracker per conversation, advanced only when a chunk is stored)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import structlog

from recall.creation.extraction import MemoryExtractor, MemoryObject, Summarizer
from recall.memory import MAX_SUMMARY_LENGTH, make_turn
from recall.rows import PendingTurn
from recall.store import MemoryStore
from recall.store.shared import StoreProvider, provider_for

__all__ = ["ConsolidationResult", "ConsolidationScheduler", "Consolidator"]

log = structlog.stdlib.get_logger(__name__)

# the rolling summary's length (a model-written memory's is recall.memory.MAX_SUMMARY_LENGTH)
_SUMMARY_LENGTH = 8000


@dataclass(slots=True)
class ConsolidationResult:
    """What one `Consolidator.run` did."""

    chunks: int = 0
    created: int = 0
    updated: int = 0
    identical: int = 0
    summary_updated: bool = False
    error: str | None = None


class Consolidator:
    """Turns a conversation's unprocessed turns into memories, chunk by chunk.

    Args:
        store: a store, a provider of one, or None for the process-wide store.
        extractor: writes memory objects from a chunk (e.g. `RunnableExtractor(chat_model)`).
        summarizer: keeps the rolling summary; None disables it.
        chunk_size: turns per chunk; a partial chunk is processed only with `force`. None:
            the store's `settings.consolidation_chunk_size`.
        dedup_threshold: a new memory this close (cosine) to an existing one updates it.
            None: the store's `settings.dedup_threshold`.
        timeout_s: the model's time limit per chunk.
    """

    def __init__(
        self,
        store: MemoryStore | StoreProvider | None,
        extractor: MemoryExtractor,
        *,
        summarizer: Summarizer | None = None,
        chunk_size: int | None = None,
        dedup_threshold: float | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self._store = provider_for(store)
        self._extractor = extractor
        self._summarizer = summarizer
        self.chunk_size = chunk_size
        self.dedup_threshold = dedup_threshold
        self._timeout_s = timeout_s

    async def run(
        self, user_id: str, conversation_id: str, *, force: bool = False
    ) -> ConsolidationResult:
        """Process every full chunk of new turns (and the last partial one when `force`).

        A failed, timed-out or malformed model answer stores nothing and leaves the tracker
        where it was (logged; the next run retries the same chunk).

        Raises:
            InvalidInputError, StoreError: an id is unusable, or the database failed.
        """
        store = await self._store()
        chunk_size = (
            store.settings.consolidation_chunk_size if self.chunk_size is None else self.chunk_size
        )
        result = ConsolidationResult()
        while True:
            turns = await store.conversations.pending_turns(user_id, conversation_id, chunk_size)
            if not turns or (len(turns) < chunk_size and not force):
                return result
            chunk = "\n".join(f"User: {t.user_message}\nAssistant: {t.ai_response}" for t in turns)
            try:
                async with asyncio.timeout(self._timeout_s):
                    objects = await self._extractor.extract(chunk)
            except Exception as exc:  # timeouts, model errors and malformed answers alike
                result.error = f"{type(exc).__name__}: {exc}"
                log.error("memory.consolidate.error", kind=type(exc).__name__, error=str(exc))
                return result
            last_id = await self._store_chunk(
                store, user_id, conversation_id, objects, turns[-1], result
            )
            result.chunks += 1
            log.info(
                "memory.consolidate.chunk",
                turns=len(turns),
                created=result.created,
                updated=result.updated,
            )
            if self._summarizer is not None and objects and last_id is not None:
                await self._update_summary(
                    store, user_id, conversation_id, objects, last_id, result
                )

    async def _store_chunk(
        self,
        store: MemoryStore,
        user_id: str,
        conversation_id: str,
        objects: list[MemoryObject],
        last_turn: PendingTurn,
        result: ConsolidationResult,
    ) -> str | None:
        vectors = await store.embedder.embed_documents([o.embedding_text for o in objects])
        memories = [
            make_turn(
                user_id,
                obj.text,
                "",
                conversation_id=conversation_id,
                metadata=obj.metadata(),
                kind="summary",
                max_length=MAX_SUMMARY_LENGTH,
            )
            for obj in objects
        ]
        dedup = self.dedup_threshold
        stored = await store.conversations.store_chunk(
            user_id,
            conversation_id,
            memories,
            vectors,
            through=last_turn,
            dedup_threshold=store.settings.dedup_threshold if dedup is None else dedup,
        )
        result.created += stored.created
        result.updated += stored.updated
        result.identical += stored.identical
        return stored.last_memory_id

    async def _update_summary(
        self,
        store: MemoryStore,
        user_id: str,
        conversation_id: str,
        objects: list[MemoryObject],
        last_memory_id: str,
        result: ConsolidationResult,
    ) -> None:
        assert self._summarizer is not None
        try:
            current = await self.summary(store, user_id, conversation_id)
            async with asyncio.timeout(self._timeout_s):
                text = await self._summarizer.summarize(current or "", objects)
            await store.conversations.set_chat_summary(
                user_id, conversation_id, text[:_SUMMARY_LENGTH], last_memory_id=last_memory_id
            )
            result.summary_updated = True
        except Exception as exc:  # the memories are stored; the summary catches up next time
            log.error("memory.summary.error", kind=type(exc).__name__, error=str(exc))

    @staticmethod
    async def summary(store: MemoryStore, user_id: str, conversation_id: str) -> str | None:
        """The conversation's rolling summary, or None (read from the primary, where the next
        summary is written)."""
        return await store.conversations.chat_summary(user_id, conversation_id, read=False)


class ConsolidationScheduler:
    """Runs `Consolidator.run` in the background after turns are stored: debounced per
    conversation, at most `concurrency` at once, never awaited by a graph node.

    Args:
        consolidator: what to run.
        debounce_s: wait this long after the last notification of a conversation.
        concurrency: conversations consolidated at the same time at most.
    """

    def __init__(
        self, consolidator: Consolidator, *, debounce_s: float = 2.0, concurrency: int = 2
    ) -> None:
        self.consolidator = consolidator
        self._debounce_s = debounce_s
        self._slots = asyncio.Semaphore(concurrency)
        self._waiting: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._running: set[asyncio.Task[None]] = set()

    def notify(self, user_id: str, conversation_id: str | None) -> None:
        """A turn of this conversation was stored: (re)start its debounce timer."""
        if conversation_id is None:
            return
        key = (user_id, conversation_id)
        previous = self._waiting.pop(key, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.get_running_loop().create_task(self._later(key))
        self._waiting[key] = task

    async def _later(self, key: tuple[str, str]) -> None:
        await asyncio.sleep(self._debounce_s)
        if self._waiting.get(key) is asyncio.current_task():
            del self._waiting[key]
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        try:
            async with self._slots:
                await self.consolidator.run(*key)
        except Exception as exc:
            log.error("memory.consolidate.error", kind=type(exc).__name__, error=str(exc))
        finally:
            self._running.discard(task)

    async def wait(self) -> None:
        """Wait for every scheduled and running consolidation (tests, shutdown)."""
        while self._waiting or self._running:
            await asyncio.gather(*self._waiting.values(), *self._running, return_exceptions=True)

    async def close(self) -> None:
        """Cancel what has not started; let nothing run after."""
        for task in [*self._waiting.values(), *self._running]:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._waiting.values(), *self._running, return_exceptions=True)
        self._waiting.clear()
