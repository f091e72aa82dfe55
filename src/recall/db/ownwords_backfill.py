"""Bring turns stored before decision 0038 over to their own words, searches staying up.

A turn stored before migration 0024 whose reply quotes memories has provenance ("quoted" ids
under the metadata key "recall") but no "own": it is embedded and indexed with its whole
reply, quotes included. `bring_over` judges each such turn as the writer now does: the reply
less its sentences that quote one of the sources (`recall.search.ownwords.own_part`), read
by id among the same user's memories. A source erased since is left out: the sentences that
quote the sources still stored are removed, and where none is stored the reply stays whole.

Batch by batch, each batch its own short transaction, and the vectors computed before it: it
writes "own" into the metadata (a string, or null where the whole reply is its own), and the
row's vector of the new text; the trigger recomputes `fts` and `doc_len`, and the user's
token count follows. A row is done once its provenance has "own", whatever its value: a second
run finds nothing to do. `recall reembed` runs it after rebuilding vectors with a new model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import structlog
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from recall.db.sql import fetch_all, fetch_value, run
from recall.embeddings import Embedder
from recall.memory import embedding_text
from recall.rows import OwnWordsRow, ReembedRow
from recall.search.ownwords import own_part
from recall.search.provenance import Provenance

__all__ = ["bring_over"]

log = structlog.stdlib.get_logger(__name__)

Progress = Callable[[int], Awaitable[None] | None]
_BEFORE_ALL = ("", UUID(int=0))  # before every (user_id, id): a user id is never empty


async def _sources(
    conn: AsyncConnection[Any], rows: list[OwnWordsRow]
) -> dict[tuple[str, UUID], tuple[str, str]]:
    """The stored (user text, reply) of every memory the batch's turns quote, by (user, id)."""
    wanted = {
        (r.user_id, UUID(q))
        for r in rows
        if (p := Provenance.of(r.metadata)) is not None
        for q in p.quoted
    }
    if not wanted:
        return {}
    params = {"users": sorted({u for u, _ in wanted}), "ids": sorted({i for _, i in wanted})}
    found = await fetch_all(conn, "own_words_sources", params, ReembedRow)
    return {
        (s.user_id, s.id): (s.user_message, s.ai_response)
        for s in found
        if (s.user_id, s.id) in wanted
    }


def _own(row: OwnWordsRow, sources: dict[tuple[str, UUID], tuple[str, str]]) -> str | None:
    """The turn's own part from the sources still stored (None: the whole reply)."""
    provenance = Provenance.of(row.metadata)
    quoted = provenance.quoted if provenance is not None else ()
    texts = [t for q in quoted if (t := sources.get((row.user_id, UUID(q)))) is not None]
    return own_part(row.ai_response, texts)


async def bring_over(
    conn: AsyncConnection[Any],
    embedder: Embedder,
    *,
    batch: int = 256,
    on_progress: Progress | None = None,
) -> int:
    """Judge every stored turn that quotes memories and has no own part recorded, record it
    and re-embed the turn; return how many were brought over.

    `conn` must be autocommit and have pgvector registered; `embedder` is the model the
    stored vectors are of (rows of another model are left alone: rebuild those first).

    Raises:
        psycopg.Error: the database failed; the batches before are kept, and a run again goes
            on from there.
    """
    after = _BEFORE_ALL
    done = 0
    while True:
        params = {"after_user": after[0], "after_id": after[1], "batch": batch}
        rows = await fetch_all(conn, "own_words_batch", params, OwnWordsRow)
        if not rows:
            break
        after = (rows[-1].user_id, rows[-1].id)
        sources = await _sources(conn, rows)
        owns = [_own(r, sources) for r in rows]
        vectors = await embedder.embed_documents(
            [
                embedding_text(r.user_message, r.ai_response, o)
                for r, o in zip(rows, owns, strict=True)
            ]
        )
        delta: dict[str, int] = defaultdict(int)
        async with conn.transaction():
            for row, own, vector in zip(rows, owns, vectors, strict=True):
                update = {
                    "user_id": row.user_id,
                    "id": row.id,
                    "own": Jsonb(own),
                    "embedding": vector,
                    "model_name": embedder.name,
                }
                doc_len = await fetch_value(conn, "own_words_update", update)
                if doc_len is not None:  # None: brought over meanwhile, or another model's
                    delta[row.user_id] += int(doc_len) - row.doc_len
                    done += 1
            # in user order, as the insert and delete triggers lock users (no deadlock)
            for user_id in sorted(u for u, d in delta.items() if d):
                await run(conn, "own_words_tokens", {"user_id": user_id, "delta": delta[user_id]})
        if on_progress is not None and (res := on_progress(done)) is not None:
            await res
    log.info("db.own_words.done", model=embedder.name, count=done)
    return done
