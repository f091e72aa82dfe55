"""What issue 37 costs a write: `add_turn` with provenance and the search for a turn it repeats,
against today's `add_turn` (both off), taking turns in blocks in one run.

    python benchmarks/write_cost.py [--writes 400] [--seed-turns 300] [--no-write]

One fresh database, the default model (bge-small) warm, the embedding cache off; two users who
each already hold the same `--seed-turns` LoCoMo turns; two stores on it, each writing for its
own user, one with
`link_repeated_turns=False` (today's write: embed, insert; the write path of main before issue
37, c6dfe9a), one at the defaults (embed, then one call that looks for a near-duplicate among
the user's nearest memories and inserts when there is none, with three source ids as
provenance). Each writes `--writes` new turns (LoCoMo pairs, each made distinct), in blocks of
25 taking turns; then 100 repeats each (a turn written before, again in another conversation:
today a second row, with issue 37 a count on the first). Writes docs/benchmarks.md (section
"write-cost").
"""

from __future__ import annotations

from datetime import datetime
from itertools import cycle, islice

from harness.corpus import conversation_pairs
from harness.db import fresh_database
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import Call, percentiles, timed_interleaved

from recall.config import Settings
from recall.search.provenance import Provenance
from recall.store import MemoryStore

USERS = {"today": "writer-today", "issue 37": "writer-37"}  # the same history each
REPEATS = 100


async def main() -> None:
    """Seed, time both in turns, print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--writes", type=int, default=400, help="new turns per system")
    options.add_argument("--seed-turns", type=int, default=300, help="turns the user holds")
    args = options.parse_args()
    revision = git_revision()
    pairs = conversation_pairs(args.data)
    url = await fresh_database("recall_bench_write_cost")
    base = Settings(database_url=url, embedding_cache_ttl=0)
    today = Settings(database_url=url, embedding_cache_ttl=0, link_repeated_turns=False)
    async with MemoryStore.connect(today) as off, MemoryStore.connect(base) as on:
        seed = list(islice(cycle(pairs), args.seed_turns))
        ids = {}
        for name, user in USERS.items():
            ids[name] = await off.add_turns(
                {"user_id": user, "user_message": s, "ai_response": r, "conversation_id": "seed"}
                for s, r in seed
            )
        sources = Provenance(tuple(ids["issue 37"][:3]), tuple(ids["issue 37"][:1]), False)
        await on.embedder.load()
        await off.embedder.load()

        def new(store: MemoryStore, user: str, i: int, provenance: Provenance | None) -> Call:
            said, replied = pairs[(args.seed_turns + i) % len(pairs)]
            text = f"{said} ({i})"
            return lambda: store.add_turn(
                user, text, replied, conversation_id=f"c{i}", provenance=provenance
            )

        def repeat(store: MemoryStore, user: str, i: int) -> Call:
            said, replied = pairs[(args.seed_turns + i) % len(pairs)]
            text = f"{said} ({i})"
            return lambda: store.add_turn(user, text, replied, conversation_id=f"again{i}")

        fresh = await timed_interleaved(
            {
                "today": [new(off, USERS["today"], i, None) for i in range(args.writes)],
                "issue 37": [new(on, USERS["issue 37"], i, sources) for i in range(args.writes)],
            }
        )
        again = await timed_interleaved(
            {
                "today": [repeat(off, USERS["today"], i) for i in range(REPEATS)],
                "issue 37": [repeat(on, USERS["issue 37"], i) for i in range(REPEATS)],
            }
        )
        # a repeat that returns the memory first written is linked; a new id is a new row
        linked = {
            name: sum(m.id in {f.id for f in fresh[name][1]} for m in again[name][1])
            for name in fresh
        }
    rows = []
    for case, timed in (("new turn", fresh), ("repeat, other conversation", again)):
        t_off = percentiles(timed["today"][0], [50, 95])
        t_on = percentiles(timed["issue 37"][0], [50, 95])
        rows.append([case, len(timed["today"][0]), f"{t_off[0]:.2f}", f"{t_off[1]:.2f}",
                     f"{t_on[0]:.2f}", f"{t_on[1]:.2f}", f"{t_on[0] / t_off[0]:.2f}",
                     f"{t_on[1] / t_off[1]:.2f}"])  # fmt: skip
    print(f"repeats linked to the first write: {linked}")
    command = "python benchmarks/write_cost.py" + "".join(
        f" --{name} {value}"
        for name, value, default in (("writes", args.writes, 400),
                                     ("seed-turns", args.seed_turns, 300))
        if value != default
    )  # fmt: skip
    body = f"""## What provenance and linking repeats cost a write (issue 37)

`{command}` on {machine()}, commit {revision},
{datetime.now():%Y-%m-%d}. `add_turn` one call at a time (the model warm, the embedding cache
off) for users holding the same {args.seed_turns} turns, one per system: today's write
(`RECALL_LINK_REPEATED_TURNS` off, no provenance: `recall.add_memory`, the same call as before
issue 37) and issue 37's (three source ids as provenance, and the search for a turn it repeats:
the user's 10 nearest memories within `RECALL_DEDUP_THRESHOLD`, inside the insert's call
`recall.add_turn`, migration 0019; a word-for-word test and a second call only when one is that
near), in blocks of 25 taking turns in one run.
"repeat": a turn written before, again in another conversation: today a second row, with issue
37 a count on the first (no insert). Repeats linked to the first write: today
{linked["today"]} of {REPEATS}, issue 37 {linked["issue 37"]} of {REPEATS}. Target (issue 37):
p95 <= 25 ms.

{table(["case", "calls each", "today p50 ms", "today p95 ms", "issue 37 p50 ms",
        "issue 37 p95 ms", "p50 ratio", "p95 ratio"], rows)}
"""  # fmt: skip
    publish("write-cost", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
