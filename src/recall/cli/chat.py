"""`recall chat` (the companion graph in the terminal) and `recall demo` (a short tour)."""

from __future__ import annotations

import asyncio
from typing import Annotated, NamedTuple, cast

import typer

from recall.cli.invocation import settings_of, with_store
from recall.cli.options import ModeOpt, ThresholdOpt, UserOpt, limit_option
from recall.cli.output import print_memories
from recall.config import RetrievalMode, Settings
from recall.store import MemoryStore

__all__ = ["app"]

app = typer.Typer()

DEMO_USERS = ("demo-alice", "demo-bob")  # never a real user's id: the tour erases them


@app.command()
def chat(
    ctx: typer.Context,
    user: UserOpt,
    thread: Annotated[str | None, typer.Option(help="Thread to continue (new by default).")] = None,
    threshold: ThresholdOpt = None,
    limit: Annotated[int | None, limit_option(100)] = None,
    mode: ModeOpt = None,
) -> None:
    """Chat in the terminal with the companion graph, in-process, showing retrieved memories.

    Uses RECALL_CHAT_MODEL when set, else the offline responder. End with Ctrl-D or /quit."""
    settings = settings_of(ctx)
    # what was left out (None) the store fills in (docs/decisions/0033-the-store-decides.md)
    how = _Retrieval(limit, threshold, cast(RetrievalMode | None, mode))  # --mode checked it
    with_store(settings, lambda store: _converse(store, settings, how, user, thread), create=True)


class _Retrieval(NamedTuple):
    """The search options given to `recall chat` (None: the store's)."""

    limit: int | None
    threshold: float | None
    mode: RetrievalMode | None


async def _converse(
    store: MemoryStore, settings: Settings, how: _Retrieval, user: str, thread: str | None
) -> None:
    import uuid

    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver

    from recall.example.graph import build_graph
    from recall.example.responder import OFFLINE_LABEL, OFFLINE_NAME, create_respond_node
    from recall.nodes import create_retrieve_memories_node, create_store_memories_node
    from recall.nodes.turn_writer import TurnWriter
    from recall.outbox import Outbox
    from recall.store.shared import provider_for

    await store.warm_up()
    writer = TurnWriter(provider_for(store), Outbox(settings.queue_path), settings=settings)
    graph = build_graph(
        retrieve=create_retrieve_memories_node(
            store,
            limit=how.limit,
            similarity_threshold=how.threshold,
            mode=how.mode,
            settings=settings,
        ),
        respond=create_respond_node(settings.chat_model),
        store=create_store_memories_node(writer=writer, settings=settings),
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {
        "configurable": {
            "thread_id": thread or str(uuid.uuid4()),
            "langgraph_auth_user": {"identity": user},
        }
    }
    typer.echo(f"chatting as {user!r} (thread {config['configurable']['thread_id']})")
    try:
        while True:
            try:
                line = await asyncio.to_thread(input, "you> ")
            except EOFError:
                break
            if line.strip() in {"/quit", "/exit"}:
                break
            if not line.strip():
                continue
            out = await graph.ainvoke({"messages": [HumanMessage(line)]}, config)
            for m in out.get("retrieved_memories", []):
                typer.echo(f"  [memory {m['similarity']:.3f}] {m['user_message']}")
            reply = out["messages"][-1]
            who = f"ai {OFFLINE_LABEL}" if reply.name == OFFLINE_NAME else "ai"
            typer.echo(f"{who}> {reply.content}")
    finally:
        await writer.flush(timeout_s=10)
        await writer.close()


@app.command()
def demo(ctx: typer.Context) -> None:
    """A short tour: store two demo users' memories, search them, erase them (uses the real
    model; the users are `demo-alice` and `demo-bob`, never your own)."""

    alice, bob = DEMO_USERS

    async def work(store: MemoryStore) -> None:
        try:
            await store.add_turn(alice, "I adopted a dog named Max", "Max is a lovely name!")
            await store.add_turn(alice, "I work as a nurse in Lyon", "That sounds demanding.")
            await store.add_turn(bob, "My cat is called Luna", "Luna is a pretty name.")
            for user in DEMO_USERS:
                hits = await store.search(user, "What is my dog's name?")
                typer.echo(f"\n{user} asks: What is my dog's name?")
                print_memories(hits, as_json=False)
        finally:  # the tour leaves nothing behind
            for user in DEMO_USERS:
                await store.forget_user(user)

    with_store(settings_of(ctx), work, create=True)
