"""`recall add|search|recent|forget|import|import-notes`: a user's memories."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from recall.cli.common import (
    JsonOpt,
    ModeOpt,
    ThresholdOpt,
    UserOpt,
    fail,
    limit_option,
    print_memories,
    retrieval,
    settings_of,
    with_store,
)
from recall.errors import InvalidInputError
from recall.store import MemoryStore

__all__ = ["app"]

app = typer.Typer()


@app.command()
def add(
    ctx: typer.Context,
    user: UserOpt,
    user_message: Annotated[str, typer.Argument(help="What the user said.")],
    ai_response: Annotated[str, typer.Argument(help="What the AI answered.")],
    conversation: Annotated[str | None, typer.Option(help="Conversation (thread) id.")] = None,
) -> None:
    """Store one turn pair."""
    memory = with_store(
        settings_of(ctx),
        lambda store: store.add_turn(user, user_message, ai_response, conversation_id=conversation),
    )
    typer.echo(memory.id)


@app.command()
def search(
    ctx: typer.Context,
    user: UserOpt,
    text: Annotated[str, typer.Argument(help="What to search for.")],
    limit: Annotated[int | None, limit_option(1000)] = None,
    threshold: ThresholdOpt = None,
    mode: ModeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Search a user's memories (mode RECALL_RETRIEVAL_MODE, else hybrid: meaning and keywords)."""
    settings = settings_of(ctx)
    how = retrieval(settings, limit, threshold, mode)
    found = with_store(
        settings,
        lambda store: store.search(
            user, text, limit=how.limit, similarity_threshold=how.threshold, mode=how.mode
        ),
    )
    print_memories(found, as_json)


@app.command()
def recent(
    ctx: typer.Context,
    user: UserOpt,
    n: Annotated[int, typer.Option("-n", min=1, max=1000, help="How many.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's most recent memories."""
    print_memories(with_store(settings_of(ctx), lambda store: store.recent(user, n)), as_json)


@app.command()
def forget(
    ctx: typer.Context,
    user: UserOpt,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase every memory of a user."""
    if not yes:
        typer.confirm(f"Erase every memory of {user!r}?", abort=True)

    from recall.db.outbox import Outbox

    settings = settings_of(ctx)
    # turns still waiting for the database are the user's data too
    outboxes = [Outbox(settings.queue_path)] if settings.queue_path.exists() else []
    try:
        erased = with_store(settings, lambda store: store.forget_user(user, outboxes=outboxes))
    finally:
        for outbox in outboxes:
            outbox.close()
    typer.echo(f"erased {erased} memories")


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
    ctx: typer.Context,
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

    async def work(store: MemoryStore) -> tuple[int, list[str]]:
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
        return len(ids), await store.optimize()

    count, indexed = with_store(settings_of(ctx), work)
    typer.echo(f"imported {count} turns")
    if indexed:
        typer.echo(f"built HNSW indexes for {len(indexed)} large users")


@app.command("import-notes")
def import_notes(
    ctx: typer.Context,
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
        fail(f"no MEMORY.md or memory/YYYY-MM-DD.md in {directory}")
    ids = with_store(settings_of(ctx), lambda store: store.add_turns(read_notes(directory, user)))
    typer.echo(f"imported {len(ids)} paragraphs from {len(files)} files")
