"""Issue 35's time probe: a question that says when, relative to the moment it is asked, and
only the time tells three similar memories apart ("Where did I go hiking yesterday?", "... a
fortnight ago?", "... last summer?").

    python benchmarks/time_probe.py [--now 2026-11-28T00:05:00Z]

benchmarks/data/time_probe.json holds three topics of three memories each, dated relative to
the run's own moment (yesterday, a fortnight ago, last summer; last weekend, two months ago,
around Christmas; this morning, in March, last year), and one question per memory that names
only its time. A new user's memories are stored in a fresh database (the store's default
model), then each question goes to `store.search(user, text, now=...)` at the store's defaults
and at threshold 0. The memories' dates and the searches read one moment: `--now` (an ISO 8601
timestamp, UTC when it names no offset), else the clock's (issue 44: one moment, one answer,
whatever the machine's clock and timezone). Counted: the memory from when the question says
first (target, issue 35: 8 of 9 or more), and among what returns. Writes docs/benchmarks.md
(section "time-probe").
"""

from __future__ import annotations

import calendar
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from harness.db import fresh_database
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import moment, parser, run

from recall.config import Settings
from recall.store import MemoryStore

DATA = ROOT / "benchmarks" / "data" / "time_probe.json"
USER = "time-probe-user"


def dated(when: dict[str, Any], now: datetime) -> datetime:
    """A memory's moment, before `now` (UTC), at `hour` (12 by default): `days` before now (a
    day earlier when that hour has not come yet), the same day `months` calendar months back
    (the month's last day when it has no such day), the last `weekday` (0: Monday) before
    today, or the last `month`/`day` before now, or before the moment `before` names (itself
    dated this way: "last summer" is the last 20 July before the last 1 September)."""
    hour = when.get("hour", 12)
    if "before" in when:
        now = dated(when["before"], now)
    if "days" in when:
        moment = (now - timedelta(days=when["days"])).replace(hour=hour, minute=0, second=0)
        return moment if moment < now else moment - timedelta(days=1)
    if "months" in when:
        # "two months ago" names a calendar month; 61 days back leaves it at a month's end
        year, month = divmod(now.year * 12 + now.month - 1 - when["months"], 12)
        day = min(now.day, calendar.monthrange(year, month + 1)[1])
        return now.replace(year=year, month=month + 1, day=day, hour=hour, minute=0, second=0)
    if "weekday" in when:
        back = (now.weekday() - when["weekday"]) % 7 or 7
        return (now - timedelta(days=back)).replace(hour=hour, minute=0, second=0)
    moment = now.replace(month=when["month"], day=when["day"], hour=hour, minute=0, second=0)
    return moment if moment < now else moment.replace(year=moment.year - 1)


async def main() -> None:
    """Store the memories, ask the questions at the run's moment, print and write."""
    cli = parser(__doc__)
    cli.add_argument("--now", type=moment, help="the moment asked (ISO 8601); default: now")
    args = cli.parse_args()
    now: datetime = (args.now or datetime.now(UTC)).replace(microsecond=0)
    revision = git_revision()
    data: dict[str, Any] = json.loads(DATA.read_text("utf-8"))
    url = await fresh_database("recall_bench_time_probe")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings) as store:
        rows = [row for n in range(len(data["topics"])) for row in await asked(store, data, n, now)]
    total = len(rows)
    first = sum(r[2] == "yes" for r in rows)
    among = sum(r[3] == "yes" for r in rows)
    print(f"asked at {now:%Y-%m-%d %H:%M} UTC: right memory first: {first} of {total}; among "
          f"what returns: {among} of {total}")  # fmt: skip
    body = f"""## A question that says when (issue 35's time probe)

`python benchmarks/time_probe.py` on {machine()}, commit {revision}, asked at {now:%Y-%m-%d %H:%M}
UTC (the memories are dated relative to that moment, `--now`). A new user holds three topics of
three similar memories (benchmarks/data/time_probe.json); each question names only when.
`store.search(user, text, now=...)` at the store's defaults (limit {settings.max_memories},
threshold {settings.similarity_threshold}). Target (issue 35): the memory from when the question
says first for 8 of 9 or more.

Right memory first: **{first} of {total}**; among what returns: {among} of {total}.

{table(["question", "the memory's date", "right one first", "returned", "first at threshold 0"],
       [[r[0], r[1], r[2], r[4], r[5]] for r in rows])}
"""  # fmt: skip
    publish("time-probe", body, write=not args.no_write)


async def asked(store: MemoryStore, data: dict[str, Any], n: int, now: datetime) -> list[list[str]]:
    """Tell topic `n`'s memories, dated from `now`, in conversations of their own, then ask
    each of its questions at `now`: a row per question (the question, the memory's date, its
    memory first, among what returns, how many return, the first at threshold 0)."""
    topic = data["topics"][n]
    memories = topic["memories"]
    ids = await store.add_turns(
        {"user_id": USER, "user_message": m["text"], "ai_response": data["reply"],
         "conversation_id": f"told-{n}-{i}", "created_at": dated(m["when"], now)}
        for i, m in enumerate(memories)
    )  # fmt: skip
    rows = []
    for q in topic["questions"]:
        wanted = ids[q["memory"]]
        found = await store.search(USER, q["text"], now=now)
        ranked = await store.search(USER, q["text"], similarity_threshold=0.0, now=now)
        first = bool(found) and str(found[0].id) == wanted
        among = wanted in {str(m.id) for m in found}
        when = dated(memories[q["memory"]]["when"], now)
        rows.append([q["text"], f"{when:%Y-%m-%d}", "yes" if first else "no",
                     "yes" if among else "no", str(len(found)),
                     ranked[0].user_message if ranked else "-"])  # fmt: skip
    return rows


if __name__ == "__main__":
    run(main)
