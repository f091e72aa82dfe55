"""Load: concurrent simulated users doing retrieve + respond + write turns against a real
database, once steady and once with the database restarted mid-run.

    python benchmarks/load.py [--users 64] [--seconds 60]

Each user sends unique messages in its own thread; the writer's queue absorbs the outage. At
the end the queue is drained and every acknowledged turn is looked up: lost = acknowledged
but not stored, duplicated = stored more than once. Writes docs/benchmarks.md (section "load").
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import percentiles
from langchain_core.messages import AIMessage, HumanMessage

from recall.config import Settings
from recall.db.embedded import EmbeddedServer
from recall.db.pool import connect_once
from recall.metrics import RetrievalMetrics
from recall.nodes import create_retrieve_memories_node, create_store_memories_node
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox
from recall.store import MemoryStore
from recall.store.shared import provider_for

TOPICS = ["hiking", "the dog", "work", "a trip", "music", "cooking", "books", "the garden"]


async def scenario(seconds: float, users: int, restart: bool, label: str) -> list[object]:
    """`users` users' turns for `seconds` on a fresh embedded server (restarted half way
    through when `restart`): the table's row."""
    server = EmbeddedServer(ROOT / ".recall" / "load-pgdata")
    url = await server.astart(stop_at_exit=True)
    settings = Settings(database_url=url, embedding_cache_ttl=0, search_timeout_ms=2000)
    queue = ROOT / ".recall" / f"load-outbox-{label}.sqlite3"
    queue.unlink(missing_ok=True)
    metrics = RetrievalMetrics()
    async with MemoryStore.connect(settings) as store:
        store.pool.timeout = 3.0  # during the outage, give up on a connection after 3 s
        await store.warm_up()
        owner = await connect_once(url)  # TRUNCATE is the owner's, not the app role's
        await owner.execute("TRUNCATE recall.memories, recall.users")
        await owner.close()
        writer = TurnWriter(provider_for(store), Outbox(queue), wait_s=1.0, retry_initial_s=0.2)
        retrieve = create_retrieve_memories_node(store, settings=settings, metrics=metrics)
        write = create_store_memories_node(writer=writer, settings=settings)
        lat: dict[str, list[float]] = {"retrieve": [], "write": [], "turn": []}
        acknowledged: list[tuple[str, str]] = []
        errors = 0
        stop_at = time.monotonic() + seconds

        async def user(u: int) -> None:
            nonlocal errors
            n = 0
            config: Any = {"configurable": {"thread_id": f"load-{u}",
                           "langgraph_auth_user": {"identity": f"load-user-{u}"}}}  # fmt: skip
            while time.monotonic() < stop_at:
                text = f"turn {n} of user {u}: today I did some {TOPICS[(u + n) % len(TOPICS)]}"
                state: dict[str, Any] = {"messages": [HumanMessage(text)]}
                try:
                    t0 = time.perf_counter()
                    found = await retrieve(state, config)
                    t1 = time.perf_counter()
                    state["messages"].append(
                        AIMessage(f"Noted ({len(found['retrieved_memories'])} memories).")
                    )
                    await write(state, config)
                    t2 = time.perf_counter()
                except Exception:
                    errors += 1
                    continue
                lat["retrieve"].append((t1 - t0) * 1000)
                lat["write"].append((t2 - t1) * 1000)
                lat["turn"].append((t2 - t0) * 1000)
                acknowledged.append((f"load-user-{u}", text))
                n += 1

        async def outage() -> None:
            await asyncio.sleep(seconds / 2)
            await server.astop()
            await asyncio.sleep(3)
            await server.astart(stop_at_exit=True)

        started = time.monotonic()
        tasks = [user(u) for u in range(users)] + ([outage()] if restart else [])
        await asyncio.gather(*tasks)
        wall = time.monotonic() - started
        await writer.flush(timeout_s=120)
        queued_left = await writer.outbox.count()
        async with store.connection(all_users=True) as conn:
            cur = await conn.execute(
                "SELECT user_id, user_message, count(*) FROM recall.memories "
                "WHERE user_id LIKE 'load-user-%%' GROUP BY 1, 2"
            )
            rows = await cur.fetchall()
        await writer.close()
    await server.astop()
    stored = {(u, m): c for u, m, c in rows}
    lost = sum((key not in stored) for key in acknowledged)
    duplicated = sum(c - 1 for c in stored.values() if c > 1)
    totals = metrics.totals()
    degraded = sum(v for k, v in totals.items() if k not in ("ok", "empty"))
    return [
        label,
        users,
        f"{len(acknowledged) / wall:.1f}",
        *(f"{percentiles(lat[step], [95])[0]:.0f}" for step in ("retrieve", "write", "turn")),
        errors,
        degraded,
        lost,
        duplicated,
        queued_left,
    ]


async def main() -> None:
    """Both scenarios, one after the other; print and write."""
    options = parser(__doc__)
    options.add_argument("--users", type=int, default=64)
    options.add_argument("--seconds", type=float, default=60)
    args = options.parse_args()
    revision = git_revision()
    rows = [
        await scenario(args.seconds, args.users, False, "steady"),
        await scenario(args.seconds, args.users, True, "database restarted mid-run"),
    ]
    headers = ["run", "users", "turns/s", "retrieve p95 ms", "write p95 ms", "turn p95 ms",
               "errors", "retrievals degraded to empty", "lost turns", "duplicated turns",
               "left in queue"]  # fmt: skip
    body = f"""## Load: {args.users} concurrent users for {args.seconds:.0f} s

`python benchmarks/load.py --users {args.users} --seconds {args.seconds:.0f}` on {machine()},
commit {revision}. Each turn: `retrieve_memories` (real model, hybrid) + a fixed reply +
`store_memories`. "errors" are exceptions out of a node (target 0); "degraded" are retrievals
that returned no memories because of a timeout or database error (by design, never an error);
lost and duplicated turns are counted after the writer's queue is drained.

{table(headers, rows)}
"""
    publish("load", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
