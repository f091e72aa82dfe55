"""The process-wide store, so `retrieve_memories` and `store_memories` work with no set-up.

The first node that needs it opens one `MemoryStore` from the environment (the embedded server
when no URL is set); every node of the process shares it. A server lifespan can install its own
with `set_default_store` and close it with `close_default_store`.

A store's pool belongs to the event loop it was opened on, so there is one such store per loop:
a process that serves async graphs and sync ones (whose work runs on recall's own loop,
`recall.nodes.blocking`) holds two, each used only on its own loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable

from recall.store import MemoryStore

__all__ = [
    "FixedStore",
    "StoreProvider",
    "close_default_store",
    "get_default_store",
    "home_loop",
    "provider_for",
    "set_default_store",
]

StoreProvider = Callable[[], Awaitable[MemoryStore]]

_tasks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[MemoryStore]] = (
    weakref.WeakKeyDictionary()
)
_stores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, MemoryStore] = (
    weakref.WeakKeyDictionary()
)


async def get_default_store() -> MemoryStore:
    """Return this event loop's process-wide store, opening it on first use.

    The opening runs as a shielded task: a caller that times out does not cancel it, and the
    next caller gets the store. A failed opening is retried by the next call.

    Raises:
        RecallError: the store could not be opened.
    """
    loop = asyncio.get_running_loop()
    store = _stores.get(loop)
    if store is not None:
        return store
    _forget_ended_loops()
    task = _tasks.get(loop)
    if task is None or (task.done() and task.exception()):
        task = _tasks[loop] = loop.create_task(_open(loop))
    return await asyncio.shield(task)


def _forget_ended_loops() -> None:
    """Drop the stores of loops that have ended (an `asyncio.run` a request, say): their pools
    cannot be used or closed any more, and a store refers to its loop, so the weak keys alone
    would keep them."""
    for table in (_stores, _tasks):
        for ended in [loop for loop in table if loop.is_closed()]:
            del table[ended]


async def _open(loop: asyncio.AbstractEventLoop) -> MemoryStore:
    store = await MemoryStore.connect().open()
    _stores[loop] = store
    return store


def set_default_store(store: MemoryStore | None) -> None:
    """Install the process-wide store of the loop it was opened on (or of the running loop);
    with None, forget every loop's."""
    if store is None:
        _stores.clear()
        _tasks.clear()
        return
    loop = store.loop
    if loop is None:
        loop = asyncio.get_running_loop()
    _stores[loop] = store
    _tasks.pop(loop, None)


async def close_default_store() -> None:
    """Close this event loop's process-wide store if one is open."""
    loop = asyncio.get_running_loop()
    store = _stores.pop(loop, None)
    task = _tasks.pop(loop, None)
    if store is None and task is not None and task.done() and not task.exception():
        store = task.result()
    if store is not None:
        await store.close()


class FixedStore:
    """The provider of a store a node was given: that store, on every call."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def __call__(self) -> MemoryStore:
        return self.store


def provider_for(store: MemoryStore | StoreProvider | None) -> StoreProvider:
    """Turn what a node factory was given into a provider: a store, a provider, or None."""
    if store is None:
        return get_default_store
    if isinstance(store, MemoryStore):
        return FixedStore(store)
    return store


def home_loop(provider: StoreProvider) -> asyncio.AbstractEventLoop | None:
    """The loop the provider's store was opened on, when it provides one fixed store."""
    return provider.store.loop if isinstance(provider, FixedStore) else None
