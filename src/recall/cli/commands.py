"""The `recall` command: database, migrations, memories, import and maintenance (Typer)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Coroutine, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from recall.config import Settings
from recall.db.embedded import EmbeddedServer
from recall.db.migrate import apply_migrations, bind_embedding_space
from recall.db.pool import connect_once, locate_database
from recall.embeddings import Embedder, configured_embeddings
from recall.errors import ConfigError, InvalidInputError, RecallError
from recall.logs import configure_logging
from recall.memory import Memory
from recall.store import MemoryStore

__all__ = ["app", "main"]

T = TypeVar("T")

app = typer.Typer(
    help="Long-term memory for LangGraph agents on PostgreSQL + pgvector.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="The embedded PostgreSQL server (used when no database URL is set).")
app.add_typer(db_app, name="db")


@app.callback()
def _setup() -> None:
    # the CLI's own output is its answer: log warnings and errors only, unless asked for more
    configure_logging(level=None if "RECALL_LOG_LEVEL" in os.environ else "WARNING")


UserOpt = Annotated[str, typer.Option("--user", "-u", help="The user whose memories to use.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except RecallError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _memory_json(m: Memory) -> dict[str, Any]:
    data = asdict(m)
    data["created_at"] = m.created_at.isoformat()
    return data


def _print_memories(memories: list[Memory], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([_memory_json(m) for m in memories], ensure_ascii=False, indent=2))
        return
    if not memories:
        typer.echo("no memories found")
        return
    for m in memories:
        score = "" if m.score is None else f"[{m.score:.3f}] "
        typer.echo(f"{score}{m.created_at:%Y-%m-%d %H:%M} {m.id}")
        typer.echo(f"  user: {m.user_message}")
        typer.echo(f"  ai:   {m.ai_response}")


@db_app.command("start")
def db_start() -> None:
    """Start the embedded server and leave it running (stop it with `recall db stop`)."""
    settings = Settings.from_env()
    if settings.database_url:
        typer.echo("RECALL_DATABASE_URL is set: recall uses that server; nothing to start")
        return
    server = EmbeddedServer(settings.data_dir)
    uri = _run(server.astart(stop_at_exit=False))
    typer.echo(f"embedded PostgreSQL running in {server.path}\n{uri}")


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded server."""
    server = EmbeddedServer(Settings.from_env().data_dir)
    stopped = _run(server.astop())
    typer.echo("stopped" if stopped else "not running")


@db_app.command("status")
def db_status() -> None:
    """Show whether the embedded server runs, where, and its URI."""
    settings = Settings.from_env()
    if settings.database_url:
        typer.echo("using RECALL_DATABASE_URL (the embedded server is not used)")
    status = EmbeddedServer(settings.data_dir).status()
    typer.echo(f"data dir:    {status.data_dir}")
    typer.echo(f"initialized: {'yes' if status.initialized else 'no'}")
    typer.echo(f"running:     {'yes (pid ' + str(status.pid) + ')' if status.running else 'no'}")
    if status.uri:
        typer.echo(f"uri:         {status.uri}")


@app.command()
def migrate() -> None:
    """Apply pending migrations (safe to run concurrently and repeatedly)."""

    async def go() -> list[int]:
        settings = Settings.from_env()
        embedder = Embedder(configured_embeddings(settings))
        database = await locate_database(settings)
        conn = await connect_once(database.url)
        try:
            applied = await apply_migrations(conn)
            await bind_embedding_space(conn, embedder.name, await embedder.dimensions())
        finally:
            await conn.close()
        return applied

    applied = _run(go())
    if applied:
        typer.echo("applied migrations: " + ", ".join(f"{v:04d}" for v in applied))
    else:
        typer.echo("database is up to date")


@app.command()
def add(
    user: UserOpt,
    user_message: Annotated[str, typer.Argument(help="What the user said.")],
    ai_response: Annotated[str, typer.Argument(help="What the AI answered.")],
    conversation: Annotated[str | None, typer.Option(help="Conversation (thread) id.")] = None,
) -> None:
    """Store one turn pair."""

    async def go() -> Memory:
        async with MemoryStore.connect() as store:
            return await store.add_turn(
                user, user_message, ai_response, conversation_id=conversation
            )

    typer.echo(_run(go()).id)


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{path}:{number}: not valid JSON: {exc.msg}") from exc
            if not isinstance(item, dict):
                raise InvalidInputError(f"{path}:{number}: expected a JSON object per line")
            yield item


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSON lines file.")],
    batch_size: Annotated[int, typer.Option(min=1, help="Turns per transaction.")] = 1000,
    writers: Annotated[
        int, typer.Option(min=1, help="Batches written at once, each on its own connection.")
    ] = 2,
) -> None:
    """Import turns from a JSON lines file (user_id, user_message, ai_response,
    conversation_id, created_at, metadata per line). Re-running it stores nothing twice."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with file.open(encoding="utf-8") as fh:
        total = sum(1 for line in fh if line.strip())

    async def go() -> tuple[int, list[str]]:
        async with MemoryStore.connect() as store:
            with Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=not sys.stderr.isatty(),
            ) as progress:
                task = progress.add_task("importing", total=total)
                ids = await store.add_turns(
                    _read_jsonl(file),
                    batch_size=batch_size,
                    on_batch=lambda n: progress.update(task, completed=n),
                    writers=writers,
                )
            indexed = await store.optimize()
            return len(ids), indexed

    count, indexed = _run(go())
    typer.echo(f"imported {count} turns")
    if indexed:
        typer.echo(f"built HNSW indexes for {len(indexed)} large users")


@app.command("import-notes")
def import_notes(
    directory: Annotated[
        Path, typer.Argument(exists=True, file_okay=False, help="Folder with MEMORY.md, memory/")
    ],
    user: UserOpt,
) -> None:
    """Import MEMORY.md and memory/YYYY-MM-DD.md notes as searchable memories (one per
    paragraph, dated by file name). Re-running it stores nothing twice."""
    from recall.creation.notes import note_files, read_notes

    files = note_files(directory)
    if not files:
        typer.echo(f"error: no MEMORY.md or memory/YYYY-MM-DD.md in {directory}", err=True)
        raise typer.Exit(1)

    async def go() -> int:
        async with MemoryStore.connect() as store:
            return len(await store.add_turns(read_notes(directory, user)))

    typer.echo(f"imported {_run(go())} paragraphs from {len(files)} files")


@app.command()
def search(
    user: UserOpt,
    text: Annotated[str, typer.Argument(help="What to search for.")],
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 3,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.5,
    mode: Annotated[str, typer.Option(help="semantic, keyword or hybrid.")] = "hybrid",
    as_json: JsonOpt = False,
) -> None:
    """Search a user's memories (hybrid by default: meaning and keywords)."""

    async def go() -> list[Memory]:
        async with MemoryStore.connect() as store:
            return await store.search(
                user,
                text,
                limit=limit,
                similarity_threshold=threshold,
                mode=mode,  # type: ignore[arg-type]
            )

    _print_memories(_run(go()), as_json)


@app.command()
def recent(
    user: UserOpt,
    n: Annotated[int, typer.Option("-n", min=1, max=1000, help="How many.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's most recent memories."""

    async def go() -> list[Memory]:
        async with MemoryStore.connect() as store:
            return await store.recent(user, n)

    _print_memories(_run(go()), as_json)


@app.command()
def forget(
    user: UserOpt,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase every memory of a user."""
    if not yes:
        typer.confirm(f"Erase every memory of {user!r}?", abort=True)

    from recall.db.outbox import Outbox

    async def go() -> int:
        settings = Settings.from_env()
        # turns still waiting for the database are the user's data too
        outboxes = [Outbox(settings.queue_path)] if settings.queue_path.exists() else []
        try:
            async with MemoryStore.connect(settings) as store:
                return await store.forget_user(user, outboxes=outboxes)
        finally:
            for outbox in outboxes:
                outbox.close()

    typer.echo(f"erased {_run(go())} memories")


@app.command()
def stats(
    server: Annotated[
        str | None,
        typer.Option(help="A running server (e.g. http://127.0.0.1:8123) to read metrics from."),
    ] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token for the server.")] = None,
) -> None:
    """Show memory counts per user size bucket, and a running server's retrieval metrics."""

    async def go() -> tuple[dict[str, int], list[tuple[str, int, int]]]:
        async with MemoryStore.connect() as store:
            return await store.stats(), await store.user_buckets()

    totals, buckets = _run(go())
    for key, value in totals.items():
        typer.echo(f"{key:14} {value:,}")
    typer.echo("\nusers by size   users   memories")
    for bucket, users, memories in buckets:
        typer.echo(f"{bucket:14} {users:7,} {memories:10,}")
    if server:
        _print_server_metrics(server, token)


def _print_server_metrics(server: str, token: str | None) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        data = httpx.get(f"{server.rstrip('/')}/recall/stats", headers=headers, timeout=5).json()
    except (httpx.HTTPError, ValueError) as exc:
        typer.echo(f"error: cannot read metrics from {server}: {exc}", err=True)
        raise typer.Exit(1) from exc
    window = data["window"]
    typer.echo(f"\nretrieval, last {window['window_s']:.0f} s")
    for key in ("searches", "avg_latency_ms", "p95_latency_ms", "success_rate",
                "avg_similarity", "results_per_query", "empty_rate", "auth_failures"):  # fmt: skip
        value = window[key]
        typer.echo(f"  {key:18} {value:.3f}" if isinstance(value, float) else f"  {key:18} {value}")
    typer.echo("  errors             " + ", ".join(f"{k} {v}" for k, v in window["errors"].items()))
    typer.echo("  alerts firing      " + (", ".join(data["alerts"]) or "none"))


@app.command()
def reembed(
    batch_size: Annotated[int, typer.Option(min=1, help="Memories per batch.")] = 256,
) -> None:
    """Rebuild every stored embedding with the configured model (RECALL_EMBEDDING_MODEL).

    Searches keep working while it runs; restart your app with the new model afterwards."""
    from pgvector.psycopg import register_vector_async

    from recall.db.reembed import reembed as run_reembed

    async def go() -> tuple[int, list[str]]:
        settings = Settings.from_env()
        embedder = Embedder(
            configured_embeddings(settings), batch_size=settings.embedding_batch_size
        )
        database = await locate_database(settings)
        conn = await connect_once(database.url)
        try:
            await apply_migrations(conn)
            await register_vector_async(conn)
            count = await run_reembed(
                conn, embedder, batch=batch_size, on_progress=lambda n: typer.echo(f"{n} done")
            )
        finally:
            await conn.close()
        async with MemoryStore.connect(settings) as store:
            return count, await store.optimize()

    count, indexed = _run(go())
    typer.echo(f"re-embedded {count} memories; rebuilt {len(indexed)} user indexes")


@app.command()
def demo() -> None:
    """A short tour: store two users' memories and search them (uses the real model)."""

    async def go() -> None:
        async with MemoryStore.connect() as store:
            await store.add_turn("alice", "I adopted a dog named Max", "Max is a lovely name!")
            await store.add_turn("alice", "I work as a nurse in Lyon", "That sounds demanding.")
            await store.add_turn("bob", "My cat is called Luna", "Luna is a pretty name.")
            for user in ("alice", "bob"):
                hits = await store.search(user, "What is my dog's name?")
                typer.echo(f"\n{user} asks: What is my dog's name?")
                _print_memories(hits, as_json=False)

    _run(go())


@app.command()
def consolidate(
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user.")] = None,
    conversation: Annotated[str | None, typer.Option(help="Only this conversation.")] = None,
) -> None:
    """Write model-made memories for every conversation with unprocessed turns, now (partial
    chunks included). Needs RECALL_CHAT_MODEL (e.g. openai:gpt-4o-mini)."""
    from recall.creation.consolidate import Consolidator
    from recall.creation.extraction import RunnableExtractor, RunnableSummarizer
    from recall.db.sql import query

    spec = os.environ.get("RECALL_CHAT_MODEL")
    if not spec:
        typer.echo("error: set RECALL_CHAT_MODEL (provider:model) to write memories", err=True)
        raise typer.Exit(1)

    async def go() -> list[str]:
        try:
            from langchain.chat_models import init_chat_model  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise ConfigError("RECALL_CHAT_MODEL needs the `langchain` package") from exc
        model = init_chat_model(spec)
        settings = Settings.from_env()
        lines = []
        async with MemoryStore.connect(settings) as store:
            worker = Consolidator(
                store,
                RunnableExtractor(model),
                summarizer=RunnableSummarizer(model),
                chunk_size=settings.consolidation_chunk_size,
                dedup_threshold=settings.dedup_threshold,
            )
            async with store.connection(all_users=True) as conn:
                cur = await conn.execute(
                    query("pending_conversations"),
                    {"user_id": user, "conversation_id": conversation},
                )
                pending = await cur.fetchall()
            for uid, cid, count in pending:
                result = await worker.run(uid, cid, force=True)
                status = f"error: {result.error}" if result.error else "ok"
                lines.append(
                    f"{uid} / {cid}: {count} turns, {result.created} new memories, "
                    f"{result.updated} updated ({status})"
                )
        return lines

    lines = _run(go())
    typer.echo("\n".join(lines) if lines else "nothing to consolidate")


@app.command()
def chat(
    user: UserOpt,
    thread: Annotated[str | None, typer.Option(help="Thread to continue (new by default).")] = None,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.5,
    limit: Annotated[int, typer.Option(min=1, max=100)] = 3,
) -> None:
    """Chat in the terminal with the companion graph, in-process, showing retrieved memories.

    Uses RECALL_CHAT_MODEL when set, else the offline responder. End with Ctrl-D or /quit."""
    import uuid

    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver

    from recall.db.outbox import Outbox
    from recall.example.graph import build_graph
    from recall.nodes import create_retrieve_memories_node, create_store_memories_node
    from recall.nodes.writer import TurnWriter
    from recall.store.shared import provider_for

    async def go() -> None:
        settings = Settings.from_env()
        async with MemoryStore.connect(settings) as store:
            await store.warm_up()
            writer = TurnWriter(provider_for(store), Outbox(settings.queue_path))
            graph = build_graph(
                retrieve=create_retrieve_memories_node(
                    store, limit=limit, similarity_threshold=threshold, settings=settings
                ),
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
                    out = await graph.ainvoke(
                        {"messages": [HumanMessage(line)]},
                        config,
                    )
                    for m in out.get("retrieved_memories", []):
                        typer.echo(f"  [memory {m['similarity']:.3f}] {m['user_message']}")
                    typer.echo(f"ai> {out['messages'][-1].content}")
            finally:
                await writer.flush(timeout_s=10)
                await writer.close()

    _run(go())


def main() -> None:
    """Entry point of the `recall` script."""
    app()
