"""The HTTP app mounted into the LangGraph server: opens the store once, in its lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from recall.runtime import close_default_store, get_default_store
from recall.store import MemoryStore

__all__ = ["app"]


@asynccontextmanager
async def lifespan(_app: Starlette) -> AsyncIterator[None]:
    """Open the process-wide store (pool, embedded server, model) once for all runs."""
    store: MemoryStore = await get_default_store()
    await store.warm_up()  # load the model before the first user waits
    try:
        yield
    finally:
        await close_default_store()


async def health(_request: Request) -> JSONResponse:
    """Report whether the memory store answers, with its memory count."""
    try:
        stats = await (await get_default_store()).stats()
    except Exception as exc:
        return JSONResponse({"ok": False, "error": str(exc)}, status_code=503)
    return JSONResponse({"ok": True, "memories": stats["memories"]})


app = Starlette(routes=[Route("/recall/health", health)], lifespan=lifespan)
