"""`recall reembed`: rebuild every stored embedding with another model, search staying up.

Same dimension: rows are re-embedded in place, batch by batch. Another dimension: a new column
`embedding_next vector(N)` is filled batch by batch while searches keep using the old one, then
one short transaction swaps the columns and the per-user indexes are rebuilt.

Either way, a turn is embedded with its user text and its reply's own words (decision 0038),
and every memory not judged by the writer's current rule is judged last (`recall.db.judge_stored`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from psycopg import AsyncConnection, sql

from recall.db.citus import is_citus, keep_inline
from recall.db.judge_stored import judge_stored
from recall.db.migrate import lock_schema
from recall.db.sql import fetch_all, fetch_one, query, run
from recall.embeddings import Embedder
from recall.memory import embedding_text, own_words
from recall.rows import EmbeddingSpace, ReembedRow

__all__ = ["reembed"]

log = structlog.stdlib.get_logger(__name__)

Progress = Callable[[int], Awaitable[None] | None]


async def _fill(
    conn: AsyncConnection[Any],
    embedder: Embedder,
    select: str,
    update: str,
    *,
    batch: int,
    on_progress: Progress | None,
) -> int:
    done = 0
    while True:
        params = {"model_name": embedder.name, "batch": batch}
        rows = await fetch_all(conn, select, params, ReembedRow)
        if not rows:
            return done
        vectors = await embedder.embed_documents(
            [embedding_text(r.user_message, r.ai_response, own_words(r.metadata)) for r in rows]
        )
        async with conn.transaction(), conn.cursor() as wcur:
            await wcur.executemany(
                query(update),
                [
                    {"user_id": r.user_id, "id": r.id, "embedding": v, "model_name": embedder.name}
                    for r, v in zip(rows, vectors, strict=True)
                ],
            )
        done += len(rows)
        if on_progress is not None and (res := on_progress(done)) is not None:
            await res


async def reembed(
    conn: AsyncConnection[Any],
    embedder: Embedder,
    *,
    batch: int = 256,
    on_progress: Progress | None = None,
) -> int:
    """Re-embed every memory not embedded by `embedder`, then judge every memory not judged
    by the current rule (`recall.db.judge_stored.judge_stored`); return how many memories were
    rebuilt or judged (a memory both counts twice).

    `conn` must be autocommit and have pgvector registered. Per-user indexes are dropped by a
    dimension change; call `MemoryStore.optimize()` afterwards to rebuild them.
    """
    dims = await embedder.dimensions()
    space = await fetch_one(conn, "get_embedding_space", None, EmbeddingSpace)

    async def fill(statements: str, progress: Progress | None) -> int:
        """Embed every memory the `reembed_<statements>_batch` statement finds."""
        select, update = f"reembed_{statements}_batch", f"reembed_{statements}_update"
        return await _fill(conn, embedder, select, update, batch=batch, on_progress=progress)

    if space is not None and space.dimensions == dims:
        done = await fill("in_place", on_progress)
        async with conn.transaction():
            await lock_schema(conn)
            await run(
                conn, "update_embedding_space", {"model_name": embedder.name, "dimensions": dims}
            )
        log.info("db.reembed.done", model=embedder.name, dimensions=dims, count=done)
        return done + await judge_stored(conn, embedder, batch=batch, on_progress=on_progress)
    await conn.execute(
        sql.SQL(
            "ALTER TABLE recall.memories ADD COLUMN IF NOT EXISTS embedding_next vector({})"
        ).format(sql.Literal(dims))
    )
    await keep_inline(conn, "embedding_next", citus=await is_citus(conn))  # in the row (0006)
    done = await fill("next", on_progress)
    async with conn.transaction():
        await lock_schema(conn)
        await run(conn, "reembed_lock_table")
        # turns written by the old model while we filled: embed them under the lock
        done += await fill("next", None)
        for step in ("drop", "rename", "not_null", "indexes"):
            await run(conn, f"reembed_swap_{step}")
        await run(conn, "update_embedding_space", {"model_name": embedder.name, "dimensions": dims})
    log.info("db.reembed.done", model=embedder.name, dimensions=dims, count=done)
    return done + await judge_stored(conn, embedder, batch=batch, on_progress=on_progress)
