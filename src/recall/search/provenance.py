"""Provenance: which memories a stored turn was given, which of them its reply quotes, whether
the turn only restates them, and how often it was repeated (issue 37, decision 0029).

An agent that is handed memories repeats them ("since you're training for Berlin..."), and
each such turn is stored in its turn. The writer records with the turn what it was given, so
that retrieval can show the turn that said a fact (its source) instead of the turns that
restate it (`recall.search.restatements`). A near-duplicate of a stored turn is not stored
again; the stored one counts it (`repeats`, `last_seen`).

All of it lives in the memory's metadata under `KEY`, so it travels with `recall export` and
`recall import` and needs no column: `{"recall": {"sources": [...], "quoted": [...],
"restates": true, "own": "...", "repeats": 2, "last_seen": "..."}}`. The key is the library's;
a caller's own metadata under it is replaced when the writer records provenance.

"own" is the reply's own part (`recall.search.ownwords`): the reply less the sentences that
restate what it quotes, which the turn is embedded and indexed by (decision 0038). It is
recorded for a reply that quotes something: a string where sentences were removed, null where
none was (the whole reply is its own); its presence says the reply was judged so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any
from uuid import UUID

from recall.memory import LIBRARY_KEY, Turn
from recall.search.echo import CACHED_TEXTS, is_question, terms
from recall.search.ownwords import QUOTE_SHARE, own_part, quotes_a_sentence, within
from recall.search.slots import CHANGE, slots

__all__ = [
    "KEY",
    "MAX_SOURCES",
    "NEW_SHARE",
    "QUOTE_SHARE",
    "SAME_WORDS",
    "UPDATE_WORDS",
    "Provenance",
    "adds_to",
    "near_duplicate",
    "provenance_of",
    "quotes",
    "repeats_of",
    "said",
    "updated",
    "with_provenance",
]

KEY = LIBRARY_KEY
"""The metadata key provenance and repeats are stored under."""
MAX_SOURCES = 20
"""Source ids recorded at most (the retrieval node hands over 3 by default)."""
NEW_SHARE = 1 / 3
"""A statement adds something of its own when at least this share of its content words is in
none of the sources it quotes."""
SAME_WORDS = 0.9
"""A turn repeats a stored one almost word for word when their word sequences match at least
this much (difflib's ratio) and it has no word the stored one lacks."""
UPDATE_WORDS = 1
"""Content words a statement that says something changed shares with the one it updates (one:
"I quit samba and joined a harp ensemble instead." updates "I beat a surdo in a samba
troupe.")."""
_ANY_WORD = re.compile(r"\w+(?:'\w+)?")


@dataclass(frozen=True, slots=True)
class Provenance:
    """What a stored turn was given and what it did with it.

    Attributes:
        sources: the ids of the memories retrieved for the turn, best first.
        quoted: those of them its reply quotes (`quotes`).
        restates: the turn holds nothing of the user's own beyond what it quotes: its user
            text is a question, or fewer than `NEW_SHARE` of its content words are new
            (`adds_to`). Such a turn is a restatement of `quoted`.
        own: the reply's own part (`recall.search.ownwords.own_part`) where it differs from
            the reply; None where the whole reply is its own or it was not judged.
        own_judged: whether the reply was judged for its own part (always, by this version,
            when it quotes something); a stored turn with `quoted` and not judged was written
            before decision 0038, and `recall reembed` judges it.
        supersedes: the id of the source the turn states anew (`updated`), None if none.
    """

    sources: tuple[str, ...] = ()
    quoted: tuple[str, ...] = ()
    restates: bool = False
    own: str | None = None
    own_judged: bool = False
    supersedes: str | None = None

    @property
    def is_restatement(self) -> bool:
        """Whether the turn only restates memories it quotes."""
        return self.restates and bool(self.quoted)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form stored in metadata and in the writer's queue."""
        value: dict[str, Any] = {
            "sources": list(self.sources),
            "quoted": list(self.quoted),
            "restates": self.restates,
        }
        if self.own_judged and self.quoted:
            value["own"] = self.own
        if self.supersedes is not None:
            value["supersedes"] = self.supersedes
        return value

    @classmethod
    def from_dict(cls, value: object) -> Provenance | None:
        """Read `as_dict`'s form back; None for anything else (metadata written by hand, an
        older queue entry): provenance is a hint, and unreadable provenance is no provenance.
        Ids that are not UUIDs are left out."""
        if not isinstance(value, Mapping):
            return None
        sources = _ids(value.get("sources"))
        if not sources:
            return None
        quoted = tuple(i for i in _ids(value.get("quoted")) if i in sources)
        own = value.get("own")
        updated = _ids([value.get("supersedes")])
        return cls(
            sources,
            quoted,
            value.get("restates") is True,
            own=own if isinstance(own, str) and quoted else None,
            own_judged="own" in value and bool(quoted),
            supersedes=updated[0] if updated and updated[0] in sources else None,
        )

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None) -> Provenance | None:
        """A stored memory's provenance from its metadata, or None."""
        if not metadata:
            return None
        recorded = metadata.get(KEY)
        return cls.from_dict(recorded) if isinstance(recorded, Mapping) else None


def _ids(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    out: list[str] = []
    for item in value[:MAX_SOURCES]:
        key = _canonical_id(str(item))
        if key is not None and key not in out:
            out.append(key)
    return tuple(out)


@lru_cache(maxsize=CACHED_TEXTS)  # a search reads the same sources' ids query after query
def _canonical_id(text: str) -> str | None:
    """`text` as a UUID's canonical form, or None when it is not one."""
    try:
        return str(UUID(text))
    except ValueError:
        return None


def said(user_message: str, ai_response: str) -> str:
    """What a memory says: its user text when that is a statement, else (a question) its reply,
    where the answer is."""
    return ai_response if is_question(user_message) else user_message


def quotes(reply: str, source_user: str, source_reply: str) -> bool:
    """Whether `reply` quotes a source memory: it holds at least `QUOTE_SHARE` of the content
    words of what the source says (`said`), or one of its sentences is a quote of the source
    (`recall.search.ownwords.quotes_a_sentence`)."""
    words = terms(said(source_user, source_reply))
    if words and len(words & terms(reply)) >= QUOTE_SHARE * len(words):
        return True
    return quotes_a_sentence(reply, source_user, source_reply)


def adds_to(user_message: str, sources: Sequence[tuple[str, str]]) -> bool:
    """Whether the user's text holds something of its own beyond `sources` ((user text,
    reply) pairs): it is not a question and at least `NEW_SHARE` of its content words are in
    none of them. A question holds the query's words, not facts."""
    if is_question(user_message):
        return False
    own = terms(user_message)
    if not own:
        return False
    known: set[str] = set()
    for user, reply in sources:
        known |= terms(user) | terms(reply)
    return len(own - known) >= NEW_SHARE * len(own)


def updated(user_message: str, sources: Sequence[tuple[str, str, str]]) -> str | None:
    """The id of the source that the user's text states anew, None if none: the first of
    `sources` ((id, user text, reply), best first) whose user text is a statement that shares a
    slot with the user's (`recall.search.slots`: "i live in", "i drive a"), or at least
    `UPDATE_WORDS` content words when the user's text says that something changed
    (`slots.CHANGE`: "now", "moved", "instead"). The user's text must be a statement
    that adds something of its own (`adds_to`): "Update: Priya moved again, she's in Porto
    now." states anew "My sister Priya just moved to Lisbon for a job at a bakery"."""
    if is_question(user_message):
        return None
    own, frames = terms(user_message), slots(user_message)
    changed = CHANGE.search(user_message) is not None
    for source_id, user, reply in sources:
        if is_question(user) or not adds_to(user_message, [(user, reply)]):
            continue
        if frames & slots(user) or (changed and len(own & terms(user)) >= UPDATE_WORDS):
            return source_id
    return None


def provenance_of(
    user_message: str, reply: str, retrieved: Sequence[Mapping[str, Any]]
) -> Provenance | None:
    """The provenance of a turn from the memories retrieved for it (the retrieval node's
    `RetrievedMemory` dicts: `id`, `user_message`, `ai_response`); None when none were.

    Args:
        user_message: the user's text of the turn.
        reply: the AI's reply.
        retrieved: what the retrieval node put into state for this turn.
    """
    sources: list[tuple[str, str, str]] = []
    for m in retrieved[:MAX_SOURCES]:
        if not isinstance(m, Mapping):
            continue
        ids = _ids([m.get("id")])
        if ids and ids[0] not in [s[0] for s in sources]:
            sources.append((ids[0], str(m.get("user_message", "")), str(m.get("ai_response", ""))))
    if not sources:
        return None
    quoted = [s for s in sources if quotes(reply, s[1], s[2])]
    texts = [(s[1], s[2]) for s in quoted]
    restates = bool(quoted) and not adds_to(user_message, texts)
    return Provenance(
        sources=tuple(s[0] for s in sources),
        quoted=tuple(s[0] for s in quoted),
        restates=restates,
        own=own_part(reply, texts),
        own_judged=bool(quoted),
        supersedes=None if restates else updated(user_message, sources),
    )


def with_provenance(turn: Turn, provenance: Provenance | None) -> Turn:
    """`turn` with `provenance` in its metadata under `KEY` (after the turn's metadata was
    checked against its limit: a few hundred bytes the caller did not write do not count
    against it). The content hash does not cover metadata, so storing stays idempotent.

    The reply's own part is made to hold only what the stored reply holds (`within`): the turn
    was cleaned and may have been cut since provenance was taken from the reply as given."""
    if provenance is None:
        return turn
    if provenance.own is not None:
        provenance = replace(provenance, own=within(provenance.own, turn.ai_response))
    metadata = {**turn.metadata, KEY: provenance.as_dict()}
    return replace(turn, metadata=metadata, metadata_json=json.dumps(metadata, ensure_ascii=False))


def repeats_of(metadata: Mapping[str, Any] | None) -> int:
    """How many near-duplicates of a memory were written after it (0 when none)."""
    recorded = (metadata or {}).get(KEY)
    if not isinstance(recorded, Mapping):
        return 0
    count = recorded.get("repeats")
    return count if isinstance(count, int) and count > 0 else 0


def near_duplicate(text: str, stored: str) -> bool:
    """Whether `text` repeats `stored` almost word for word: its words (function words too:
    "not" is a word) are `stored`'s in the same order with at most a few left out, and their
    word sequences match at least `SAME_WORDS`. A text that adds a word, or puts one word in
    another's place ("turn 11 of user 11" after "turn 1 of user 11", though every word of it
    is in the stored text), is never one: counting it instead of storing it would lose that
    word."""
    new = _ANY_WORD.findall(text.lower())
    old = _ANY_WORD.findall(stored.lower())
    if not new or not set(new) <= set(old):
        return False
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    if any(op in ("replace", "insert") for op, *_ in matcher.get_opcodes()):
        return False
    return matcher.ratio() >= SAME_WORDS
