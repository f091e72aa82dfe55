"""BM25 is written once (issue 48, decision 0044): `recall.bm25_term` (src/recall/db/schema.sql,
migration 0026) scores a query term in a document, the memories' keyword searches and
RecallStore's (items.sql `store_search_ranked`) call it, and no other SQL the package holds or
the migrations leave takes a logarithm. tests/integration/test_bm25_sql.py checks the function's
values against `recall.search.bm25`'s constants."""

from __future__ import annotations

import re
from importlib import resources

from recall.db.sql import SCHEMA_FILE, parse_blocks, query
from tests.unit.test_schema_file import schema_functions

_LOG = re.compile(r"\bln\s*\(")
_CALL = "recall.bm25_term("


def test_only_bm25_term_takes_a_logarithm() -> None:
    in_schema = [f.name for f in schema_functions() if _LOG.search(f.body)]
    assert in_schema == ["recall.bm25_term"]
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
