"""`recall.search_scoped`'s rows (migration 0021) split into the calls they stand for."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from recall.rows import DETAIL_COLUMNS, SCOPED_COLUMNS, TERM_COLUMNS
from recall.search.assembly import split_scoped

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def scoped(part: int, key: int | None, near: int | None = None) -> tuple[Any, ...]:
    """One row of recall.search_scoped as the store reads it: a tuple in its columns' order."""
    ident = None if key is None else UUID(int=key)
    detail = part == 2
    row: dict[str, Any] = dict(
        part=part, near=near, id=ident,
        bm25=None if detail or key is None else float(key), matched=None if detail else [1],
        term_idf=[3.0] if part == 0 else None, unheld_idf=6.0 if part == 0 else None,
        memories=300.0 if part == 0 else None,
        conversation_id="c" if detail else None, user_message="u" if detail else None,
        ai_response="a" if detail else None, created_at=T0 if detail else None,
        metadata={} if detail else None, kind="turn" if detail else None,
        distance=0.1 * (key or 0) if detail else None, embedding=None,
        doc_len=5 if detail else None, prev_id=None, prev_distance=None, next_id=None,
        next_distance=None,
    )  # fmt: skip
    assert tuple(row) == SCOPED_COLUMNS
    return tuple(row.values())


def test_rows_split_into_terms_details_and_the_nearest_in_order() -> None:
    rows = [
        scoped(0, None),
        scoped(1, 7),
        scoped(2, 4, near=3),
        scoped(2, 9),  # brought by BM25 only
        scoped(2, 2, near=1),
        scoped(1, 4),
    ]
    split = split_scoped(rows)
    terms = [dict(zip(TERM_COLUMNS, t, strict=True)) for t in split[0]]
    details = [dict(zip(DETAIL_COLUMNS, d, strict=True)) for d in split[1]]
    assert [t["id"] for t in terms] == [None, UUID(int=7), UUID(int=4)]
    assert terms[0]["term_idf"] == [3.0] and terms[0]["unheld_idf"] == 6.0
    assert terms[0]["memories"] == 300.0
    assert terms[1]["bm25"] == 7.0 and terms[1]["matched"] == [1]
    assert [d["id"] for d in details] == [UUID(int=4), UUID(int=9), UUID(int=2)]  # as they came
    assert split[2] == [UUID(int=2), UUID(int=4)]  # by their place among the nearest
    assert details[0]["distance"] == 0.4 and details[0]["embedding"] is None
    assert details[0]["user_message"] == "u" and details[0]["doc_len"] == 5
