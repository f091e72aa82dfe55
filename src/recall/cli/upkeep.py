"""`recall stats|reembed|consolidate|retention`: counts, metrics, and work over every user."""

from __future__ import annotations

from typing import Annotated

import typer

from recall.cli.admin import admin_connection
from recall.cli.invocation import database_location, fail, run, settings_of, with_store
from recall.cli.output import plural
from recall.config import MAX_RETENTION_DAYS, Settings
from recall.db.storeindex import EVERY_NAMESPACE, StoreIndexes, read_store_indexes
from recall.embeddings import legacy_hint
from recall.store import MemoryStore
from recall.store.erasure import retention_limits

__all__ = ["app"]

app = typer.Typer()


@app.command()
def stats(
    ctx: typer.Context,
    server: Annotated[
        str | None,
        typer.Option(help="A running server (e.g. http://127.0.0.1:8123) to read metrics from."),
    ] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token for the server.")] = None,
) -> None:
    """Show memory counts per user size bucket, and a running server's retrieval metrics."""

    async def work(
        store: MemoryStore,
    ) -> tuple[dict[str, int], list[tuple[str, int, int]], str, StoreIndexes]:
        async with store.connection(all_users=True, read=True) as conn:
            indexes = await read_store_indexes(conn)
        return await store.stats(), await store.user_buckets(), store.embedder.name, indexes

    settings = settings_of(ctx)
    totals, buckets, model, indexes = with_store(settings, work)
    typer.echo(f"database: {database_location(settings)}")
    typer.echo(f"embedding model: {model}")
    if hint := legacy_hint(settings, model):
        typer.echo(f"note: {hint}")
    typer.echo("")
    for key, value in totals.items():
        typer.echo(f"{key:14} {value:,}")
    typer.echo("\nusers by size   users   memories")
    for bucket, users, memories in buckets:
        typer.echo(f"{bucket:14} {users:7,} {memories:10,}")
    _print_store_indexes(indexes)
    if server:
        _print_server_metrics(server, token)


def _print_store_indexes(indexes: StoreIndexes) -> None:
    """RecallStore's HNSW indexes: how wide each is searched and the recall@10 measured there
    (by its calibration, or by the questions it was asked: issue 47)."""
    if not indexes.names:
        return
    typer.echo("\nRecallStore indexes   dims   vectors   breadth   recall@10")
    for (ns, dims), _name in sorted(indexes.names.items()):
        label = ns if ns != EVERY_NAMESPACE else "(every namespace)"
        breadth = indexes.breadths.get((ns, dims))
        size = f"{indexes.sizes.get((ns, dims), 0):9,}"
        measured = (
            f"{breadth.ef_search:9} {breadth.recall:11.4f}" if breadth else "  not yet calibrated"
        )
        typer.echo(f"{label[:20]:20} {dims:5} {size} {measured}")


def _print_server_metrics(server: str, token: str | None) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        data = httpx.get(f"{server.rstrip('/')}/recall/stats", headers=headers, timeout=5).json()
    except (httpx.HTTPError, ValueError) as exc:
        fail(f"cannot read metrics from {server}: {exc}")
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
    ctx: typer.Context,
    batch_size: Annotated[int, typer.Option(min=1, help="Memories per batch.")] = 256,
) -> None:
    """Rebuild every stored embedding with RECALL_EMBEDDING_MODEL, or, unset, the default model
    (bge-small-en-v1.5): how a database made with an older default moves to the new one. Then
    brings turns stored before decision 0038 over to their own words (their replies' quotes of
    other memories left out of what they are embedded and indexed by).

    Searches keep working while it runs; restart your app with the new model afterwards."""
    settings = settings_of(ctx)
    count = run(_reembed(settings, batch_size))
    # the store binds the new model: open it only once every vector is rebuilt
    indexed = with_store(settings, lambda store: store.optimize())
    typer.echo(f"re-embedded {count} memories; rebuilt {len(indexed)} user indexes")


async def _reembed(settings: Settings, batch_size: int) -> int:
    from pgvector.psycopg import register_vector_async

    from recall.db.reembed import reembed as run_reembed
    from recall.embeddings import Embedder, configured_embeddings

    # no bound model passed: the target is the setting, else the default, never the old model
    embedder = Embedder(configured_embeddings(settings), batch_size=settings.embedding_batch_size)
    async with admin_connection(settings) as admin:
        await register_vector_async(admin.conn)
        return await run_reembed(
            admin.conn, embedder, batch=batch_size, on_progress=lambda n: typer.echo(f"{n} done")
        )


@app.command()
def consolidate(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user.")] = None,
    conversation: Annotated[str | None, typer.Option(help="Only this conversation.")] = None,
) -> None:
    """Write model-made memories for every conversation with unprocessed turns, now (partial
    chunks included). Needs RECALL_CHAT_MODEL (e.g. openai:gpt-4o-mini)."""
    from recall.creation.consolidate import Consolidator
    from recall.creation.extraction import RunnableExtractor, RunnableSummarizer

    settings = settings_of(ctx)
    spec = settings.chat_model
    if not spec:
        fail("set RECALL_CHAT_MODEL (provider:model) to write memories")
    try:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        fail("RECALL_CHAT_MODEL needs the `langchain` package")
    model = init_chat_model(spec)

    async def work(store: MemoryStore) -> list[str]:
        lines = []
        # chunk size and dedup threshold: the store's Settings
        worker = Consolidator(store, RunnableExtractor(model), summarizer=RunnableSummarizer(model))
        for pending in await store.conversations.pending_conversations(user, conversation):
            result = await worker.run(pending.user_id, pending.conversation_id, force=True)
            status = f"error: {result.error}" if result.error else "ok"
            lines.append(
                f"{pending.user_id} / {pending.conversation_id}: {pending.pending} turns, "
                f"{result.created} new memories, {result.updated} updated ({status})"
            )
        return lines

    lines = with_store(settings, work)
    typer.echo("\n".join(lines) if lines else "nothing to consolidate")


@app.command()
def retention(
    ctx: typer.Context,
    days: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_RETENTION_DAYS,
            help="Age limit in days (default RECALL_RETENTION_DAYS).",
        ),
    ] = None,
    max_per_user: Annotated[
        int | None,
        typer.Option(min=1, help="Memories kept per user (default RECALL_RETENTION_MAX_PER_USER)."),
    ] = None,
) -> None:
    """Remove memories older than RECALL_RETENTION_DAYS, then each user's oldest beyond
    RECALL_RETENTION_MAX_PER_USER. Run it on a schedule (docs/operations.md); with neither set
    it removes nothing."""
    settings = settings_of(ctx)
    age, cap = retention_limits(settings, days, max_per_user)
    if age is None and cap is None:
        typer.echo(
            "no retention set (RECALL_RETENTION_DAYS, RECALL_RETENTION_MAX_PER_USER): "
            "nothing removed"
        )
        return
    done = with_store(settings, lambda store: store.apply_retention(days=age, max_per_user=cap))
    parts = []
    if age is not None:
        parts.append(f"{done.expired:,} older than {plural(age, 'day')}")
    if cap is not None:
        parts.append(f"{done.over_cap:,} over {cap:,} per user")
    typer.echo(
        f"removed {plural(done.expired + done.over_cap, 'memory', 'memories')} "
        f"({', '.join(parts)}) from {plural(done.users, 'user')}"
    )
