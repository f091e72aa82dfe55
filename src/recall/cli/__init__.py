"""The `recall` command. Top floor: may import anything below; nothing in `recall` imports it.

One module per topic (`database`, `user_memories`, `importing`, `upkeep`, `chat`), each with
its own Typer app merged here; what they share is in `invocation` (settings, errors, the
store), `admin` (the admin connection, the model), `options` and `output`.
"""

from __future__ import annotations

from importlib import metadata
from typing import Annotated

import typer

from recall.cli import chat, database, importing, upkeep, user_memories
from recall.cli.invocation import settings_of
from recall.logs import configure_logging

__all__ = ["app", "main"]

app = typer.Typer(
    help="Long-term memory for LangGraph agents on PostgreSQL + pgvector.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for topic in (database.app, user_memories.app, importing.app, upkeep.app, chat.app):
    app.add_typer(topic)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"recall {metadata.version('langgraph-recall')}")
        raise typer.Exit()


@app.callback()
def _setup(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    settings = settings_of(ctx)  # read once here, for every command of this invocation
    # the CLI's own output is its answer: log warnings and errors only, unless asked for more
    configure_logging(level=settings.log_level or "WARNING")


def main() -> None:
    """Entry point of the `recall` script."""
    app()
