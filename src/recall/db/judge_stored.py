"""Judge the turns stored before the writer judged them, or by an older rule, searches staying
up (issue 54, decision 0049; decision 0038 for their own words).

The writer judges each turn when it is written (`recall.search.judging.judged`): its reply's
own words, what it holds, and which source it states anew. A turn stored before migration 0027
(or under an older `RULE`) has no such judgement, or an old one: `judge_stored` makes it, batch
by batch, as the writer would have. Its reply's own part comes from the sources it quotes,
read by id among the same user's memories (a source erased since is left out: where none is
stored the reply stays whole), and so does the source it states anew
(`recall.search.provenance.updated`). Where its own words change, its vector is computed
again before the batch's short transaction.

It writes the judgement into the metadata under "recall" key by key (a repeat counted
meanwhile is kept); the trigger fills the columns the searches read and recomputes `fts` and
`doc_len`, and the user's token count follows. A row is done once its `judged` column is the
current rule: a second run finds nothing to do, and a row judged meanwhile by another process
is left alone. Until a row is judged, a search judges it when it meets it
(`recall.search.judging.holds_nothing`). A store runs this in the background when it opens
(`Maintenance.schedule_judging`, one process at a time), and `recall reembed` after
rebuilding vectors.
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
from recall.memory import LIBRARY_KEY, embedding_text, own_words
from recall.rows import JudgeRow, ReembedRow
from recall.search.judging import RULE, judged
from recall.search.ownwords import own_part
from recall.search.provenance import Provenance, updated

__all__ = ["judge_stored", "judge_stored_once"]

log = structlog.stdlib.get_logger(__name__)

Progress = Callable[[int], Awaitable[None] | None]
Sources = dict[tuple[str, UUID], tuple[str, str]]
_BEFORE_ALL = ("", UUID(int=0))  # before every (user_id, id): a user id is never empty


async def _sources(conn: AsyncConnection[Any], rows: list[JudgeRow]) -> Sources:
    """The stored (user text, reply) of every memory the batch's turns were given, by (user,
    id)."""
    wanted = {
        (r.user_id, UUID(q))
        for r in rows
        if (p := Provenance.of(r.metadata)) is not None
        for q in p.sources
    }
    if not wanted:
        return {}
    params = {"users": sorted({u for u, _ in wanted}), "ids": sorted({i for _, i in wanted})}
    found = await fetch_all(conn, "judging_sources", params, ReembedRow)
    return {
        (s.user_id, s.id): (s.user_message, s.ai_response)
        for s in found
        if (s.user_id, s.id) in wanted
    }


def _entry(row: JudgeRow, sources: Sources) -> dict[str, Any]:
    """What the writer would record under "recall" for the turn today: its own part (for a
    reply that quotes), the source it states anew, what it holds and the rule."""
    provenance = Provenance.of(row.metadata)
    entry: dict[str, Any] = {}
    metadata = row.metadata
    if provenance is not None and row.kind == "turn":
        given = [(q, *t) for q in provenance.sources if (t := sources.get((row.user_id, UUID(q))))]
        if provenance.quoted:
            quoted = [(u, a) for q, u, a in given if q in provenance.quoted]
            entry["own"] = own_part(row.ai_response, quoted)
        if not provenance.restates:
            entry["supersedes"] = updated(row.user_message, given)
        metadata = {**metadata, LIBRARY_KEY: {**metadata.get(LIBRARY_KEY, {}), **entry}}
    recorded = judged(metadata, row.user_message, row.ai_response, row.kind)[LIBRARY_KEY]
    return {**entry, "holds": recorded["holds"], "rule": recorded["rule"]}


async def judge_stored(
    conn: AsyncConnection[Any],
    embedder: Embedder,
    *,
    batch: int = 256,
    on_progress: Progress | None = None,
) -> int:
    """Judge every stored memory not judged by the current rule, record it and re-embed a turn
    whose own words changed; return how many were judged.

    `conn` must be autocommit, see every user (the owner role, or all users' scope) and have
    pgvector registered; `embedder` is the model the stored vectors are of (a row of another
    model whose own words change is left alone: rebuild those first).

    Raises:
        psycopg.Error: the database failed; the batches before are kept, and a run again goes
            on from there.
    """
    after = _BEFORE_ALL
    done = 0
    while True:
        params = {"after_user": after[0], "after_id": after[1], "batch": batch, "rule": RULE}
        rows = await fetch_all(conn, "judging_batch", params, JudgeRow)
        if not rows:
            break
        after = (rows[-1].user_id, rows[-1].id)
        sources = await _sources(conn, rows)
        entries = [_entry(r, sources) for r in rows]
        changed = [
            i
            for i, (r, e) in enumerate(zip(rows, entries, strict=True))
            if "own" in e and e["own"] != own_words(r.metadata)
        ]
        texts = [embedding_text(rows[i].user_message, rows[i].ai_response, entries[i]["own"])
                 for i in changed]  # fmt: skip
        vectors = dict(zip(changed, await embedder.embed_documents(texts), strict=True))
        delta: dict[str, int] = defaultdict(int)
        async with conn.transaction():
            for i, (row, entry) in enumerate(zip(rows, entries, strict=True)):
                update = {
                    "user_id": row.user_id,
                    "id": row.id,
                    "entry": Jsonb({k: v for k, v in entry.items() if v is not None or k == "own"}),
                    "clear": [k for k, v in entry.items() if v is None and k != "own"],
                    "embedding": vectors.get(i),
                    "reembed": i in vectors,
                    "model_name": embedder.name,
                    "rule": RULE,
                }
                doc_len = await fetch_value(conn, "judging_update", update)
                if doc_len is not None:  # None: judged meanwhile, or another model's
                    delta[row.user_id] += int(doc_len) - row.doc_len
                    done += 1
            # in user order, as the insert and delete triggers lock users (no deadlock)
            for user_id in sorted(u for u, d in delta.items() if d):
                await run(conn, "judging_tokens", {"user_id": user_id, "delta": delta[user_id]})
        if on_progress is not None and (res := on_progress(done)) is not None:
            await res
    log.info("db.judging.done", model=embedder.name, rule=RULE, count=done)
    return done


async def judge_stored_once(
    conn: AsyncConnection[Any], embedder: Embedder, *, batch: int = 256
) -> int | None:
    """`judge_stored` unless another process is at it (an advisory lock, taken on `conn`'s
    session and released before it returns); None when one is."""
    if not await fetch_value(conn, "judging_try_lock"):
        return None
    try:
        return await judge_stored(conn, embedder, batch=batch)
    finally:
        await run(conn, "judging_unlock")
