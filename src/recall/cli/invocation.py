"""One `recall` command's run: its settings (read once per invocation), a coroutine run with
errors turned into one line, and the store it works on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NoReturn, TypeVar

import typer

from recall.config import Settings, process_settings
from recall.db.embedded import EmbeddedServer
from recall.errors import RecallError
from recall.store import MemoryStore

__all__ = [
    "database_location",
    "fail",
    "require_database",
    "run",
    "settings_of",
    "with_store",
]


T = TypeVar("T")


def fail(message: str) -> NoReturn:
    """End the command: `error: <message>` on stderr, exit status 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def settings_of(ctx: typer.Context) -> Settings:
    """The settings of this invocation: read from the environment once, by the first caller
    (the `recall` callback), and kept on the root context for every command. An invocation is
    a process of its own: the process's settings are read again as it starts
    (`recall.config.process_settings`), so a second invocation in one interpreter (a test's
    `CliRunner`) sees its own environment.

    Invalid settings end the command with `error: <message>` and exit status 1.
    """
    found = ctx.find_object(Settings)
    if found is not None:
        return found
    process_settings.cache_clear()
    try:
        settings = process_settings()
    except RecallError as exc:
        fail(str(exc))
    ctx.find_root().obj = settings
    return settings


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to the end; a `RecallError` becomes `error: <message>` and exit status 1."""
    try:
        return asyncio.run(coro)
    except RecallError as exc:
        fail(str(exc))


def database_location(settings: Settings) -> str:
    """Where the commands' database is, in words: the URL's server, or the embedded one's
    data folder."""
    if settings.database_url:
        return "the server of RECALL_DATABASE_URL"
    return f"the embedded server in {EmbeddedServer(settings.data_dir).path}"


def require_database(settings: Settings) -> None:
    """End the command if there is no database to read: no URL and no embedded server's data
    folder. A reading or erasing command must not create an empty database and report it
    (a user would think their memories gone)."""
    if settings.database_url:
        return
    server = EmbeddedServer(settings.data_dir)
    if not server.status().initialized:
        fail(
            f"no database in {server.path}: start one with `recall db start`, or point "
            "RECALL_DATA_DIR (or RECALL_DATABASE_URL) at yours"
        )


def with_store(
    settings: Settings, work: Callable[[MemoryStore], Awaitable[T]], *, create: bool = False
) -> T:
    """Open the store `settings` name (migrated, model checked), run `work` on it, close it.

    Unless `create` (commands that write), a missing embedded database ends the command with
    one line instead of creating an empty one. Errors end the command as in `run`.
    """
    if not create:
        require_database(settings)

    async def go() -> T:
        async with MemoryStore.connect(settings) as store:
            return await work(store)

    return run(go())
