"""`recall db start|stop|status` (the embedded server) and `recall migrate`."""

from __future__ import annotations

from typing import Annotated

import typer

from recall.cli.admin import admin_connection, model_of, prepare_model
from recall.cli.invocation import database_location, run, settings_of
from recall.config import Settings
from recall.db.embedded import EmbeddedServer
from recall.db.migrate import bind_embedding_space, bound_model
from recall.embeddings import Embedder

__all__ = ["app"]

app = typer.Typer()
db_app = typer.Typer(help="The embedded PostgreSQL server (used when no database URL is set).")
app.add_typer(db_app, name="db")


@db_app.command("start")
def db_start(
    ctx: typer.Context,
    migrate: Annotated[
        bool,
        typer.Option("--migrate", help="Also apply pending migrations, as `recall migrate` does."),
    ] = False,
) -> None:
    """Start the embedded server and leave it running; prepare the embedding model.

    Stop the server with `recall db stop`. The model is prepared whichever database is used,
    once also with `--migrate` (what `make run` uses: one process instead of two)."""
    settings = settings_of(ctx)
    if settings.database_url:
        typer.echo("RECALL_DATABASE_URL is set: recall uses that server; nothing to start")
        uri = settings.database_url
    else:
        server = EmbeddedServer(settings.data_dir, settings.embedded_shared_buffers_mb)
        uri = run(server.astart(stop_at_exit=False))
        typer.echo(f"embedded PostgreSQL running in {server.path}\n{uri}")
    if migrate:
        _report(run(_migrate(settings)))  # reuses the server started above
        return
    # the model the database is bound to, unless one is configured
    bound = None if settings.embedding_model else run(model_of(uri))
    run(prepare_model(settings, bound))


@db_app.command("stop")
def db_stop(ctx: typer.Context) -> None:
    """Stop the embedded server."""
    stopped = run(EmbeddedServer(settings_of(ctx).data_dir).astop())
    typer.echo("stopped" if stopped else "not running")


@db_app.command("status")
def db_status(ctx: typer.Context) -> None:
    """Show whether the embedded server runs, where, and its URI."""
    settings = settings_of(ctx)
    typer.echo(f"database:    {database_location(settings)}")
    status = EmbeddedServer(settings.data_dir, settings.embedded_shared_buffers_mb).status()
    typer.echo(f"data dir:    {status.data_dir}")
    typer.echo(f"initialized: {'yes' if status.initialized else 'no'}")
    typer.echo(f"running:     {'yes (pid ' + str(status.pid) + ')' if status.running else 'no'}")
    if status.uri:
        typer.echo(f"uri:         {status.uri}")


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Apply pending migrations (safe to run concurrently and repeatedly); prepare the model."""
    _report(run(_migrate(settings_of(ctx))))


def _report(applied: list[int]) -> None:
    if applied:
        typer.echo("applied migrations: " + ", ".join(f"{v:04d}" for v in applied))
    else:
        typer.echo("database is up to date")


async def _migrate(settings: Settings) -> list[int]:
    async with admin_connection(settings) as admin:
        embedder = Embedder(await prepare_model(settings, await bound_model(admin.conn)))
        await bind_embedding_space(admin.conn, embedder.name, await embedder.dimensions())
        return admin.applied
