"""The time a message names (recall.search.when): past windows relative to the moment asked,
and the candidates from inside one put first."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from recall.search.when import time_bonus, time_window

NOW = datetime(2026, 11, 26, 21, 0, tzinfo=UTC)  # a Thursday


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("Where did I go hiking yesterday?", day(2026, 11, 25), day(2026, 11, 26)),
        ("what did I cook this morning", day(2026, 11, 26), day(2026, 11, 27)),
        ("What did I buy two days ago?", day(2026, 11, 24), day(2026, 11, 25)),
        ("Where was I a fortnight ago?", day(2026, 11, 9), day(2026, 11, 16)),
        ("who did I meet 3 weeks ago", day(2026, 11, 2), day(2026, 11, 9)),
        ("Which film did we see two months ago?", day(2026, 9, 1), day(2026, 10, 1)),
        ("What did I do on Monday?", day(2026, 11, 23), day(2026, 11, 24)),  # the last one
        ("What was I reading in March?", day(2026, 3, 1), day(2026, 4, 1)),
        ("What was I reading in December?", day(2025, 12, 1), day(2026, 1, 1)),  # not ahead
        ("Which book did I read last year?", day(2025, 1, 1), day(2026, 1, 1)),
        ("what did Caroline do in May 2023?", day(2023, 5, 1), day(2023, 6, 1)),
        ("Where did we go last weekend?", day(2026, 11, 21), day(2026, 11, 23)),
        ("Where did I travel last summer?", day(2026, 6, 1), day(2026, 9, 1)),
        ("What did I plant last spring?", day(2026, 3, 1), day(2026, 6, 1)),
        ("Where did we ski last winter?", day(2025, 12, 1), day(2026, 3, 1)),
        ("Where did we have dinner around Christmas?", day(2025, 12, 20), day(2026, 1, 1)),
    ],
)
def test_a_named_time_is_a_past_window(text: str, start: datetime, end: datetime) -> None:
    window = time_window(text, NOW)
    assert window is not None, text
    assert (window.start, window.end) == (start, end)


@pytest.mark.parametrize(
    "text",
    [
        "What's my dog's name?",
        "When did I go to the dentist?",  # asks for a time, names none
        "What did I eat for dinner?",  # a time of day alone names no date
        "What am I doing next week?",  # ahead: no memory is from then
        "What's on tomorrow?",
        "How many days ago did I buy the tickets?",
        "",
    ],
)
def test_no_window_when_none_is_named(text: str) -> None:
    assert time_window(text, NOW) is None


@pytest.mark.parametrize("hour", range(24))
@pytest.mark.parametrize(
    "text", ["good morning!", "Good evening, how are you?", "good night", "morning :)"]
)
def test_a_greeting_names_no_time_at_any_hour(text: str, hour: int) -> None:
    # at 06:23 "good morning!" once named this morning, and the turns said since opened a
    # search's gate (tests/integration/test_cli.py failed after 06:00 only)
    assert time_window(text, NOW.replace(hour=hour, minute=23)) is None


def test_a_greeting_does_not_hide_a_time_named_after_it() -> None:
    window = time_window("good morning! what did I cook this morning?", NOW)
    assert window is not None and window.start == day(2026, 11, 26)


def test_a_season_not_yet_over_is_last_years_unless_it_is_this_one() -> None:
    july = datetime(2026, 7, 10, tzinfo=UTC)
    last = time_window("last summer", july)
    this = time_window("this summer", july)
    assert last is not None and last.start == day(2025, 6, 1)
    assert this is not None and (this.start, this.end) == (day(2026, 6, 1), july)


def test_a_naive_now_is_utc() -> None:
    window = time_window("yesterday", NOW.replace(tzinfo=None))
    assert window is not None and window.start == day(2026, 11, 25)


@pytest.mark.parametrize(
    ("text", "asked", "start"),
    [
        ("what did I cook this morning", NOW.replace(hour=0, minute=5), day(2026, 11, 25)),
        ("what did I cook this morning", NOW.replace(hour=6), day(2026, 11, 25)),  # not begun
        ("what did I cook this morning", NOW.replace(hour=6, minute=1), day(2026, 11, 26)),
        ("what did I cook this morning", NOW.replace(hour=23, minute=55), day(2026, 11, 26)),
        ("who did I see this evening", NOW.replace(hour=12), day(2026, 11, 25)),
        ("who did I see this evening", NOW.replace(hour=23, minute=55), day(2026, 11, 26)),
        ("Where did I go hiking yesterday?", NOW.replace(hour=0, minute=5), day(2026, 11, 25)),
        ("Where did I go hiking yesterday?", NOW.replace(hour=23, minute=55), day(2026, 11, 25)),
    ],
)
def test_a_part_of_the_day_is_the_last_one_begun(
    text: str, asked: datetime, start: datetime
) -> None:
    """Issue 44: at 00:05 this morning has not begun: the last morning was yesterday's."""
    window = time_window(text, asked)
    assert window is not None and (window.start, window.end) == (start, start + timedelta(days=1))


@pytest.mark.parametrize(
    "text",
    [
        "what did I cook this morning",
        "Where did we go last weekend?",
        "Which film did we see two months ago?",
        "yesterday",
    ],
)
def test_the_window_depends_on_the_moment_only(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same moment written in another timezone names the same window, and the process's
    clock and timezone (parsedatetime reads them for "this morning") change nothing."""
    asked = datetime(2026, 11, 29, 0, 5, tzinfo=UTC)  # a Sunday, five minutes in
    window = time_window(text, asked)
    for zone in ("Pacific/Kiritimati", "America/Adak"):
        assert time_window(text, asked.astimezone(ZoneInfo(zone))) == window
    elsewhen = time.gmtime(datetime(2026, 7, 4, 15, tzinfo=UTC).timestamp())
    monkeypatch.setattr(time, "localtime", lambda *_: elsewhen)
    assert time_window(text, asked) == window


def test_the_candidates_from_inside_come_first_in_the_rankers_order() -> None:
    window = time_window("Where did I go hiking yesterday?", NOW)
    moments = [day(2026, 11, 12), day(2026, 11, 25), day(2026, 7, 20), day(2026, 11, 25)]
    logits = np.array([3.0, -1.0, 2.0, 0.5])
    ranked = logits + time_bonus(window, moments, logits)
    assert list(np.argsort(-ranked)) == [3, 1, 0, 2]
    # nothing changes without a window, or with none of the candidates inside it
    assert not time_bonus(None, moments, logits).any()
    old = time_window("What did I do in March?", NOW)
    assert not time_bonus(old, moments, logits).any()
    assert time_bonus(window, [], np.zeros(0)).shape == (0,)
