"""The process-wide store, so `retrieve_memories` and `store_memories` work with no set-up.

The first node that needs it opens one `MemoryStore` from the environment (the embedded server
when no URL is set); every node of the process shares it. A server lifespan can install its own
with `set_default_store` and close it with `close_default_store`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from recall.store import MemoryStore

__all__ = [
    "StoreProvider",
    "close_default_store",
    "get_default_store",
    "provider_for",
    "set_default_store",
]

StoreProvider = Callable[[], Awaitable[MemoryStore]]

_task: asyncio.Task[MemoryStore] | None = None
_store: MemoryStore | None = None


async def get_default_store() -> MemoryStore:
    """Return the process-wide store, opening it on first use.

    The opening runs as a shielded task: a caller that times out does not cancel it, and the
    next caller gets the store. A failed opening is retried by the next call.

    Raises:
        RecallError: the store could not be opened.
    """
    global _task
    if _store is not None:
        return _store
    loop = asyncio.get_running_loop()
    if _task is None or _task.get_loop() is not loop or (_task.done() and _task.exception()):
        _task = loop.create_task(_open())
    return await asyncio.shield(_task)


async def _open() -> MemoryStore:
    global _store
    store = await MemoryStore.connect().open()
    _store = store
    return store


def set_default_store(store: MemoryStore | None) -> None:
    """Install (or with None, forget) the process-wide store."""
    global _store, _task
    _store, _task = store, None


async def close_default_store() -> None:
    """Close the process-wide store if one is open."""
    global _store, _task
    store, _store = _store, None
    if store is None and _task is not None and _task.done() and not _task.exception():
        store = _task.result()
    _task = None
    if store is not None:
        await store.close()


def provider_for(store: MemoryStore | StoreProvider | None) -> StoreProvider:
    """Turn what a node factory was given into a provider: a store, a provider, or None."""
    if store is None:
        return get_default_store
    if isinstance(store, MemoryStore):
        fixed = store

        async def given() -> MemoryStore:
            return fixed

        return given
    return store
