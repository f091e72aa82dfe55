"""The memory inspector: one page (`GET /recall/ui`) and the JSON API behind it
(`/recall/api/...`), where each user sees, searches and erases what the agent remembers of
them (docs/inspector.md).

Every API call names its user only through its bearer token (the same tokens as the LangGraph
API, `RECALL_AUTH_TOKENS`); no parameter can name another user, so a user reaches only their
own memories whatever ids they send. Bad input is a 4xx with a message, never a 500.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from importlib import resources
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from recall.errors import InvalidInputError, RecallError
from recall.limits import PAGE_SIZE
from recall.memory import Memory
from recall.metrics import METRICS
from recall.outbox import existing_outboxes
from recall.search.provenance import KEY, Provenance, repeats_of
from recall.server.auth import user_for
from recall.store import MemoryStore
from recall.store.shared import get_default_store

__all__ = ["ASSETS", "routes"]

log = structlog.stdlib.get_logger(__name__)

ASSETS = {"inspector.js": "text/javascript", "inspector.css": "text/css"}
MAX_PAGE = 100
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)

Handler = Callable[[Request, str, MemoryStore], Awaitable[Response]]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _authenticated(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Resolve the token to its user (401 without one), then run `handler` for that user;
    bad input becomes a 400 and a failing store a 503, each with a message."""

    async def endpoint(request: Request) -> Response:
        user = user_for(request.headers.get("authorization"))
        if user is None:
            return _error(401, "sign in with a valid token")
        try:
            return await handler(request, user, await get_default_store())
        except InvalidInputError as exc:
            return _error(400, str(exc))
        except RecallError as exc:
            log.warning("inspector.failed", error=str(exc))
            return _error(503, "the memory store is not available; try again later")

    return endpoint


def _memory(m: Memory) -> dict[str, Any]:
    provenance = Provenance.of(m.metadata)
    recorded = m.metadata.get(KEY)
    last_seen = recorded.get("last_seen") if isinstance(recorded, dict) else None
    return {
        "id": m.id,
        "created_at": m.created_at.isoformat(),
        "conversation_id": m.conversation_id,
        "user_message": m.user_message,
        "ai_response": m.ai_response,
        "kind": m.kind,
        "score": m.score,
        "similarity": m.similarity,
        "explanation": m.explanation,
        # provenance (docs/inspector.md): how many memories this turn restates, how often a
        # near-copy of it was written again and when last
        "restates": len(provenance.quoted) if provenance and provenance.is_restatement else 0,
        "repeats": repeats_of(m.metadata),
        "last_seen": last_seen,
    }


async def links(request: Request, user: str, store: MemoryStore) -> Response:
    """One of the user's memories with the memories retrieved for its turn (`sources`, with
    `quoted` naming those its reply quoted; `erased`, the ids of those since deleted) and the
    memories that restate it (404 when it is not one of theirs)."""
    found = await store.links(user, request.path_params["memory_id"])
    if found is None:
        return _error(404, "no such memory")
    provenance = Provenance.of(found.memory.metadata)
    return JSONResponse(
        {
            "memory": _memory(found.memory),
            "sources": [_memory(m) for m in found.sources],
            "quoted": list(provenance.quoted) if provenance else [],
            "restatements": [_memory(m) for m in found.restatements],
            "erased": found.erased,
        }
    )


def _int(request: Request, name: str, default: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidInputError(f"{name} must be a whole number, not {raw[:40]!r}") from exc
    if not 1 <= value <= high:
        raise InvalidInputError(f"{name} must be between 1 and {high}")
    return value


async def me(request: Request, user: str, store: MemoryStore) -> Response:
    """Who the token belongs to."""
    return JSONResponse({"user_id": user})


async def memories(request: Request, user: str, store: MemoryStore) -> Response:
    """The user's memories, newest first: `?limit=` (1-100; `recall.limits.PAGE_SIZE`, 20)
    and `?before=<cursor>` (the previous page's `next`)."""
    limit = _int(request, "limit", PAGE_SIZE, MAX_PAGE)
    before: tuple[datetime, str] | None = None
    if cursor := request.query_params.get("before"):
        at, _, mid = cursor.partition("|")
        try:
            before = (datetime.fromisoformat(at), mid)
        except ValueError as exc:
            raise InvalidInputError("before must be the `next` cursor of a previous page") from exc
    page = await store.page(user, limit + 1, before)
    more = len(page) > limit
    page = page[:limit]
    nxt = f"{page[-1].created_at.isoformat()}|{page[-1].id}" if more and page else None
    return JSONResponse({"memories": [_memory(m) for m in page], "next": nxt})


async def search(request: Request, user: str, store: MemoryStore) -> Response:
    """The user's memories ranked for `?q=` (cut to `RECALL_MAX_QUERY_LENGTH`, as the store
    cuts every query) in `?mode=` (semantic, keyword or hybrid; the store's default,
    `RECALL_MODE`, when left out, and the answer's `mode` says which it used), with their
    scores, `?limit=` (1-100; `recall.limits.PAGE_SIZE`, 20): those that pass, then the best
    the store keeps out, each marked `passes` as the store decided (the agent gets those that
    pass), with why in words (`why`) and, in the default mode, the raw parts of its score
    (`explanation`)."""
    query = request.query_params.get("q", "")
    limit = _int(request, "limit", PAGE_SIZE, MAX_PAGE)
    result = await store.find(
        user,
        query,
        limit=limit,
        mode=request.query_params.get("mode") or None,
        explain=True,
        kept_out=True,
        intent=False,  # a search box, not a turn of conversation: the gate reads no intent
    )
    rows = [{**_memory(f.memory), "passes": f.passes, "why": list(f.why)} for f in result.found]
    return JSONResponse(
        {
            "mode": result.mode,
            "threshold": result.threshold,
            "threshold_applies": result.threshold_applies,
            "memories": rows,
        }
    )


async def delete(request: Request, user: str, store: MemoryStore) -> Response:
    """Delete one of the user's memories (404 when it is not one of theirs)."""
    if not await store.delete(user, request.path_params["memory_id"]):
        return _error(404, "no such memory")
    return JSONResponse({"deleted": 1})


async def forget(request: Request, user: str, store: MemoryStore) -> Response:
    """Erase everything of the user, as `recall forget` does (the writer's queue included);
    the body must be `{"confirm": true}`."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or body.get("confirm") is not True:
        raise InvalidInputError('send {"confirm": true} to erase everything')
    with existing_outboxes(store.settings.queue_path) as outboxes:
        erased = await store.forget_user(user, outboxes=outboxes)
    log.info("inspector.forget.done", count=erased)
    return JSONResponse({"erased": erased})


async def summaries(request: Request, user: str, store: MemoryStore) -> Response:
    """The user's rolling conversation summaries and model-written memories."""
    rolling = await store.summaries(user)
    written = await store.page(user, MAX_PAGE, kind="summary")
    return JSONResponse(
        {
            "summaries": [
                {
                    "conversation_id": s.conversation_id,
                    "summary": s.summary,
                    "updated_at": s.updated_at.isoformat(),
                }
                for s in rolling
            ],
            "written": [_memory(m) for m in written],
        }
    )


async def metrics(request: Request, user: str, store: MemoryStore) -> Response:
    """The server's retrieval metrics over the window: counts and latencies of all searches,
    which say nothing of any user's data."""
    snap = METRICS.snapshot()
    keep = ("window_s", "searches", "p50_latency_ms", "p95_latency_ms", "empty_rate")
    return JSONResponse({**{k: snap[k] for k in keep}, "timeline": METRICS.timeline(10)})


async def page(request: Request) -> Response:
    """The inspector's page (no token needed to load it; every call it makes needs one)."""
    html = resources.files("recall.server").joinpath("ui", "index.html").read_text("utf-8")
    return HTMLResponse(html, headers=_security_headers())


async def asset(request: Request) -> Response:
    """The page's script and style sheet, served by the app itself (no CDN)."""
    name = request.path_params["name"]
    if name not in ASSETS:
        return _error(404, "no such file")
    text = resources.files("recall.server").joinpath("ui", name).read_text("utf-8")
    return Response(text, media_type=ASSETS[name], headers=_security_headers())


def _security_headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": _CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def routes() -> list[Route]:
    """The inspector's routes, for the app to mount."""
    return [
        Route("/recall/ui", page),
        Route("/recall/ui/{name}", asset),
        Route("/recall/api/me", _authenticated(me)),
        Route("/recall/api/memories", _authenticated(memories)),
        Route("/recall/api/memories/{memory_id}", _authenticated(delete), methods=["DELETE"]),
        Route("/recall/api/memories/{memory_id}/links", _authenticated(links)),
        Route("/recall/api/search", _authenticated(search)),
        Route("/recall/api/forget", _authenticated(forget), methods=["POST"]),
        Route("/recall/api/summaries", _authenticated(summaries)),
        Route("/recall/api/metrics", _authenticated(metrics)),
    ]
