"""The one background runner of a `RecallStore`'s index planner: counts, builds, calibrations
and question checks, queued once per key and run one at a time, so they never crowd out the
searches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

__all__ = ["Jobs"]

log = structlog.stdlib.get_logger(__name__)

Work = Callable[[], Coroutine[Any, Any, None]]


class Jobs:
    """Background jobs queued by key: a key already queued or running is not queued again.

    Args:
        name: the runner task's name.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: dict[str, Work] = {}
        self._runner: asyncio.Task[None] | None = None
        self._closed = False

    def queued(self, key: str) -> bool:
        """Whether `key` waits or runs."""
        return key in self._queue

    def spawn(self, key: str, work: Work) -> None:
        """Queue `work` once per `key` (nothing once closed); start the runner if it is idle."""
        if self._closed or key in self._queue:
            return
        self._queue[key] = work
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def _run(self) -> None:
        while self._queue:
            key = next(iter(self._queue))
            try:
                await self._queue[key]()
            except Exception:  # one job's bug must not stop the jobs queued behind it
                log.exception("store.index.job_failed", job=key)
            finally:
                self._queue.pop(key, None)

    async def wait(self) -> None:
        """Wait until every queued job has finished."""
        while self._runner is not None and not self._runner.done():
            await asyncio.gather(self._runner, return_exceptions=True)

    async def close(self) -> None:
        """Start nothing new and cancel what runs."""
        self._closed = True
        self._queue.clear()
        if self._runner is not None:
            self._runner.cancel()
        await self.wait()
