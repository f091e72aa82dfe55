"""Deterministic search cases for the rankers' golden test (`test_ranker_golden.py`): synthetic
candidates with the shipped bge-small second stage's dimensions, made from a seeded generator
so that the scores recorded in `data/ranker_golden.json` can be recomputed exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

import numpy as np

from recall.rows import CandidateRow, MemoryRow

NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
DIMS = 384
CASES = 24

_QUERIES = (
    "what did I say about my dog's vet appointment",
    "where do I live now",
    "hi there",
    "what car do I drive",
    "when did I start cello lessons last summer",
    "what did we talk about yesterday",
    "recommend a book like the one I read in March",
    "thanks, that's all",
)
_MESSAGES = (
    "I live in Lisbon with my partner",
    "I drive a blue Honda Civic",
    "My dog Max has a vet appointment on Tuesday",
    "I started cello lessons in July 2025",
    "Can you recommend a thriller?",
    "I read The Name of the Rose in March",
    "What's the weather like?",
    "I moved to Porto last spring",
    "I drive a Tesla now",
    "We talked about my sister's wedding yesterday",
    "Where is the nearest bakery?",
    "My favourite band is Radiohead",
)
_REPLIES = ("Noted.", "That sounds lovely!", "Here are a few ideas: 1, 2, 3.", "")


def textbook_idf(df: float, n: float) -> float:
    """BM25's idf as the textbook writes it (Robertson's, with 0.5 smoothing and the 1 + that
    keeps it positive): what `recall.bm25_idf` hands the second stage in SQL."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class Case:
    """One query and its candidates, in both the second stage's and the fusion's form."""

    query: str
    vector: np.ndarray
    rows: list[CandidateRow]
    vector_order: list[int]
    vector_hits: list[MemoryRow]
    keyword_hits: list[MemoryRow]


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIMS)
    out: np.ndarray = v / np.linalg.norm(v)
    return out


def _case(n: int) -> Case:
    rng = np.random.default_rng(1000 + n)
    query = _QUERIES[n % len(_QUERIES)]
    qv = _unit(rng)
    size = int(rng.integers(1 if n % 7 == 0 else 3, 30))
    terms = len(query.split())
    term_df = [float(rng.integers(0, 40)) for _ in range(terms)]
    memories = float(rng.integers(max(size, 1), 400))
    term_idf = [textbook_idf(df, memories) if df > 0 else 0.0 for df in term_df]
    rows: list[CandidateRow] = []
    for _ in range(size):
        emb = 0.6 * qv * rng.uniform(0, 1) + _unit(rng)
        emb = emb / np.linalg.norm(emb)
        hit = rng.uniform() < 0.5
        matched = sorted({int(t) for t in rng.integers(1, terms + 1, size=2)}) if hit else []
        rows.append(
            CandidateRow(
                id=UUID(int=int(rng.integers(1, 2**62))),
                conversation_id=None if rng.uniform() < 0.1 else f"c{int(rng.integers(0, 5))}",
                user_message=_MESSAGES[int(rng.integers(0, len(_MESSAGES)))],
                ai_response=_REPLIES[int(rng.integers(0, len(_REPLIES)))],
                created_at=NOW - timedelta(days=float(rng.uniform(0, 400))),
                metadata={},
                kind="turn",
                distance=float(1.0 - qv @ emb),
                bm25=float(rng.uniform(0.1, 12.0)) if hit else 0.0,
                doc_len=int(rng.integers(3, 60)),
                matched=matched,
                prev_distance=None if rng.uniform() < 0.3 else float(rng.uniform(0.2, 1.0)),
                prev_matched=[1] if rng.uniform() < 0.2 else [],
                prev_bm25=float(rng.uniform(0, 5)) if rng.uniform() < 0.2 else 0.0,
                next_distance=None if rng.uniform() < 0.3 else float(rng.uniform(0.2, 1.0)),
                next_matched=[1] if rng.uniform() < 0.2 else [],
                next_bm25=float(rng.uniform(0, 5)) if rng.uniform() < 0.2 else 0.0,
                term_idf=term_idf,
                unheld_idf=textbook_idf(0.0, memories),
                memories=memories,
            )
        )
    vector_order = sorted(range(size), key=lambda i: (rows[i].distance, rows[i].id))
    hits = [
        MemoryRow(r.id, r.conversation_id, r.user_message, r.ai_response, r.created_at,
                  r.metadata, r.kind, r.distance, r.bm25 or None)
        for r in rows
    ]  # fmt: skip
    keyword_order = sorted(
        (i for i in range(size) if rows[i].bm25 > 0), key=lambda i: (-rows[i].bm25, rows[i].id)
    )
    return Case(
        query=query,
        vector=qv,
        rows=rows,
        vector_order=vector_order,
        vector_hits=[hits[i] for i in vector_order[: max(1, size - 3)]],
        keyword_hits=[hits[i] for i in keyword_order],
    )


def cases() -> list[Case]:
    """The golden test's cases, the same on every call."""
    return [_case(n) for n in range(CASES)]
