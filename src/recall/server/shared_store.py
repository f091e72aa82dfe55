"""The store the example server gives its graphs (`runtime.store`, `get_store()`) and its
`/store` API: a `RecallStore` on the project's database, named in langgraph.json as
`"store": {"path": "./src/recall/server/shared_store.py:generate_store"}`.

The LangGraph server enters `generate_store()` once per worker thread and leaves it on
shutdown. Items are embedded with the project's offline model (`RECALL_EMBEDDING_MODEL`), every
text of an item's value (`fields: ["$"]`), and ranked by cosine. For other choices write a
factory of your own: it is these few lines with other arguments (docs/basestore.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from recall.basestore import RecallStore

__all__ = ["generate_store"]


@asynccontextmanager
async def generate_store() -> AsyncIterator[RecallStore]:
    """Open the example server's `RecallStore` (embedded database unless
    `RECALL_DATABASE_URL` is set) and close it when the server stops."""
    async with RecallStore.connect(index={"fields": ["$"]}) as store:
        yield store
