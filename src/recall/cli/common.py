"""What every `recall` command shares: the invocation's settings, running a coroutine with
errors turned into one line, the store and the admin connection, the model, the output."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any, NamedTuple, NoReturn, TypeVar, cast

import typer
from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from recall.config import RETRIEVAL_MODES, RetrievalMode, Settings
from recall.db.embedded import EmbeddedServer
from recall.db.migrate import apply_migrations, bound_model
from recall.db.pool import connect_once, locate_database
from recall.embeddings import MiniLMEmbeddings, configured_embeddings, embedding_model_name
from recall.errors import RecallError
from recall.memory import Memory
from recall.store import MemoryStore

__all__ = [
    "AdminConnection",
    "JsonOpt",
    "ModeOpt",
    "Retrieval",
    "ThresholdOpt",
    "UserOpt",
    "admin_connection",
    "check_mode",
    "database_location",
    "fail",
    "limit_option",
    "model_of",
    "plural",
    "prepare_model",
    "print_explained",
    "print_memories",
    "require_database",
    "retrieval",
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
    (the `recall` callback), and kept on the root context for every command.

    Invalid settings end the command with `error: <message>` and exit status 1.
    """
    found = ctx.find_object(Settings)
    if found is not None:
        return found
    try:
        settings = Settings.from_env()
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


class AdminConnection(NamedTuple):
    """An autocommit connection for migrations and maintenance, and what opening it applied."""

    conn: AsyncConnection[TupleRow]
    applied: list[int]  # the migrations applied on opening (none when up to date)


@asynccontextmanager
async def admin_connection(settings: Settings) -> AsyncIterator[AdminConnection]:
    """One connection to the database `settings` name (the embedded server starts when no URL
    is set), with every pending migration applied first; closed on exit.

    Raises:
        StoreError, MigrationError: the database cannot be reached or migrated.
    """
    database = await locate_database(settings)
    conn = await connect_once(database.url)
    try:
        yield AdminConnection(conn, await apply_migrations(conn))
    finally:
        await conn.close()


async def model_of(url: str) -> str | None:
    """The model the database at `url` is bound to (None: none yet, or not migrated).

    Raises:
        StoreError: the server cannot be reached.
    """
    conn = await connect_once(url)
    try:
        return await bound_model(conn)
    finally:
        await conn.close()


async def prepare_model(settings: Settings, bound: str | None) -> Embeddings:
    """Load the embedding model for a database bound to `bound` (the setting, else the
    database's model, else the default: `configured_embeddings` decides) and embed one text,
    so that a one-off ONNX export (all-MiniLM-L6-v2's) happens now, not in the first request.
    Prints `model ready: <model> (...)`.

    Returns:
        The loaded embeddings.

    Raises:
        ConfigError, EmbeddingError: the model cannot be loaded.
    """
    embeddings = configured_embeddings(settings, bound)
    await asyncio.to_thread(embeddings.embed_query, "warm-up")
    where = ""
    if isinstance(embeddings, MiniLMEmbeddings):  # a provider's model has no local cache
        onnx = embeddings.backend == "onnx"
        where = f" (cache {settings.model_cache_dir})" if onnx else " (torch backend)"
    typer.echo(f"model ready: {embedding_model_name(embeddings)}{where}")
    return embeddings


def _setting_default(name: str) -> str:
    # read from the dataclass, not the environment: help text is built at import
    default = next(f.default for f in dataclasses.fields(Settings) if f.name == name)
    return f"default: RECALL_{name.upper()}, else {default}"


def limit_option(maximum: int) -> Any:
    """The `--limit` option (1 to `maximum`; None: `Settings.max_memories`)."""
    return typer.Option(
        min=1, max=maximum, help=f"Memories returned at most ({_setting_default('max_memories')})."
    )


def check_mode(value: str | None) -> str | None:
    """Check `--mode` against the retrieval modes (`recall.config.RETRIEVAL_MODES`).

    Raises:
        typer.BadParameter: not a mode (a usage error, exit status 2).
    """
    if value is not None and value not in RETRIEVAL_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(RETRIEVAL_MODES)}, not {value!r}")
    return value


UserOpt = Annotated[str, typer.Option("--user", "-u", help="The user whose memories to use.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        max=1.0,
        help="Least similarity, or relevance in hybrid mode; unused in keyword mode "
        f"({_setting_default('similarity_threshold')}).",
    ),
]
ModeOpt = Annotated[
    str | None,
    typer.Option(
        callback=check_mode,
        help=f"{', '.join(RETRIEVAL_MODES)} ({_setting_default('retrieval_mode')}).",
    ),
]


class Retrieval(NamedTuple):
    """How to search: the options given, the settings for the others."""

    limit: int
    threshold: float
    mode: RetrievalMode


def retrieval(
    settings: Settings, limit: int | None, threshold: float | None, mode: str | None
) -> Retrieval:
    """Fill the search options left out (None) from `settings`."""
    return Retrieval(
        limit=settings.max_memories if limit is None else limit,
        threshold=settings.similarity_threshold if threshold is None else threshold,
        # a given mode passed `check_mode`; the setting's was checked by Settings
        mode=settings.retrieval_mode if mode is None else cast(RetrievalMode, mode),
    )


def plural(count: int, singular: str, many: str | None = None) -> str:
    """`1 memory`, `2 memories`, `0 turns`."""
    return f"{count:,} {singular if count == 1 else (many or singular + 's')}"


def _memory_json(m: Memory) -> dict[str, Any]:
    data = asdict(m)
    data["created_at"] = m.created_at.isoformat()
    return data


def print_memories(memories: list[Memory], as_json: bool) -> None:
    """Print memories as text (score, date, id, both sides) or as a JSON list."""
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


def print_explained(memories: list[Memory], threshold: float, as_json: bool) -> None:
    """Print a search made at threshold 0 with explanations: each memory marked as passing
    `threshold` or kept out by it, with the largest parts of its score."""
    if as_json:
        rows = [{**_memory_json(m), "passes": _passes(m, threshold)} for m in memories]
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not memories:
        typer.echo("no memories found")
        return
    for m in memories:
        verdict = "passes" if _passes(m, threshold) else f"kept out by threshold {threshold}"
        score = "" if m.score is None else f"[{m.score:.3f}] "
        typer.echo(f"{score}{verdict}: {m.created_at:%Y-%m-%d %H:%M} {m.id}")
        typer.echo(f"  user: {m.user_message}")
        typer.echo(f"  ai:   {m.ai_response}")
        why = m.explanation
        if why is None:
            typer.echo("  (no explanation: this mode has no second stage)")
            continue
        typer.echo(
            f"  gate {why['gate']:+.2f} (below 0: nothing passes 0.5), logit {why['logit']:+.2f}"
            f" (best {why['best_logit']:+.2f})"
        )
        for title, parts in (("gate", why["gate_parts"]), ("ranker", why["ranker"])):
            top = list(parts.items())[:5]
            typer.echo(f"  {title}: " + ", ".join(f"{k} {v:+.2f}" for k, v in top))


def _passes(m: Memory, threshold: float) -> bool:
    return m.score is None or m.score >= threshold
