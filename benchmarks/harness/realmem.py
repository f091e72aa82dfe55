"""RealMem's eight users (../shared/data/realmem/, README beside it) as users of the store (issue
45): each file is one person's chats with an assistant over months, session by session in the
file's order. A session's turn pairs (a user message and the assistant reply after it) become
`add_turns` items: one memory a pair, conversation id the session's uuid, dated at the session's
`current_time` plus a minute a pair. A user turn marked `is_query` needs an earlier memory: the
assistant turn after it lists `memory_used`, each with the session it came from. The other user
turns are the "no memory needed" cases.

Every stored text and every message asked is embedded once by the store's embedder and kept in
`.recall/realmem-vectors.npz` (keyed by kind and the text's hash), which later runs read."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from recall.embeddings import Embedder

from .longmemeval import stored_text
from .report import ROOT
from .vectorcache import embed_missing, key, saved

REALMEM = ROOT.parent / "shared" / "data" / "realmem"
VECTORS = ROOT / ".recall" / "realmem-vectors.npz"
NO_REPLY = "(no reply)"  # a user turn the assistant did not answer (longmemeval.py's stand-in)


@dataclass(frozen=True, slots=True)
class Message:
    """A user message to ask: a query turn (`query_id` set, `used` the sessions its answer
    used) or a turn that is not one (`query_id` None, `used` empty)."""

    text: str
    query_id: str | None = None
    category: str = ""
    used: frozenset[str] = frozenset()


@dataclass(slots=True)
class Session:
    """One session: its uuid and time, its turn pairs as `add_turns` items (no user id, no
    vector), its query turns and its other user turns."""

    uuid: str
    at: datetime
    pairs: list[dict[str, Any]] = field(default_factory=list)
    queries: list[Message] = field(default_factory=list)
    others: list[Message] = field(default_factory=list)


@dataclass(slots=True)
class User:
    """One RealMem user: their name (the file's) and sessions in the file's order."""

    name: str
    sessions: list[Session] = field(default_factory=list)

    @property
    def user_id(self) -> str:
        """The user id their memories are stored under."""
        return f"realmem-{self.name.lower()}"


def _date(raw: str) -> datetime:
    """'2025-12-19 (Friday)' as midnight UTC of that day."""
    return datetime.strptime(raw.split(" ")[0], "%Y-%m-%d").replace(tzinfo=UTC)


def _session(raw: dict[str, Any]) -> Session:
    session = Session(raw["session_uuid"], _date(raw["current_time"]))
    turns = raw["dialogue_turns"]
    for i, turn in enumerate(turns):
        if turn["speaker"] != "User" or not turn["content"].strip():
            continue
        after = turns[i + 1] if i + 1 < len(turns) else None
        answer = after if after is not None and after["speaker"] == "Assistant" else None
        reply = answer["content"] if answer is not None and answer["content"].strip() else NO_REPLY
        session.pairs.append({
            "user_message": turn["content"],
            "ai_response": reply,
            "conversation_id": session.uuid,
            "created_at": session.at + timedelta(minutes=len(session.pairs)),
        })  # fmt: skip
        if turn.get("is_query"):
            used = (answer.get("memory_used") or []) if answer is not None else []
            session.queries.append(Message(
                turn["content"], turn.get("query_id") or "", turn.get("category_name") or "",
                frozenset(m["session_uuid"] for m in used),
            ))  # fmt: skip
        else:
            session.others.append(Message(turn["content"]))
    return session


def load(path: Path = REALMEM, count: int | None = None) -> list[User]:
    """The users of `path` (every `*.json.gz`, by file name; the first `count` when given)."""
    files = sorted(path.glob("*.json.gz"))[:count]
    out = []
    for file in files:
        raw = json.loads(gzip.decompress(file.read_bytes()))
        name = raw["_metadata"].get("person_name") or file.name.split(".")[0]
        out.append(User(name, [_session(s) for s in raw["dialogues"]]))
    return out


def no_memory_needed(user: User, count: int = 20) -> list[tuple[int, Message]]:
    """Up to `count` of `user`'s turns that are not queries, drawn (seeded by the user's name)
    from the sessions after their first (asked with something stored), as (session index,
    message), in the file's order."""
    pool = [(i, m) for i, s in enumerate(user.sessions) if i > 0 for m in s.others]
    drawn = random.Random(user.name).sample(
        range(len(pool)), min(count, len(pool))
    )  # seeded: the same draw every run
    return [pool[i] for i in sorted(drawn)]


async def vectors(
    embedder: Embedder,
    users: Sequence[User],
    asked: Sequence[str],
    path: Path = VECTORS,
) -> dict[str, np.ndarray]:
    """Every stored text of `users` (as the store embeds a turn) and every message in `asked`
    (as a query) by kind and hash: read from `path`, the missing ones embedded by `embedder`
    (the store's), the file rewritten after each chunk, so an interrupted run resumes."""
    table = saved(path)  # read once
    docs = [stored_text(p) for u in users for s in u.sessions for p in s.pairs]
    await embed_missing(embedder, docs, "doc", table, path, "realmem vectors")
    await embed_missing(embedder, asked, "query", table, path, "realmem vectors")
    return table


def items(user: User, session: Session, table: dict[str, np.ndarray]) -> Iterator[dict[str, Any]]:
    """`session`'s pairs as `add_turns` items for `user`, with their vectors."""
    for pair in session.pairs:
        yield {**pair, "user_id": user.user_id, "embedding": table[key("doc", stored_text(pair))]}


def query_vector(text: str, table: dict[str, np.ndarray]) -> np.ndarray:
    """The vector of a message asked."""
    return table[key("query", text)]
