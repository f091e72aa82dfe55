"""MemoryNode: a recall node that runs in sync and async graphs alike.

LangGraph runs an `async def` node only under `ainvoke`/`astream`; under `invoke` it raises
"No synchronous function provided". A `MemoryNode` is a Runnable with both: its async side awaits
the node's body on the caller's loop, its sync side runs the same body on recall's own loop
(`recall.nodes.blocking`), or on the loop its store was opened on. Awaiting the node itself
(`await node(state, config)`) calls the body, as the plain async functions did.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Callable, Coroutine
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from recall.nodes.blocking import run_or

__all__ = ["Body", "MemoryNode"]

Body = Callable[[Any, RunnableConfig], Coroutine[Any, Any, dict[str, Any]]]
"""A node's async body: `(state, config) -> update`; it never raises."""


class MemoryNode(RunnableLambda[Any, dict[str, Any]]):
    """A LangGraph node with a sync and an async side over one async body.

    Args:
        body: the node's work; it never raises.
        name: the node's name (LangGraph names the node by it when none is given).
        fallback: what the sync side returns when the body could not be run at all (its store
            lives on a loop that has ended): the body's own empty answer.
        home: the loop the node's store was opened on, when it was given one; None: recall's
            own loop serves sync calls.
        event: the log event of such a failure (`memory.retrieve.error`, `memory.write.error`).
    """

    def __init__(
        self,
        body: Body,
        *,
        name: str,
        fallback: dict[str, Any],
        home: asyncio.AbstractEventLoop | None = None,
        event: str,
    ) -> None:
        self._body = body
        self._fallback = fallback
        self._home = home
        self._event = event
        super().__init__(self._blocking, afunc=body, name=name)

    def _blocking(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return run_or(
            lambda: self._body(state, config),
            lambda: copy.deepcopy(self._fallback),
            event=self._event,
            loop=self._home,
        )

    @functools.cached_property
    def deps(self) -> list[Runnable[Any, Any]]:
        """None: the node calls no Runnable of its own. (RunnableLambda reads a function's
        free variables for them; the sync side's is the node itself, and LangGraph's search
        for subgraphs would go round it for ever.)"""
        return []

    def __repr__(self) -> str:
        return f"MemoryNode({self.name})"

    async def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Run the node's body on this loop (as `ainvoke` does, without a tracing run)."""
        return await self._body(state, config)
