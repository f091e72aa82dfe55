"""Maintenance: per-user HNSW index builds (in the background when a search meets a large
user, or all at once with `optimize`), judging the memories stored before the writer judged
them (in the background when the store opens, `recall.db.judge_stored`) and the operators'
counts."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

import structlog

from recall.db.judge_stored import judge_stored_once
from recall.db.stats import store_stats
from recall.db.stats import user_buckets as bucket_rows
from recall.db.userindex import build_user_index, users_over_threshold
from recall.errors import RecallError
from recall.store.core import StoreCore

__all__ = ["Maintenance"]

log = structlog.stdlib.get_logger(__name__)


class Maintenance:
    """`MemoryStore.optimize`, `wait_for_index_builds`, `stats` and `user_buckets`, and the
    per-user index builds a search schedules (`schedule_index`) and erasure or closing stops.

    Args:
        core: the state the store's parts share.
    """

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self._index_tasks: dict[str, asyncio.Task[None]] = {}
        self._judging: asyncio.Task[int | None] | None = None

    def schedule_judging(self) -> None:
        """Judge the memories stored before the writer judged them, or by an older rule, in the
        background (`recall.db.judge_stored.judge_stored_once`: one process at a time); searches
        judge those they meet until then. Once per store; a failure is logged, and the next
        store opened tries again."""
        if self.core.closed or self._judging is not None:
            return
        self._judging = asyncio.get_running_loop().create_task(self._judge())

    async def _judge(self) -> int | None:
        try:
            async with self.core.conn("judge_stored", owner=True) as conn:
                return await judge_stored_once(conn, self.core.embedder)
        except RecallError:
            log.exception("db.judging.failed")
            return None

    async def judged(self) -> int | None:
        """Wait for the background judging (`schedule_judging`) to end: how many memories it
        judged, None when another process was at it, it failed or none was scheduled."""
        if self._judging is None:
            return None
        return await self._judging

    def schedule_index(self, user_id: str) -> None:
        """Build the user's own index in the background (once at a time per user)."""
        if self.core.closed or user_id in self._index_tasks:
            return
        task = asyncio.get_running_loop().create_task(self._build_index(user_id))
        self._index_tasks[user_id] = task
        task.add_done_callback(lambda _t: self._index_tasks.pop(user_id, None))

    async def stop_build(self, user_id: str) -> None:
        """Cancel the user's background index build, if one runs, and wait for it to end."""
        task = self._index_tasks.pop(user_id, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def stop_builds(self) -> None:
        """Cancel every background index build and the judging, and wait for them to end
        (closing)."""
        tasks: list[asyncio.Task[Any]] = list(self._index_tasks.values())
        if self._judging is not None:
            tasks.append(self._judging)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _build_index(self, user_id: str) -> None:
        try:
            async with self.core.conn("build_user_index", owner=True) as conn:
                await build_user_index(
                    conn,
                    user_id,
                    m=self.core.settings.hnsw_m,
                    ef_construction=self.core.settings.hnsw_ef_construction,
                    wait=False,
                )
            self.core.plans.pop(user_id, None)
        except RecallError:
            log.exception("db.user_index.failed")

    async def wait_for_index_builds(self) -> None:
        """Wait until the index builds scheduled in the background have finished."""
        while self._index_tasks:
            await asyncio.gather(*self._index_tasks.values(), return_exceptions=True)

    async def optimize(self) -> list[str]:
        """Build the HNSW index of every user at or over `user_index_threshold` memories.

        Runs after bulk imports (`recall import` calls it); search schedules the same build in
        the background when it meets such a user. Returns the user ids indexed by this call.

        Raises:
            StoreError.
        """
        async with self.core.conn("optimize", owner=True) as conn:
            users = await users_over_threshold(conn, self.core.settings.user_index_threshold)
            built = []
            for user_id in users:
                name = await build_user_index(
                    conn,
                    user_id,
                    m=self.core.settings.hnsw_m,
                    ef_construction=self.core.settings.hnsw_ef_construction,
                    wait=True,
                )
                if name is not None:
                    built.append(user_id)
                    self.core.plans.pop(user_id, None)
        return built

    async def stats(self) -> dict[str, int]:
        """Counts for operators: memories, users, indexed users, largest user, bytes on disk.

        Raises:
            StoreError.
        """
        async with self.core.conn("stats", all_users=True) as conn:
            row = await store_stats(conn)
        return {key: int(value) for key, value in asdict(row).items()}

    async def user_buckets(self) -> list[tuple[str, int, int]]:
        """(bucket, users, memories) per user size bucket: 1-10, 11-100, ... over 10,000.

        Raises:
            StoreError.
        """
        async with self.core.conn("user_buckets", all_users=True) as conn:
            rows = await bucket_rows(conn)
        return [(row.bucket, int(row.users), int(row.memories)) for row in rows]
