"""Issue 47: an index's breadth chosen from the questions it is asked (`Tally.decide`)."""

from __future__ import annotations

import pytest

from recall.basestore.questions import MIN_QUESTIONS, Tally, wilson_lower

LADDER = (40, 60, 80, 100, 120)
TARGET = 0.99


def test_the_wilson_bound_lies_under_the_share_and_nears_it_with_more_slots() -> None:
    assert wilson_lower(0, 0) == 0.0
    assert wilson_lower(10, 10) < 1.0
    assert wilson_lower(300, 300) >= TARGET > wilson_lower(100, 100)
    assert wilson_lower(299, 300) < TARGET  # one miss in 300 slots is too many yet
    assert wilson_lower(2990, 3000) < wilson_lower(2995, 3000) < 2995 / 3000


def tally(found: dict[int, int], questions: int = MIN_QUESTIONS) -> Tally:
    out = Tally()
    for _ in range(questions):
        out.add(found, 10)
    return out


def test_nothing_moves_before_enough_questions() -> None:
    assert tally({40: 10, 60: 10}, MIN_QUESTIONS - 1).decide(60, LADDER, TARGET) is None


def test_the_narrowest_breadth_that_holds_the_target_is_chosen() -> None:
    found = {40: 9, 60: 10, 80: 10, 100: 10}  # 40 misses one of ten every time
    assert tally(found).decide(100, LADDER, TARGET) == 60
    assert tally(found).decide(60, LADDER, TARGET) is None  # already there


def test_a_breadth_that_falls_short_widens_by_one_step() -> None:
    assert tally({40: 9, 60: 9}).decide(60, LADDER, TARGET) == 80
    assert tally({100: 9, 120: 9}).decide(120, LADDER, TARGET) is None  # nothing wider


@pytest.mark.parametrize("current", [60, 80])
def test_a_breadth_checked_on_fewer_questions_is_not_judged(current: int) -> None:
    out = tally({40: 9, 60: 9, 80: 9})
    for _ in range(5):
        out.add({100: 10}, 10)  # checked only lately: 5 questions
    assert out.decide(current, LADDER, TARGET) == LADDER[LADDER.index(current) + 1]


def test_a_breadth_near_the_target_stays_where_it_is() -> None:
    """Between its bounds a breadth is kept: three questions missing one of ten in fifty
    neither narrow to it from a wider breadth nor widen from it."""
    out = tally({60: 10, 80: 10}, MIN_QUESTIONS - 3)
    for _ in range(3):
        out.add({60: 9, 80: 10}, 10)
    low, high = out.bounds(60)
    assert low < TARGET < high
    assert out.decide(60, LADDER, TARGET) is None
    assert out.decide(80, LADDER, TARGET) is None
    assert out.decide(100, LADDER, TARGET) == 80


def test_misses_that_come_together_weigh_as_a_hard_question() -> None:
    """Ten misses in one question are less evidence of a good breadth than one in each of ten:
    the questions' spread widens the bound that Wilson's over the slots would give."""
    apart, together = Tally(), Tally()
    for n in range(100):
        apart.add({60: 9 if n < 10 else 10}, 10)
        together.add({60: 0 if n == 0 else 10}, 10)
    assert apart.hits == together.hits
    assert together.bounds(60)[0] < apart.bounds(60)[0]
