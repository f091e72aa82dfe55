"""What a search resolved and found (`MemoryStore.find`): the one answer every caller renders.

The store decides the mode, limit and threshold a search uses and which memories pass; the
retrieve node, the `memory_search` tool, `recall search` and the inspector show that answer
and decide none of it again (docs/decisions/0033-the-store-decides.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from recall.config import RetrievalMode
from recall.memory import Memory
from recall.search.verdict import Verdict

__all__ = ["Found", "SearchResult"]


@dataclass(frozen=True, slots=True)
class Found:
    """One memory a search found.

    Attributes:
        memory: the memory, its `score` what the threshold compares (`Memory.score`) and, when
            the search was explained in the default mode, `explanation` the raw parts of that
            score.
        passes: whether the store returns it: what the agent gets. False only for the memories
            a search asked for with `kept_out=True` brings beyond those.
        why: when the search was explained, why it scored what it did and why it passes or
            not, in the words of its user (`recall.store.explaining.reasons`); else empty.
    """

    memory: Memory
    passes: bool
    why: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A search's answer: what it resolved and what it found.

    Attributes:
        limit: the most memories it returns (the caller's, else the store's default).
        verdict: the rule it applied: its mode (the caller's, else the store's default) and
            threshold (likewise), which decided which memories pass (`recall.search.verdict`).
        found: the memories, those that pass first (best first), then, when asked for
            (`kept_out=True`), the best the store keeps out, up to `limit` in all.
    """

    limit: int
    verdict: Verdict
    found: tuple[Found, ...]

    @property
    def mode(self) -> RetrievalMode:
        """The mode it searched in."""
        return self.verdict.mode

    @property
    def threshold(self) -> float:
        """The threshold it used; see `threshold_applies`."""
        return self.verdict.threshold

    @property
    def threshold_applies(self) -> bool:
        """False in keyword mode, where BM25 has no fixed scale and every memory found up to
        the limit passes."""
        return self.verdict.applies

    @property
    def memories(self) -> list[Memory]:
        """The memories that pass, best first: what `MemoryStore.search` returns."""
        return [f.memory for f in self.found if f.passes]
