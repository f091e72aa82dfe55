"""The HTTP app mounted into the LangGraph server: opens the store once, in its lifespan, and
serves health, stats, Prometheus metrics and the memory inspector (`/recall/ui`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from recall.config import process_settings
from recall.logs import configure_logging
from recall.metrics import METRICS, prometheus_registry
from recall.server import inspector
from recall.store import MemoryStore
from recall.store.shared import close_default_store, get_default_store

__all__ = ["app"]

_REGISTRY = prometheus_registry(METRICS)


async def _summaries(every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        METRICS.log_summary()


@asynccontextmanager
async def lifespan(_app: Starlette) -> AsyncIterator[None]:
    """Open the process-wide store (pool, embedded server, model) once for all runs, and log
    a metrics summary every `Settings.metrics_summary_s` seconds (60)."""
    settings = process_settings()
    configure_logging(settings.log_level)  # a no-op under the LangGraph server
    store: MemoryStore = await get_default_store()
    await store.warm_up()  # load the model before the first user waits
    ticker = asyncio.get_running_loop().create_task(_summaries(settings.metrics_summary_s))
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        await close_default_store()


async def health(_request: Request) -> JSONResponse:
    """Report whether the memory store answers, with its memory count."""
    try:
        stats = await (await get_default_store()).stats()
    except Exception as exc:
        return JSONResponse({"ok": False, "error": str(exc)}, status_code=503)
    return JSONResponse({"ok": True, "memories": stats["memories"]})


async def stats(_request: Request) -> JSONResponse:
    """The retrieval metrics over the window, totals and firing alerts, as JSON."""
    return JSONResponse(
        {
            "window": METRICS.snapshot(),
            "totals": METRICS.totals(),
            "alerts": sorted(METRICS.firing),
        }
    )


async def metrics(_request: Request) -> Response:
    """The retrieval metrics in Prometheus text format."""
    return Response(generate_latest(_REGISTRY), media_type=CONTENT_TYPE_LATEST)


app = Starlette(
    routes=[
        Route("/recall/health", health),
        Route("/recall/stats", stats),
        Route("/recall/metrics", metrics),
        Route("/metrics", metrics),
        *inspector.routes(),
    ],
    lifespan=lifespan,
)
