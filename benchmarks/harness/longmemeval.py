"""LongMemEval_S's dev questions (../shared/data/longmemeval_s_dev.json.gz, README beside it) as
users of the store: each question's haystack is one user (one memory per user turn with the
assistant reply that follows it, dated by its session, a minute apart in order), the question is
asked at its `question_date`, and a hit is a returned memory from an answer session.

The haystacks share most of their sessions, so every distinct turn text is embedded once and
kept in `.recall/longmemeval-vectors.npz` (keyed by the text's hash), which later runs read."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from recall.embeddings import Embedder
from recall.memory import make_turn

from .report import ROOT
from .vectorcache import save, saved

LONGMEMEVAL = ROOT.parent / "shared" / "data" / "longmemeval_s_dev.json.gz"
VECTORS = ROOT / ".recall" / "longmemeval-vectors.npz"
MAX_LENGTH = 2000  # the store's default max_message_length: what it would embed and keep


@dataclass
class Record:
    """One question and its user's haystack as `add_turns` items (no user id, no vector)."""

    qid: str
    kind: str  # question_type
    question: str
    asked: datetime
    answer: str
    answer_sessions: frozenset[str]
    turns: list[dict[str, Any]] = field(default_factory=list)
    evidence: frozenset[str] = frozenset()  # the user turns the file marks `has_answer`

    @property
    def user(self) -> str:
        """The user holding this question's haystack."""
        return f"lme-{self.qid}"


def _date(raw: str) -> datetime:
    """'2023/03/27 (Mon) 00:49' as a UTC datetime."""
    day, _weekday, clock = raw.split(" ")
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def load(path: Path = LONGMEMEVAL) -> list[Record]:
    """Every record of the file, its haystack as turn items (sessions in date order)."""
    raw = json.loads(gzip.decompress(path.read_bytes()))
    out = []
    for r in raw:
        record = Record(
            qid=r["question_id"],
            kind=r["question_type"],
            question=r["question"],
            asked=_date(r["question_date"]),
            answer=str(r["answer"]),
            answer_sessions=frozenset(r["answer_session_ids"]),
            evidence=frozenset(
                t["content"]
                for sid, turns in zip(
                    r["haystack_session_ids"], r["haystack_sessions"], strict=True
                )
                if sid in r["answer_session_ids"]
                for t in turns
                if t["role"] == "user" and t.get("has_answer")
            ),
        )
        haystack = zip(
            r["haystack_dates"], r["haystack_session_ids"], r["haystack_sessions"], strict=True
        )
        sessions = sorted(haystack, key=lambda s: _date(s[0]))
        for when, sid, turns in sessions:
            start = _date(when)
            for i, turn in enumerate(turns):
                if turn["role"] != "user" or not turn["content"].strip():
                    continue
                reply = turns[i + 1]["content"] if i + 1 < len(turns) else ""
                if turns[i + 1 :] and turns[i + 1]["role"] != "assistant":
                    reply = ""
                record.turns.append(
                    {
                        "user_message": turn["content"],
                        "ai_response": reply if reply.strip() else "(no reply)",
                        "conversation_id": sid,
                        "created_at": start + timedelta(minutes=i),
                        "metadata": {"session": sid},
                    }
                )
        out.append(record)
    return out


def stored_text(item: dict[str, Any]) -> str:
    """The text the store embeds for a turn item."""
    turn = make_turn("u", item["user_message"], item["ai_response"], max_length=MAX_LENGTH)
    return turn.text


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324  # a cache key


def saved_vectors(path: Path = VECTORS) -> dict[str, np.ndarray]:
    """The vectors `vectors` has kept in `path`, by their text's hash."""
    return saved(path)


async def vectors(
    embedder: Embedder, records: list[Record], path: Path = VECTORS
) -> dict[str, np.ndarray]:
    """Each distinct stored text's vector by its hash: read from `path`, the missing ones
    embedded by `embedder` (the store's) (in chunks, the file rewritten after each, so an
    interrupted run resumes)."""
    have = saved_vectors(path) if path.exists() else {}  # noqa: ASYNC240  # read once
    wanted: dict[str, str] = {}
    for record in records:
        for item in record.turns:
            text = stored_text(item)
            key = _key(text)
            if key not in have:
                wanted.setdefault(key, text)
    todo = list(wanted.items())
    chunk = 2048
    for start in range(0, len(todo), chunk):
        part = todo[start : start + chunk]
        embedded = await embedder.embed_documents([t for _k, t in part])
        for (key, _t), vec in zip(part, embedded, strict=True):
            have[key] = np.asarray(vec, dtype=np.float32)
        save(have, path)
        done = min(start + chunk, len(todo))
        print(f"longmemeval vectors: {done} of {len(todo)} new", flush=True)
    return have


def items(record: Record, table: dict[str, np.ndarray]) -> Iterator[dict[str, Any]]:
    """A record's haystack as `add_turns` items for its user, with their vectors."""
    for item in record.turns:
        yield {**item, "user_id": record.user, "embedding": table[_key(stored_text(item))]}


def one_user(
    records: list[Record], table: dict[str, np.ndarray], size: int, user: str
) -> tuple[list[dict[str, Any]], list[tuple[Record, frozenset[int]]]]:
    """A user of at most `size` distinct turns from the records' haystacks (issue 56: a real
    large user, not cycled pairs): whole haystacks in the file's order, each turn once (a turn
    another haystack holds too is stored the first time), until the next would not fit. With
    them, each record taken and its answer sessions' turns as places in the items (its
    evidence)."""
    items: list[dict[str, Any]] = []
    place: dict[str, int] = {}  # each stored text's place in `items`
    taken: list[tuple[Record, frozenset[int]]] = []
    for record in records:
        texts = [stored_text(t) for t in record.turns]
        new = {text: t for text, t in zip(texts, record.turns, strict=True) if text not in place}
        if len(items) + len(new) > size:
            break
        for text, turn in new.items():
            place[text] = len(items)
            items.append({**turn, "user_id": user, "embedding": table[_key(text)]})
        answer = frozenset(
            place[text] for text, t in zip(texts, record.turns, strict=True)
            if t["metadata"]["session"] in record.answer_sessions
        )  # fmt: skip
        taken.append((record, answer))
    return items, taken


async def asked_user(
    embedder: Embedder, size: int, user: str
) -> tuple[list[dict[str, Any]], list[tuple[str, Any, frozenset[int]]]]:
    """`one_user` over LongMemEval dev (`load`), with each taken record's question, its vector
    (`embedder`'s) and its answer sessions' turns as places in the items."""
    records = load()
    table = await vectors(embedder, records)
    items, taken = one_user(records, table, size, user)
    asked = [(r.question, await embedder.embed_query(r.question), answer)
             for r, answer in taken]  # fmt: skip
    return items, asked


NEAR_COPY = 0.9  # bge-small cosine from which a stored turn counts as a copy of another


def near_copy(asked: Record, holder: Record, table: dict[str, np.ndarray]) -> bool:
    """Whether `holder`'s haystack holds `asked`'s evidence: the same session, or a turn whose
    stored text's vector is within `NEAR_COPY` cosine of one of `asked`'s evidence turns (the
    user turns marked `has_answer`, or every turn of its answer sessions when none is). Then
    `asked`'s question is not "never said" to `holder`'s user (issue 35; LongMemEval_S builds
    its haystacks from shared pools of sessions, so another record's evidence may be here)."""
    if asked.answer_sessions & {t["metadata"]["session"] for t in holder.turns}:
        return True
    wanted = [t for t in asked.turns if t["user_message"] in asked.evidence] or [
        t for t in asked.turns if t["metadata"]["session"] in asked.answer_sessions
    ]
    if not wanted:
        return False
    mine = np.vstack([table[_key(stored_text(t))] for t in holder.turns])
    theirs = np.vstack([table[_key(stored_text(t))] for t in wanted])
    return bool((theirs @ mine.T).max() >= NEAR_COPY)
