"""Stand-ins shared by the node tests."""

from __future__ import annotations

import asyncio
from typing import Any

from recall.config import Settings
from recall.memory import Memory
from recall.search.verdict import Verdict
from recall.store.results import SearchResult


class FailingStore:
    """A store whose search fails with `exc` (or succeeds with nothing) after `delay` s; its
    settings (what the node leaves to the store) are the defaults."""

    def __init__(self, exc: BaseException | None = None, delay: float = 0.0) -> None:
        self.exc = exc
        self.delay = delay
        self.settings = Settings()

    async def search(self, *args: Any, **kwargs: Any) -> list[Memory]:
        return (await self.find(*args, **kwargs)).memories

    async def find(self, *args: Any, **kwargs: Any) -> SearchResult:
        await asyncio.sleep(self.delay)
        if self.exc is not None:
            raise self.exc
        return SearchResult(self.settings.max_memories, Verdict(self.settings.mode, 0.5), ())


def provider(obj: Any) -> Any:
    """A store provider for any object (recall.store.shared.provider_for wraps only MemoryStore)."""

    async def get() -> Any:
        return obj

    return get
