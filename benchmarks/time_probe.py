"""Issue 35's time probe: a question that says when, relative to the moment it is asked, and
only the time tells three similar memories apart ("Where did I go hiking yesterday?", "... a
fortnight ago?", "... last summer?").

    python benchmarks/time_probe.py

benchmarks/data/time_probe.json holds three topics of three memories each, dated relative to
the run's own moment (yesterday, a fortnight ago, last summer; last weekend, two months ago,
around Christmas; this morning, in March, last year), and one question per memory that names
only its time. A new user's memories are stored in a fresh database (the store's default
model), then each question goes to `store.search(user, text)` at the store's defaults and at
threshold 0. Counted: the memory from when the question says first (target, issue 35: 8 of 9
or more), and among what returns. Writes docs/benchmarks.md (section "time-probe").
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from harness.db import fresh_database
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run

from recall.config import Settings
from recall.store import MemoryStore

DATA = ROOT / "benchmarks" / "data" / "time_probe.json"
USER = "time-probe-user"


def dated(when: dict[str, int], now: datetime) -> datetime:
    """A memory's moment: `days` before now, the last Saturday-like `weekday` before today, or
    the last `month`/`day` before now (`years` more back), at `hour` (12 by default)."""
    hour = when.get("hour", 12)
    if "days" in when:
        moment = (now - timedelta(days=when["days"])).replace(hour=hour, minute=0, second=0)
        return moment if moment < now else moment - timedelta(days=1)
    if "weekday" in when:
        back = (now.weekday() - when["weekday"]) % 7 or 7
        return (now - timedelta(days=back)).replace(hour=hour, minute=0, second=0)
    moment = now.replace(month=when["month"], day=when["day"], hour=hour, minute=0, second=0)
    if moment >= now:
        moment = moment.replace(year=moment.year - 1)
    return moment.replace(year=moment.year + when.get("years", 0))


async def main() -> None:
    """Store the memories, ask the questions, print and write."""
    args = parser(__doc__).parse_args()
    revision = git_revision()
    data: dict[str, Any] = json.loads(DATA.read_text("utf-8"))
    now = datetime.now(UTC).replace(microsecond=0)
    url = await fresh_database("recall_bench_time_probe")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    rows = []
    first = among = 0
    async with MemoryStore.connect(settings) as store:
        for n, topic in enumerate(data["topics"]):
            ids = await store.add_turns(
                {"user_id": USER, "user_message": m["text"], "ai_response": data["reply"],
                 "conversation_id": f"told-{n}-{i}", "created_at": dated(m["when"], now)}
                for i, m in enumerate(topic["memories"])
            )  # fmt: skip
            for q in topic["questions"]:
                wanted = ids[q["memory"]]
                found = await store.search(USER, q["text"])
                ranked = await store.search(USER, q["text"], similarity_threshold=0.0)
                hit = bool(found) and str(found[0].id) == wanted
                first += hit
                among += wanted in {str(m.id) for m in found}
                top = ranked[0].user_message if ranked else "-"
                when = dated(topic["memories"][q["memory"]]["when"], now)
                rows.append([q["text"], f"{when:%Y-%m-%d}", "yes" if hit else "no",
                             str(len(found)), top])  # fmt: skip
    total = len(rows)
    print(f"right memory first: {first} of {total}; among what returns: {among} of {total}")
    body = f"""## A question that says when (issue 35's time probe)

`python benchmarks/time_probe.py` on {machine()}, commit {revision}, {now:%Y-%m-%d} (the
memories are dated relative to the run's moment). A new user holds three topics of three similar
memories (benchmarks/data/time_probe.json); each question names only when. `store.search(user,
text)` at the store's defaults (limit {settings.max_memories}, threshold
{settings.similarity_threshold}). Target (issue 35): the memory from when the question says
first for 8 of 9 or more.

Right memory first: **{first} of {total}**; among what returns: {among} of {total}.

{table(["question", "the memory's date", "right one first", "returned", "first at threshold 0"],
       rows)}
"""  # fmt: skip
    publish("time-probe", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
