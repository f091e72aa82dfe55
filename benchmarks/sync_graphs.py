"""What a turn of a sync graph costs against the same graph's async turn (issue 55), and what
writing the turn before `invoke` returns costs against leaving it to the exit flush.

    python benchmarks/sync_graphs.py [--turns 200] [--seed-turns 300] [--no-write]

One fresh database, the default model (bge-small) warm, the embedding cache off; three users
who each already hold the same `--seed-turns` LoCoMo turns. A graph of the two default nodes
(`retrieve_memories` at START, a reply node that answers at once, `store_memories` after it)
runs `--turns` new turns (LoCoMo pairs, each made distinct) for each user, in blocks of 25
taking turns: `ainvoke` on this loop; `invoke` in a worker thread (`asyncio.to_thread`, where
no loop runs, as in a script), whose nodes run on recall's own loop; and `invoke` of the same
graph with a writer made with `wait_s=0` (the turn queued, its write left running: what a sync
graph would cost if turns were flushed at exit instead of written before `invoke` returns).
Writes docs/benchmarks.md (section "sync-graphs").
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime
from itertools import cycle, islice
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Annotated, Any, TypedDict

from harness.corpus import conversation_pairs
from harness.db import fresh_database
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import Call, percentiles, timed_interleaved
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph

from recall import retrieve_memories, store_memories
from recall.config import Settings
from recall.nodes import create_store_memories_node
from recall.nodes.blocking import run_blocking
from recall.nodes.memory_node import MemoryNode
from recall.store import MemoryStore
from recall.store.shared import close_default_store, get_default_store

SYSTEMS = {"async (ainvoke)": "bench-async", "sync (invoke)": "bench-sync",
           "sync, write left running": "bench-sync-queued"}  # fmt: skip


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    retrieved_memories: list[dict[str, Any]]


def reply(state: State) -> dict[str, Any]:
    """An answer at once, so the turn's time is the memory's."""
    return {"messages": [AIMessage("Noted.")]}


def graph_of(writer: MemoryNode) -> CompiledStateGraph[Any, Any, Any, Any]:
    """retrieve_memories -> reply -> the given writer node."""
    builder = StateGraph(State)
    builder.add_node("retrieve_memories", retrieve_memories)
    builder.add_node("reply", reply)
    builder.add_node("store_memories", writer)
    builder.add_edge(START, "retrieve_memories")
    builder.add_edge("retrieve_memories", "reply")
    builder.add_edge("reply", "store_memories")
    return builder.compile()


def turn_config(user: str, i: int) -> RunnableConfig:
    return {"configurable": {"thread_id": f"t{i}", "langgraph_auth_user": {"identity": user}}}


async def main() -> None:
    """Seed, time the three in turns, print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--turns", type=int, default=200, help="new turns per system")
    options.add_argument("--seed-turns", type=int, default=300, help="turns each user holds")
    args = options.parse_args()
    revision = git_revision()
    pairs = conversation_pairs(args.data)
    url = await fresh_database("recall_bench_sync_graphs")
    with TemporaryDirectory() as queue_dir:
        os.environ.update(
            RECALL_DATABASE_URL=url,
            RECALL_EMBEDDING_CACHE_TTL="0",
            RECALL_QUEUE_PATH=str(Path(queue_dir) / "outbox.sqlite3"),
        )
        async with MemoryStore.connect(Settings(database_url=url)) as seeder:
            seed = list(islice(cycle(pairs), args.seed_turns))
            for user in SYSTEMS.values():
                await seeder.add_turns(
                    {"user_id": user, "user_message": s, "ai_response": r, "conversation_id": "s"}
                    for s, r in seed
                )
        await (await get_default_store()).warm_up()
        await asyncio.to_thread(run_blocking, _warm_portal)
        graph = graph_of(store_memories)
        queued = graph_of(create_store_memories_node(wait_s=0.0))

        def turn(user: str, i: int) -> dict[str, Any]:
            said, _ = pairs[(args.seed_turns + i) % len(pairs)]
            return {"messages": [("user", f"{said} ({i})")]}

        def call(name: str, i: int) -> Call:
            user = SYSTEMS[name]
            if name.startswith("async"):
                return lambda: graph.ainvoke(turn(user, i), turn_config(user, i))
            which = queued if "left running" in name else graph
            return lambda: asyncio.to_thread(which.invoke, turn(user, i), turn_config(user, i))

        def calls(name: str) -> list[Call]:
            return [call(name, i) for i in range(args.turns)]

        timed = await timed_interleaved({name: calls(name) for name in SYSTEMS})
        await asyncio.to_thread(run_blocking, close_default_store)
        await close_default_store()
    base = percentiles(timed["async (ainvoke)"][0], [50, 95])
    rows = []
    for name in SYSTEMS:
        p50, p95 = percentiles(timed[name][0], [50, 95])
        rows.append([name, len(timed[name][0]), f"{p50:.2f}", f"{p95:.2f}",
                     f"{p50 / base[0]:.2f}", f"{p95 / base[1]:.2f}"])  # fmt: skip
    command = "python benchmarks/sync_graphs.py" + "".join(
        f" --{name} {value}"
        for name, value, default in (("turns", args.turns, 200),
                                     ("seed-turns", args.seed_turns, 300))
        if value != default
    )  # fmt: skip
    body = f"""## A sync graph's turn against an async one (issue 55)

`{command}` on {machine()}, commit {revision},
{datetime.now():%Y-%m-%d}. A whole graph turn (`retrieve_memories`, a reply node that answers
at once, `store_memories`; the model warm, the embedding cache off) for users holding the same
{args.seed_turns} turns, in blocks of 25 taking turns in one run: `ainvoke`; `invoke` from a
worker thread with no loop (the nodes run on recall's own loop, `recall.nodes.blocking`); and
`invoke` with a writer made with `wait_s=0`, whose write is left running when `invoke` returns
(what flushing at exit would save a turn; the default writes the turn before `invoke` returns,
docs/agents.md). Ratios are to `ainvoke`.

{table(["graph run", "turns", "p50 ms", "p95 ms", "p50 ratio", "p95 ratio"], rows)}
"""  # fmt: skip
    publish("sync-graphs", body, write=not args.no_write)


async def _warm_portal() -> None:
    """Open recall's own loop's process-wide store and load its model before the timing."""
    await (await get_default_store()).warm_up()


if __name__ == "__main__":
    run(main)
