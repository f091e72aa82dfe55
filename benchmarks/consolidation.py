"""Does memory creation slow a turn? Turn latency with background consolidation on and off.

    python benchmarks/consolidation.py [--turns 60]

A turn is `retrieve_memories` + `store_memories` (the real model embeds; the reply is fixed).
With consolidation on, every 4 turns a fake model that takes 2 s (as a real LLM would) writes
two memories in the background, which are then embedded and stored. On and off alternate turn
by turn in the same run, on separate users, so both see the same machine load. Writes
docs/benchmarks.md (section "consolidation").
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from harness.db import fresh_database
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import percentiles
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from recall.config import Settings
from recall.creation.consolidate import ConsolidationScheduler, Consolidator
from recall.creation.extraction import RunnableExtractor
from recall.nodes import create_retrieve_memories_node, create_store_memories_node
from recall.store import MemoryStore

LLM_S = 2.0  # the fake model's answer time, as a real LLM's
QUEUE = ROOT / ".recall" / "bench-outbox.sqlite3"


async def slow_llm(prompt: Any) -> str:
    """A model that answers after LLM_S seconds with two new memories."""
    await asyncio.sleep(LLM_S)
    n = str(prompt).count("Turn") + time.time_ns() % 997
    return json.dumps(
        [
            {"title": f"Hike {n}", "summary": f"The user hiked near lake {n} with a friend.",
             "entities": ["User"], "key_phrases": ["hiking"]},
            {"title": f"Plan {n}", "summary": f"They plan trip number {n} by train.",
             "entities": [], "key_phrases": ["travel"]},
        ]
    )  # fmt: skip


async def main() -> None:
    """Turns with consolidation off and on, alternating; print and write."""
    options = parser(__doc__)
    options.add_argument("--turns", type=int, default=60)
    args = options.parse_args()
    revision = git_revision()
    url = await fresh_database("recall_bench_consolidation")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings) as store:
        await store.warm_up()
        scheduler = ConsolidationScheduler(
            Consolidator(store, RunnableExtractor(RunnableLambda(slow_llm)), chunk_size=4),
            debounce_s=0.05,
        )
        retrieve = create_retrieve_memories_node(store, settings=settings)
        writers = {
            "off": create_store_memories_node(store, settings=settings, queue_path=QUEUE),
            "on": create_store_memories_node(
                store, settings=settings, queue_path=QUEUE, consolidation=scheduler
            ),
        }
        latency: dict[str, list[float]] = {"off": [], "on": []}
        for i in range(args.turns):
            for label in ("off", "on") if i % 2 == 0 else ("on", "off"):
                config: Any = {"configurable": {"thread_id": f"t-{label}",
                               "langgraph_auth_user": {"identity": f"bench-{label}"}}}  # fmt: skip
                question = f"Turn {i}: I went hiking near lake number {i} with my friend."
                state: dict[str, Any] = {"messages": [HumanMessage(question)]}
                started = time.perf_counter()
                found = await retrieve(state, config)
                state["messages"].append(AIMessage(f"Nice! ({len(found['retrieved_memories'])})"))
                await writers[label](state, config)
                latency[label].append((time.perf_counter() - started) * 1000)
        await scheduler.wait()
        made = [m for m in await store.recent("bench-on", 1000) if m.kind == "summary"]
        await scheduler.close()

    p = {label: percentiles(values, [50, 95]) for label, values in latency.items()}
    rows = [[label, len(latency[label]), f"{p50:.1f}", f"{p95:.1f}"]
            for label, (p50, p95) in p.items()]  # fmt: skip
    ratio50, ratio95 = (on / off for on, off in zip(p["on"], p["off"], strict=True))
    body = f"""## Turn latency with background memory creation

`python benchmarks/consolidation.py --turns {args.turns}` on {machine()}, commit
{revision}. A turn = `retrieve_memories` + `store_memories` with the real model;
consolidation "on" runs a 2-second fake LLM every 4 turns in the background and stores what it
returns ({len(made)} memories were created during the run). On and off alternate in the same run.

{table(["consolidation", "turns", "p50 ms", "p95 ms"], rows)}

Ratio on/off: p50 {ratio50:.2f}, p95 {ratio95:.2f}.
"""
    publish("consolidation", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
