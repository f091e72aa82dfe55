"""The time a message names, relative to the moment it is asked (issue 35, decision 0027).

"Where did I go hiking yesterday?", "... a fortnight ago?", "... last summer?": the window of
time the message points at, or None when it names none. parsedatetime (docs/libraries.md) reads
the general forms ("yesterday", "two months ago", "last year", "in March", "8 May 2023", "last
Friday", "this morning"); a short table adds what it does not know: the weekend, the seasons
(northern hemisphere), a few holidays, and "fortnight". Every window is in the past: a memory is
never from the future, so a message about what is coming ("next week", "tomorrow") names no
window here, a month or weekday without a year is the last one before now, and a part of the
day ("this morning") is the day of the last one that has begun (at 00:05, yesterday's). Days
are UTC days, whatever the process's timezone: the window depends only on the moment asked.

A cheap word test comes first, so a message with no word of time costs no parse.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

import numpy as np
import parsedatetime

__all__ = ["Window", "time_bonus", "time_window"]

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DAYS = "monday tuesday wednesday thursday friday saturday sunday"
# a message names a time only if it holds one of these words (or a year)
_CUES = frozenset(
    (
        _MONTHS + " " + _DAYS + " yesterday today ago last morning afternoon evening tonight "
        "weekend week month year summer winter spring autumn fall christmas xmas halloween "
        "valentine fortnight"
    ).split()
)
_FUTURE = frozenset(["next", "tomorrow", "coming", "upcoming"])
_WORDS = re.compile(r"[a-z]+|\d{4}")
_HALF_DAYS = frozenset(["morning", "afternoon", "evening", "tonight"])
_SEASONS = {"spring": (3, 6), "summer": (6, 9), "autumn": (9, 12), "fall": (9, 12)}
# holidays as (month, first day, last day): the days around them a message means
_HOLIDAYS = {
    "christmas": (12, 20, 31),
    "xmas": (12, 20, 31),
    "halloween": (10, 28, 31),
    "valentine": (2, 12, 16),
}
_SEASON = re.compile(r"\b(last|this|past)\s+(spring|summer|autumn|fall|winter)\b")
_WEEKEND = re.compile(r"\b(last|this|past|the)\s+weekend\b")
_HOLIDAY = re.compile(r"\b(christmas|xmas|halloween|valentine)")
_FORTNIGHT = re.compile(r"\b(a|one)\s+fortnight\b|\bfortnight\b")
# a greeting names no time: "good morning!" at 06:30 is not a question about this morning
_GREETING = re.compile(
    r"\bgood\s+(morning|afternoon|evening|night|day)\b|^\W*(morning|evening)\b(?!\s+\w)"
)
# parsedatetime's accuracy flags (pdtContext)
_YEAR, _MONTH, _WEEK, _DAY, _HALFDAY = 1, 2, 4, 8, 16


@dataclass(frozen=True, slots=True)
class Window:
    """A span of time a message points at: from `start` (included) to `end` (excluded), and the
    words that named it."""

    start: datetime
    end: datetime
    words: str

    def holds(self, moment: datetime) -> bool:
        """Whether `moment` falls inside the window."""
        return self.start <= moment < self.end


def _midnight(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_span(year: int, month: int, months: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end_month = month + months
    end = datetime(year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _table(low: str, now: datetime) -> Window | None:
    """The forms parsedatetime does not know: seasons, the weekend, holidays."""
    if m := _SEASON.search(low):
        which, season = m.group(1), m.group(2)
        if season == "winter":  # December to February: the one that began last December
            year = now.year - 1 if now.month < 12 else now.year
            start, end = _month_span(year, 12, 3)
        else:
            first, last = _SEASONS[season]
            start, end = _month_span(now.year, first, last - first)
        if which != "this" and end > now:  # "last summer" has ended
            start, end = start.replace(year=start.year - 1), end.replace(year=end.year - 1)
        return Window(start, min(end, now), m.group(0)) if start < now else None
    if m := _WEEKEND.search(low):
        back = (now.weekday() - 5) % 7 or 7  # the last Saturday before today
        saturday = _midnight(now - timedelta(days=back))
        return Window(saturday, saturday + timedelta(days=2), m.group(0))
    if m := _HOLIDAY.search(low):
        month, first, last = _HOLIDAYS[m.group(1)]
        start = datetime(now.year, month, first, tzinfo=UTC)
        if start > now:
            start = start.replace(year=now.year - 1)
        end = start.replace(day=last) + timedelta(days=1)
        return Window(start, end, m.group(0))
    return None


def _parsed(low: str, now: datetime, calendar: parsedatetime.Calendar) -> Window | None:
    """The first expression parsedatetime finds that names a date (the day of the last part of
    a day the words name: "this morning"), as a past window. `now` is in UTC."""
    naive = now.replace(tzinfo=None)
    for when, context, _start, _end, words in calendar.nlp(low, sourceTime=naive) or ():
        accuracy = context.accuracy
        if not context.hasDate:
            if accuracy & _HALFDAY and _HALF_DAYS & set(_WORDS.findall(words)):
                # only the hour the part begins is read: parsedatetime dates "this morning"
                # from the process's clock and timezone, not from sourceTime
                day = _midnight(now)
                if day.replace(hour=when.hour, minute=when.minute) >= now:
                    day -= timedelta(days=1)  # not begun today (at 00:05): yesterday's
                return Window(day, day + timedelta(days=1), words.strip())
            continue  # a time of day alone ("dinner") names no date
        moment = when.replace(tzinfo=UTC)
        if accuracy & _DAY:
            start, end = _midnight(moment), _midnight(moment) + timedelta(days=1)
        elif accuracy & _WEEK:
            start = _midnight(moment) - timedelta(days=3)
            end = start + timedelta(days=7)
        elif accuracy & _MONTH:
            start, end = _month_span(moment.year, moment.month, 1)
        elif accuracy & _YEAR:
            start, end = _month_span(moment.year, 1, 12)
        else:
            continue
        # a month or weekday without a year: the last one before now
        step = timedelta(days=7) if accuracy & _DAY and not accuracy & _MONTH else None
        while start > now:
            if step is not None:
                start, end = start - step, end - step
            else:
                start, end = start.replace(year=start.year - 1), end.replace(year=end.year - 1)
        return Window(start, end, words.strip())
    return None


def time_window(text: str, now: datetime) -> Window | None:
    """The past window of time `text` names, relative to `now`, or None.

    Args:
        text: the message.
        now: the moment it is asked (UTC when naive); only the moment counts, not the
            timezone it is written in.
    """
    low = _GREETING.sub(" ", text.lower())
    words = set(_WORDS.findall(low))
    if words.isdisjoint(_CUES) and not any(w.isdigit() for w in words):
        return None
    if not words.isdisjoint(_FUTURE):
        return None  # what is coming: no memory is from then
    # one moment, one answer: a now written in another timezone names the same UTC days
    now = now.astimezone(UTC) if now.tzinfo is not None else now.replace(tzinfo=UTC)
    if (window := _table(low, now)) is not None:
        return window
    low = _FORTNIGHT.sub("two weeks", low)
    return _parsed(low, now, _calendar())


@cache
def _calendar() -> parsedatetime.Calendar:
    """One parsedatetime calendar per process, made when first needed (no work at import)."""
    return parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)


def time_bonus(
    window: Window | None, moments: Sequence[datetime], logits: np.ndarray
) -> np.ndarray:
    """What to add to each candidate's ranker logit so that, when the message names a window
    and a candidate is from inside it, the candidates from inside come first (in the ranker's
    order) and the others after: the span of the logits plus one for those inside, 0 for the
    rest. All zeros when no window is named or no candidate is from inside it."""
    bonus = np.zeros(len(moments))
    if window is None or not len(moments):
        return bonus
    inside = np.array([window.holds(m) for m in moments])
    if inside.any():
        bonus[inside] = float(np.ptp(logits)) + 1.0
    return bonus
