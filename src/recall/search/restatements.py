"""After ranking: a source before its restatements, one slot per fact, the newest statement on a
slot first (issue 37, decision 0029).

A small post-step over the ranked candidates, kept out of the second stage: it changes which
of the candidates fill the limit's slots, never their scores' meaning.

1. A restatement (a turn that only repeats memories its reply quoted,
   `recall.search.provenance`) gives its slot to the one of its sources among the candidates
   that the query is about (a restatement often repeats several memories): the one whose
   statement shares the most content words with the query, then the nearest by cosine; even
   one the gate left below the threshold: the restatement was
   relevant only by what it restates. Its source takes the restatement's score when that is
   higher. When some of its sources are not among the candidates (not retrieved, or erased:
   provenance keeps the ids of deleted memories) and none of those present shares a content
   word with the query while the restatement does, the restatement keeps its slot: what it
   repeats about the query's subject is not among the candidates, and a source on another
   subject would take the slot of the one memory still holding it.
2. One slot per fact: a restatement whose source is shown, or which restates what another
   shown restatement does, is left out. A turn that quotes a source but adds something of its
   own is not a restatement and keeps its slot.
3. Changed facts: before a statement of the user's, the newest of the candidates that the
   writer judged to state it anew (`Provenance.supersedes`, issue 54), else the newest that
   makes a statement on the same slot (`recall.search.slots`: "i drive a", "i live in") and is not a
   restatement comes first, when it is about the same thing: at least as near the query
   (cosine) as the older one, or no more than `NEAR_MARGIN` less near when the query names the
   slot (one of its content words, "drive", "live", "favourite band", is the query's) or the
   newer statement says that something changed ("now", "instead", "no longer", "I quit",
   "I sold": `CHANGE`, decision 0039).
   The older one follows it. Sharing a frame of conversation ("I'm looking for", "I started")
   is not enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from recall.search.echo import is_question, terms
from recall.search.provenance import Provenance, said
from recall.search.slots import CHANGE, slots
from recall.search.verdict import Verdict

__all__ = ["NEAR_MARGIN", "Candidate", "arrange"]

NEAR_MARGIN = 0.1
"""A newer statement on a slot the query names goes first when its cosine to the query is at
most this much below the older one's (else it must be at least as near). Set after reading
LongMemEval dev's reorders and the probe (docs/decisions/0029-provenance.md)."""


class Candidate(Protocol):
    """What the post-step reads of a ranked candidate (a `CandidateRow`, `MemoryRow` or
    `Memory`)."""

    @property
    def id(self) -> Any: ...  # a UUID or its text
    @property
    def user_message(self) -> str: ...
    @property
    def ai_response(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def metadata(self) -> Mapping[str, Any] | None: ...


def _statement_slots(row: Candidate, provenance: Provenance | None) -> frozenset[str]:
    """The slots of a user's own statement; none for a question or a restatement."""
    if provenance is not None and provenance.is_restatement:
        return frozenset()
    if is_question(row.user_message):
        return frozenset()
    return slots(row.user_message)


class _Arrangement:
    """One query's post-step: the candidates, what they restate and the slots given so far."""

    def __init__(
        self,
        query: str,
        rows: Sequence[Candidate],
        order: Sequence[int],
        scores: Sequence[float],
        nearness: Sequence[float],
        limit: int,
    ) -> None:
        self.rows = rows
        self.order = order
        self.scores = scores
        self.nearness = nearness
        self.limit = limit
        self.provenance = [Provenance.of(r.metadata) for r in rows]
        self.rank = {i: n for n, i in enumerate(order)}
        self.asked = terms(query)
        self._by_id: dict[str, int] | None = None  # by id, made when a restatement asks
        # each candidate's statement slots, read when first needed (`statement`): a search
        # compares those of the few shown and of the candidates about as near as they are
        self.slots_of: dict[int, frozenset[str]] = {}
        # the newest candidate that states each candidate anew (its id: the one it updates)
        self.updated_by: dict[str, int] = {}
        for j in order:
            p = self.provenance[j]
            if p is not None and p.supersedes is not None:
                known = self.updated_by.get(p.supersedes)
                if known is None or rows[j].created_at > rows[known].created_at:
                    self.updated_by[p.supersedes] = j
        self.out: list[tuple[int, float]] = []
        self.shown: set[int] = set()
        self.restated: set[str] = set()  # the facts (source ids) a shown memory stands for

    def by_id(self) -> dict[str, int]:
        """The candidates by id (text), made once."""
        if self._by_id is None:
            self._by_id = {str(self.rows[i].id): i for i in self.order}
        return self._by_id

    def statement(self, i: int) -> frozenset[str]:
        """The slots candidate `i` states (`_statement_slots`), computed once."""
        known = self.slots_of.get(i)
        if known is None:
            known = self.slots_of[i] = _statement_slots(self.rows[i], self.provenance[i])
        return known

    def nearest(self, i: int) -> tuple[int, float, int]:
        """The most content words shared with the query first, then the nearest by cosine,
        then by rank."""
        row = self.rows[i]
        shared = len(self.asked & terms(said(row.user_message, row.ai_response)))
        return (-shared, -self.nearness[i], self.rank[i])

    def off_topic(self, present: list[int], i: int) -> bool:
        """None of the sources present shares a content word with the query, and the
        restatement `i` does (module docstring, 1.)."""
        return self.nearest(min(present, key=self.nearest))[0] == 0 and self.nearest(i)[0] < 0

    def newest_on_slot(self, i: int) -> int | None:
        """The newest candidate that states `i` anew, as judged when it was written
        (`Provenance.supersedes`, followed to the newest); else the newest stating something
        on one of `i`'s slots and about the same thing (module docstring, 3.), if newer than
        it."""
        at, seen = i, {i}
        while (j := self.updated_by.get(str(self.rows[at].id))) is not None and j not in seen:
            at = j
            seen.add(j)
        if at != i:
            return at
        nearness, own = self.nearness, self.statement(i)
        if not own:
            return None
        asked_slots = {s for s in own if terms(s) & self.asked}
        best: int | None = None
        for j in self.order:
            # j is nearer than i, or about as near and the query names the slot or j says
            # that something changed (the nearness first: it needs no slots read)
            about_as_near = nearness[j] >= nearness[i] - NEAR_MARGIN
            if j == i or not about_as_near:
                continue
            shared = self.statement(j) & own
            if not shared:
                continue
            if not (
                nearness[j] >= nearness[i]
                or shared & asked_slots
                or CHANGE.search(self.rows[j].user_message)
            ):
                continue
            if self.rows[j].created_at > self.rows[best if best is not None else i].created_at:
                best = j
        return best

    def show(self, i: int, score: float) -> None:
        """Give `i` a slot (with the higher of `score` and its own) unless it has one or the
        slots are full; what it restates has a slot from now on."""
        if i in self.shown or len(self.out) >= self.limit:
            return
        self.out.append((i, max(score, self.scores[i])))
        self.shown.add(i)
        self.restated.add(str(self.rows[i].id))
        p = self.provenance[i]
        if p is not None and p.is_restatement:
            self.restated.update(p.quoted)

    def head(self, i: int) -> int | None:
        """Who takes candidate `i`'s slot: itself, or for a restatement the source the query
        is about (module docstring, 1.); None when its fact already has a slot (2.)."""
        p = self.provenance[i]
        if p is None or not p.is_restatement:
            return i
        if any(q in self.restated for q in p.quoted):
            return None  # its fact already has a slot
        by_id = self.by_id()
        present = [by_id[q] for q in p.quoted if q in by_id]
        if len(present) < len(p.quoted) and present and self.off_topic(present, i):
            present = []  # what it restates on the query's subject is not here: itself
        head = i
        # a source that is itself a restatement leads on to its own source
        for _ in range(3):
            if not present:
                break
            head = min(present, key=self.nearest)
            hp = self.provenance[head]
            if hp is None or not hp.is_restatement:
                break
            present = [by_id[q] for q in hp.quoted if q in by_id and by_id[q] != head]
        return head


def arrange(
    query: str,
    rows: Sequence[Candidate],
    order: Sequence[int],
    scores: Sequence[float],
    nearness: Sequence[float],
    verdict: Verdict,
    limit: int,
) -> list[tuple[int, float]]:
    """The memories to show, as (index into `rows`, score), best first.

    Args:
        query: the message searched for.
        rows: the candidates.
        order: indexes into `rows`, best first (all the candidates, not only those over the
            threshold: a source or a newer statement may come from below it).
        scores: each row's score, by index.
        nearness: each row's cosine similarity to the query, by index.
        verdict: a slot is opened only by a candidate whose score passes it.
        limit: slots at most.
    """
    if not order or not verdict.passes(scores[order[0]]):
        return []  # nothing passes: no slot opens, and nothing needs reading
    state = _Arrangement(query, rows, order, scores, nearness, limit)
    for i in order:
        score = scores[i]
        if not verdict.passes(score) or len(state.out) >= limit:
            break
        head = state.head(i)
        if head is None:
            continue
        newer = state.newest_on_slot(head)
        if newer is not None:
            state.show(newer, score)
        state.show(head, score)
    return state.out
