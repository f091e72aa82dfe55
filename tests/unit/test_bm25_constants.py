"""The live SQL scores BM25 with `recall.search.bm25`'s constants: the latest migration that
defines each function, and the items' statement (`recall/db/items.sql`), read as text. A
number there that differs from the module's fails here (the SQL cannot take them as
parameters: a released migration is never edited)."""

from __future__ import annotations

import math
import re

import pytest

from recall.db.sql import parse_blocks
from recall.search import bm25
from tests.conftest import ROOT

MIGRATIONS = ROOT / "migrations"
ITEMS_SQL = ROOT / "src" / "recall" / "db" / "items.sql"

_DEFINES = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+recall\.(\w+)", re.IGNORECASE)
_NUM = r"(\d+(?:\.\d+)?)"
# idf(df, n) * (k1 + 1) / (1 + k1 * ((1 - b) + b * doc_len / avgdl)), a term counted once
_BM25 = re.compile(
    rf"ln\(1 \+ \(\w+\.n - df\.df \+ {_NUM}\) / \(df\.df \+ {_NUM}\)\)\s*"
    rf"\* {_NUM} / \(1 \+ {_NUM} \* \({_NUM} \+ {_NUM} \* \w+\.doc_len / \w+\.avgdl\)\)"
)
_SATURATED = re.compile(r"(\w+(?:\([^()]*\))?) / \(\1 \+ " + _NUM + r"\)")


def live_functions() -> dict[str, tuple[str, str]]:
    """Each function's live definition: (migration file, its text up to the next definition)."""
    live: dict[str, tuple[str, str]] = {}
    for path in sorted(MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        text = path.read_text("utf-8")
        found = list(_DEFINES.finditer(text))
        for here, after in zip(found, [*found[1:], None], strict=False):
            body = text[here.start() : after.start() if after else len(text)]
            live[here.group(1)] = (path.name, body)
    return live


def bm25_sources() -> list[tuple[str, str]]:
    """(where, text) of every live piece of SQL that computes BM25."""
    out = [(f"{name} ({file})", body) for name, (file, body) in live_functions().items()]
    out += [(f"items.sql {name}", sql.decode()) for name, sql in parse_blocks(
        ITEMS_SQL.read_text("utf-8")).items()]  # fmt: skip
    return [(where, text) for where, text in out if "ln(" in text]


def test_the_live_bm25_sql_is_where_it_is_expected() -> None:
    where = {w.split(" ")[0] for w, _t in bm25_sources()}
    assert where == {"search_keyword", "search_terms", "items.sql"}
    assert live_functions()["search_keyword"][0] == "0023_stable_ties.sql"
    assert live_functions()["search_terms"][0] == "0025_keyword_side_grouped_by_id.sql"


@pytest.mark.parametrize(("where", "text"), [pytest.param(w, t, id=w) for w, t in bm25_sources()])
def test_the_live_bm25_uses_the_modules_constants(where: str, text: str) -> None:
    formulas = _BM25.findall(text)
    assert len(formulas) == text.count("ln("), f"{where}: BM25 written in a form this test misses"
    expected = (
        bm25.IDF_SMOOTHING,
        bm25.IDF_SMOOTHING,
        bm25.K1 + 1,
        bm25.K1,
        1 - bm25.B,
        bm25.B,
    )
    for numbers in formulas:
        assert tuple(float(v) for v in numbers) == pytest.approx(expected, abs=1e-12), where


def test_the_items_hybrid_saturates_bm25_with_the_modules_constant() -> None:
    text = parse_blocks(ITEMS_SQL.read_text("utf-8"))["store_search_ranked"].decode()
    found = _SATURATED.findall(text)
    assert found, "the items' hybrid no longer saturates BM25 in a form this test reads"
    assert {float(n) for _x, n in found} == {bm25.SATURATION}


def test_idf_and_saturation_are_the_sql_formulas() -> None:
    # ln(1 + (n - df + 0.5) / (df + 0.5)) and bm25 / (bm25 + 5), as the SQL writes them
    assert bm25.idf(3.0, 100.0) == math.log(1 + (100.0 - 3.0 + 0.5) / (3.0 + 0.5))
    assert bm25.saturated(bm25.SATURATION) == 0.5
    assert bm25.saturated(2.0) == 2.0 / (2.0 + 5)
