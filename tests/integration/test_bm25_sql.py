"""`recall.bm25_term` (migration 0026), the one place BM25 is written in SQL, computes the
formula `recall.search.bm25` states with its constants, and PostgreSQL inlines it into the
queries that call it (it costs no function call per term)."""

from __future__ import annotations

import itertools

import pytest

from recall.db.pool import connect_once
from recall.search import bm25
from recall.store import MemoryStore


def python_term(df: float, n: float, doc_len: int, avgdl: float, boost: float) -> float:
    """One term's BM25 from the module's constants."""
    norm = 1 + bm25.K1 * ((1 - bm25.B) + bm25.B * doc_len / avgdl)
    return boost * bm25.idf(df, n) * (bm25.K1 + 1) / norm


CASES = [
    (df, n, doc_len, avgdl, boost)
    for df, n, doc_len, avgdl, boost in itertools.product(
        [1.0, 3.0, 40.0], [1.0, 50.0, 5000.0], [0, 7, 120], [1.0, 9.5, 60.25], [1.0, 1.5, 2.0]
    )
    if df <= n
]


async def test_bm25_term_is_the_modules_formula(store: MemoryStore, database_url: str) -> None:
    conn = await connect_once(database_url)
    try:
        cur = await conn.execute(
            b"SELECT recall.bm25_term(c.df, c.n, c.doc_len, c.avgdl, c.boost)"
            b" FROM unnest(%s::float8[], %s::float8[], %s::int[], %s::float8[], %s::float8[])"
            b" WITH ORDINALITY AS c(df, n, doc_len, avgdl, boost, ord) ORDER BY c.ord",
            [list(column) for column in zip(*CASES, strict=True)],
        )
        sql = [float(row[0]) for row in await cur.fetchall()]
    finally:
        await conn.close()
    assert len(sql) == len(CASES) > 100
    assert sql == pytest.approx([python_term(*case) for case in CASES], rel=1e-12, abs=0)


async def test_it_is_inlined(store: MemoryStore, database_url: str) -> None:
    conn = await connect_once(database_url)
    try:
        cur = await conn.execute(
            b"EXPLAIN (VERBOSE, COSTS OFF) SELECT recall.bm25_term(g::float8, 100, g, 7.5, 1.5)"
            b" FROM generate_series(1, 3) AS g"
        )
        plan = "\n".join(str(row[0]) for row in await cur.fetchall())
    finally:
        await conn.close()
    assert "ln(" in plan and "bm25_term" not in plan
