"""BM25 is written once, in SQL (issue 48, decision 0044; issue 56, migration 0033):
`recall.bm25_term` (src/recall/db/schema.sql) scores a query term in a document with the idf of
`recall.bm25_idf`, the memories' keyword searches and RecallStore's (items.sql
`store_search_ranked`) call it, the keyword side's statements hand the second stage each term's
idf from `recall.bm25_idfs`, and no other SQL the package holds or the migrations leave takes a
logarithm. tests/integration/test_bm25_sql.py checks the functions against the textbook
formula."""

from __future__ import annotations

import re
from importlib import resources

from recall.db.sql import SCHEMA_FILE, parse_blocks, query
from tests.unit.test_schema_file import schema_functions

_LOG = re.compile(r"\bln\s*\(")
_CALL = "recall.bm25_term("
_IDF = "recall.bm25_idf("


def test_only_bm25_idf_takes_a_logarithm() -> None:
    in_schema = [f.name for f in schema_functions() if _LOG.search(f.body)]
    assert in_schema == ["recall.bm25_idf"]
    callers = sorted(f.name for f in schema_functions() if _IDF in f.body)
    assert callers == ["recall.bm25_idfs", "recall.bm25_term"]
    in_blocks = [
        f"{entry.name}:{name}"
        for entry in resources.files("recall.db").iterdir()
        if entry.name.endswith(".sql") and entry.name != SCHEMA_FILE
        for name, body in parse_blocks(entry.read_text("utf-8")).items()
        if _LOG.search(body.decode())
    ]
    assert in_blocks == []


def test_every_keyword_search_calls_it() -> None:
    callers = sorted({f.name for f in schema_functions() if _CALL in f.body})
    assert callers == ["recall.search_keyword", "recall.search_terms"]
    assert _CALL in query("store_search_ranked").decode()
    # recall.search_scoped takes its keyword side from recall.search_terms
    [scoped] = [f for f in schema_functions() if f.name == "recall.search_scoped"]
    assert "recall.search_terms(" in scoped.body


def test_the_second_stage_reads_the_idf_from_sql() -> None:
    for name in ("search_terms", "search_scoped"):
        statement = query(name).decode()
        assert "recall.bm25_idfs(term_df, memories) AS term_idf" in statement, name
        assert "recall.bm25_idf(0, memories) AS unheld_idf" in statement, name
