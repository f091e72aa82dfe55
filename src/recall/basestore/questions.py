"""Breadth from the questions a `RecallStore` is asked (issue 47): a share of the real searches
through an index is checked in the background against the exact scan, each at the breadths of
the calibration's ladder up to one step past the index's own, and the hits are tallied per
breadth. Once a breadth has been checked on `MIN_QUESTIONS` questions, the index's breadth
moves to the smallest one whose recall@10 holds the target with 95% confidence (one-sided, the
wider of Wilson's bound over the answers' slots and the questions' standard error); it moves
wider only when even the upper bound of its own breadth falls short, so a breadth near the
target is not moved back and forth. The probe calibration (`recall.db.calibration`) stays the
cold start. The tally restarts when the index is calibrated again (it has grown by a quarter):
its questions' exact answers were those of a smaller index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["FIRST_QUESTIONS", "MIN_QUESTIONS", "Tally", "wilson_lower", "wilson_upper"]

MIN_QUESTIONS = 50  # questions checked at a breadth before it is judged
# questions checked one after the other once an index is calibrated, before the sampled share:
# at 50 a breadth passes only with at most one miss in its 500 slots, so an index whose
# questions find 99.7% kept a breadth of 500 in one run and 80 in another (issue 56)
FIRST_QUESTIONS = 4 * MIN_QUESTIONS
Z = 1.645  # one-sided 95%


def wilson_lower(hits: int, slots: int, z: float = Z) -> float:
    """The one-sided lower confidence bound of a share `hits` / `slots` (Wilson's score
    interval): 0 with no slots."""
    return _wilson(hits, slots, -z)


def wilson_upper(hits: int, slots: int, z: float = Z) -> float:
    """The one-sided upper confidence bound of a share `hits` / `slots`: 1 with no slots."""
    return _wilson(hits, slots, z) if slots > 0 else 1.0


def _wilson(hits: int, slots: int, z: float) -> float:
    if slots <= 0:
        return 0.0
    share = hits / slots
    centre = share + z * z / (2 * slots)
    spread = abs(z) * math.sqrt(share * (1 - share) / slots + z * z / (4 * slots * slots))
    return (centre + math.copysign(spread, z)) / (1 + z * z / slots)


@dataclass
class Tally:
    """One index's questions checked so far: per breadth, the hits among the exact ten
    nearest and the slots there were (`min(10, size)` per question), and how many questions.

    Attributes:
        questions: questions tallied.
        hits: breadth -> exact nearest found at that breadth, summed over the questions.
        slots: breadth -> the exact nearest wanted, summed over the questions checked there.
        checked: breadth -> the questions checked there.
        scores, squares: breadth -> the sum of the questions' recall@10 there, and of its
            squares (a question's misses come together: its recall is the unit of the spread).
    """

    questions: int = 0
    hits: dict[int, int] = field(default_factory=dict)
    slots: dict[int, int] = field(default_factory=dict)
    checked: dict[int, int] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)
    squares: dict[int, float] = field(default_factory=dict)

    def add(self, found: dict[int, int], wanted: int) -> None:
        """Tally one question: `found[breadth]` of its `wanted` exact nearest at each breadth
        checked."""
        self.questions += 1
        for breadth, hits in found.items():
            self.hits[breadth] = self.hits.get(breadth, 0) + hits
            self.slots[breadth] = self.slots.get(breadth, 0) + wanted
            self.checked[breadth] = self.checked.get(breadth, 0) + 1
            score = hits / wanted if wanted else 1.0
            self.scores[breadth] = self.scores.get(breadth, 0.0) + score
            self.squares[breadth] = self.squares.get(breadth, 0.0) + score * score

    def recall(self, breadth: int) -> float:
        """The measured recall@10 at `breadth` (0 where nothing was checked)."""
        slots = self.slots.get(breadth, 0)
        return self.hits.get(breadth, 0) / slots if slots else 0.0

    def bounds(self, breadth: int) -> tuple[float, float]:
        """The one-sided 95% lower and upper bounds of recall@10 at `breadth`: the wider of
        Wilson's over the answers' slots and the questions' mean less (plus) 1.645 standard
        errors, since one hard question misses several of its ten at once."""
        n = self.checked.get(breadth, 0)
        hits, slots = self.hits.get(breadth, 0), self.slots.get(breadth, 0)
        if n == 0:
            return 0.0, 1.0
        mean = self.scores[breadth] / n
        variance = max(0.0, self.squares[breadth] / n - mean * mean) * n / max(n - 1, 1)
        spread = Z * math.sqrt(variance / n)
        return (
            min(wilson_lower(hits, slots), mean - spread),
            max(wilson_upper(hits, slots), mean + spread),
        )

    def decide(self, current: int, ladder: tuple[int, ...], target: float) -> int | None:
        """The breadth the index should use instead of `current`, or None to keep it: the
        smallest breadth under `current` checked on `MIN_QUESTIONS` questions or more whose
        lower bound reaches `target` (narrower: the questions hold it with 95% confidence);
        else, when `current` was checked that often and even its upper bound falls short of
        `target`, the next wider one of `ladder` (wider: they miss it with 95% confidence).
        Between the two bounds it stays: a breadth near the target is not moved back and
        forth as questions come. Each breadth is judged on the questions checked there (the
        narrower ones on all of them: a check covers the ladder up to one past `current`)."""
        measured = [b for b in sorted(self.checked) if self.checked[b] >= MIN_QUESTIONS]
        for breadth in measured:
            if breadth >= current:
                break
            if self.bounds(breadth)[0] >= target:
                return breadth
        if current in measured and self.bounds(current)[1] < target:
            wider = [b for b in ladder if b > current]
            return wider[0] if wider else None
        return None
