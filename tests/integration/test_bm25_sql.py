"""BM25 is written once, in SQL (migrations 0026 and 0033): `recall.bm25_term` computes the
textbook formula, `recall.bm25_idf` its idf and `recall.bm25_idfs` a query's terms' idf as the
second stage reads them, and PostgreSQL inlines the two scalar functions into the queries that
call them (they cost no function call per term)."""

from __future__ import annotations

import itertools
import math

import pytest

from recall.db.pool import connect_once
from recall.store import MemoryStore

K1, B = 1.2, 0.75  # Robertson and Zaragoza's usual constants, the ones recall's BM25 uses


def textbook_idf(df: float, n: float) -> float:
    """BM25's idf with 0.5 smoothing and the 1 + that keeps it positive."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def textbook_term(df: float, n: float, doc_len: int, avgdl: float, boost: float) -> float:
    """One term's BM25 in a document, counted once, times its boost."""
    norm = 1 + K1 * ((1 - B) + B * doc_len / avgdl)
    return boost * textbook_idf(df, n) * (K1 + 1) / norm


CASES = [
    (df, n, doc_len, avgdl, boost)
    for df, n, doc_len, avgdl, boost in itertools.product(
        [1.0, 3.0, 40.0], [1.0, 50.0, 5000.0], [0, 7, 120], [1.0, 9.5, 60.25], [1.0, 1.5, 2.0]
    )
    if df <= n
]


async def test_bm25_term_is_the_textbook_formula(store: MemoryStore, database_url: str) -> None:
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
    assert sql == pytest.approx([textbook_term(*case) for case in CASES], rel=1e-12, abs=0)


async def test_a_querys_idf_is_each_terms_and_0_where_none_holds_it(
    store: MemoryStore, database_url: str
) -> None:
    conn = await connect_once(database_url)
    try:
        cur = await conn.execute(
            b"SELECT recall.bm25_idfs('{3, 0, 40, 1}'::float8[], 50), recall.bm25_idf(0, 50),"
            b" recall.bm25_idfs('{}'::float8[], 50), recall.bm25_idfs(NULL, 50)"
        )
        row = await cur.fetchone()
    finally:
        await conn.close()
    assert row is not None
    idfs, unheld, empty, none = row
    expected = [textbook_idf(3, 50), 0.0, textbook_idf(40, 50), textbook_idf(1, 50)]
    assert idfs == pytest.approx(expected, rel=1e-12, abs=0)
    assert unheld == pytest.approx(textbook_idf(0, 50), rel=1e-12) and unheld > max(idfs)
    assert empty == [] and none is None


async def test_they_are_inlined(store: MemoryStore, database_url: str) -> None:
    conn = await connect_once(database_url)
    try:
        cur = await conn.execute(
            b"EXPLAIN (VERBOSE, COSTS OFF) SELECT recall.bm25_term(g::float8, 100, g, 7.5, 1.5)"
            b" FROM generate_series(1, 3) AS g"
        )
        plan = "\n".join(str(row[0]) for row in await cur.fetchall())
    finally:
        await conn.close()
    assert "ln(" in plan and "bm25_term" not in plan and "bm25_idf" not in plan
