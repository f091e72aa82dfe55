"""Whether a memory passes a search, and the words that say so: the one place a score meets
the threshold (docs/decisions/0046-one-verdict.md).

A search in semantic or hybrid mode returns a memory whose score (the cosine, or the second
stage's relevance) reaches the threshold; in keyword mode BM25 has no fixed scale, so the
threshold does not apply and every memory found, up to the limit, passes. The store's search,
its post-step (a source before its restatements, `recall.search.restatements`) and the
explanation in words (`recall.store.explaining`) all ask a `Verdict`; nothing else compares a
score with a threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recall.config import RetrievalMode

__all__ = ["Verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The rule a search applies: its mode and its threshold.

    Attributes:
        mode: the mode the search used.
        threshold: the threshold it used (0 to 1); see `applies`.
    """

    mode: RetrievalMode
    threshold: float

    @property
    def applies(self) -> bool:
        """Whether the threshold applies: False in keyword mode (BM25 has no fixed scale)."""
        return self.mode != "keyword"

    def passes(self, score: float | None) -> bool:
        """Whether a memory of this `score` passes: it reaches the threshold, or the threshold
        does not apply. A memory without a score passes only where no threshold applies."""
        if not self.applies:
            return True
        return score is not None and score >= self.threshold

    def at(self, threshold: float) -> Verdict:
        """The same rule at another threshold (0: what a search at any threshold could find)."""
        return Verdict(self.mode, threshold)

    @property
    def max_distance(self) -> float:
        """The widest cosine distance a passing memory can have (semantic mode scores the
        cosine, 1 - distance): what the candidates' query asks the database for."""
        return 1.0 - self.threshold if self.applies else 2.0

    def within(self, distance: float | None) -> bool:
        """Whether a row at this cosine `distance` (None: none) passes in semantic mode."""
        return distance is not None and distance <= self.max_distance

    @property
    def gate_opens_at(self) -> float:
        """The gate logit at which the best candidate's score, sigmoid(gate), reaches the
        threshold (0 for 0.5): the gate is open at the threshold the search used."""
        if self.threshold <= 0.0:
            return -math.inf
        if self.threshold >= 1.0:
            return math.inf
        return math.log(self.threshold / (1.0 - self.threshold))

    def gate_open(self, gate: float) -> bool:
        """Whether a gate logit of `gate` lets the best candidate pass."""
        return gate >= self.gate_opens_at

    @property
    def nothing_passes(self) -> str:
        """The words for a shut gate's outcome, with the real threshold."""
        return f"nothing passes the threshold {self.threshold:g}"

    def words(self, score: float | None, passes: bool) -> str:
        """The verdict on a memory of this `score` in words: returned or kept out, and why.

        Args:
            score: the memory's score (what the threshold compares; BM25 in keyword mode).
            passes: whether the store returns it (a memory that reaches the threshold may be
                kept out by the post-step or the limit).
        """
        value = 0.0 if score is None else score
        if not self.applies:
            return (
                f"Keyword score {value:.2f} (BM25): the threshold does not apply in "
                "keyword mode, so it is returned."
            )
        what = "Similarity" if self.mode == "semantic" else "Relevance"
        t = self.threshold
        if passes:
            return f"{what} {value:.3f} reaches the threshold {t:g}: it is returned."
        if self.passes(score):
            return (
                f"{what} {value:.3f} reaches the threshold {t:g}, but it is kept out: a "
                "memory saying the same, or a newer one, takes its place, or the limit is full."
            )
        return f"{what} {value:.3f} is under the threshold {t:g}: it is kept out."

    def gate_line(self, gate: float) -> str:
        """The raw gate's place against the threshold, as `recall search --explain-raw`
        prints it."""
        return (
            f"gate {gate:+.2f} (below {self.gate_opens_at:+.2f}: nothing passes {self.threshold:g})"
        )
