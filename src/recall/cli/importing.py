"""`recall import` (turns from a JSON lines file), `recall export` (a user's memories to one,
in the same format) and `recall import-notes` (Markdown notes).

A file is read twice: once to check every line (UTF-8, JSON, a turn the store accepts) and
count them, then again to import the good ones; every bad line is reported with its 1-based
line number, and nothing is imported while there are bad lines unless `--skip-bad` is given.
A line of `recall export` carries the memory's `id` and `kind` too, and `recall import` keeps
both: exporting a user and importing the file into an empty database gives the same memories.
A line with an `id` keeps its texts whole (one over the limit for its kind is a bad line, not
cut), and a second line with a user's same `id` is a bad line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID

import typer

from recall.cli.invocation import fail, settings_of, with_store
from recall.cli.options import UserOpt
from recall.cli.output import plural
from recall.config import Settings
from recall.errors import InvalidInputError
from recall.memory import Memory, make_turn, stored_length
from recall.store import MemoryStore
from recall.store.bulk import ImportProgress
from recall.store.checks import imported_id

__all__ = ["Scan", "app", "export_line", "scan_jsonl"]

app = typer.Typer()

SHOWN_BAD_LINES = 20  # the rest are counted


@dataclass(slots=True)
class Scan:
    """What the checking pass found: how many good lines, and each bad line's number and why."""

    good: int = 0
    bad: list[tuple[int, str]] = field(default_factory=list)


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(1-based line number, the turn or why the line is unusable) for every non-blank line."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                continue
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, f"not valid JSON: {exc.msg}"
                continue
            yield number, item if isinstance(item, dict) else "expected a JSON object per line"


def _check(item: dict[str, Any], settings: Settings) -> tuple[str | None, tuple[str, UUID] | None]:
    """Why the store would refuse this turn (None: it would not), and the (user_id, id) its
    memory keeps (None: the line has no id)."""
    known = ("user_id", "user_message", "ai_response", "conversation_id", "created_at")
    kind = item.get("kind") or "turn"
    try:
        given_id = imported_id(item.get("id"))
        turn = make_turn(
            *(item.get(k) for k in known[:3]),
            conversation_id=item.get("conversation_id"),
            created_at=item.get("created_at"),
            metadata=item.get("metadata"),
            kind=kind,
            max_length=stored_length(kind, settings.max_message_length),
            max_metadata_bytes=settings.max_metadata_bytes,
            cut=given_id is None,  # a kept id keeps its text (and content hash)
        )
    except InvalidInputError as exc:
        return str(exc), None
    return None, (None if given_id is None else (turn.user_id, given_id))


def scan_jsonl(path: Path, settings: Settings) -> Scan:
    """Check every line of a JSON lines file of turns, as `recall import` does first; a line
    with the (user_id, id) of an earlier line is bad too (it would fail its batch mid-import)."""
    found = Scan()
    kept: dict[tuple[str, UUID], int] = {}  # (user_id, id) -> the line that has it
    for number, item in _lines(path):
        why, key = (item, None) if isinstance(item, str) else _check(item, settings)
        if key is not None and (first := kept.setdefault(key, number)) != number:
            why = f"id {key[1]} of user {key[0]!r} is on line {first} already"
        if why is None:
            found.good += 1
        else:
            found.bad.append((number, why))
    return found


def _good_turns(path: Path, bad: set[int]) -> Iterator[dict[str, Any]]:
    for number, item in _lines(path):
        if number not in bad and isinstance(item, dict):
            yield item


def _report_bad(path: Path, bad: list[tuple[int, str]]) -> None:
    for number, why in bad[:SHOWN_BAD_LINES]:
        typer.echo(f"{path}:{number}: {why}", err=True)
    if len(bad) > SHOWN_BAD_LINES:
        typer.echo(f"... and {plural(len(bad) - SHOWN_BAD_LINES, 'more bad line')}", err=True)


async def _add_with_bars(
    store: MemoryStore, turns: Iterable[dict[str, Any]], total: int, batch_size: int, writers: int
) -> ImportProgress:
    """`store.add_turns(turns)` with two progress bars (embedded, stored) on the terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    done = ImportProgress()
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=not sys.stderr.isatty(),
    ) as bar:
        embedded = bar.add_task("embedded", total=total)
        stored = bar.add_task("stored", total=total)

        def moved(now: ImportProgress) -> None:
            bar.update(embedded, completed=now.prepared)
            bar.update(stored, completed=now.written)

        await store.add_turns(
            turns, batch_size=batch_size, writers=writers, progress=done, on_progress=moved
        )
    return done


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSON lines file.")],
    batch_size: Annotated[int, typer.Option(min=1, help="Turns per transaction.")] = 1000,
    writers: Annotated[
        int, typer.Option(min=1, help="Batches written at once, each on its own connection.")
    ] = 2,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Import the good lines and list the bad ones.")
    ] = False,
) -> None:
    """Import turns from a JSON lines file (user_id, user_message, ai_response,
    conversation_id, created_at, metadata, and optionally kind and id per line: the format
    `recall export` writes). Re-running it stores nothing twice."""
    settings = settings_of(ctx)
    found = scan_jsonl(file, settings)
    if found.bad:
        _report_bad(file, found.bad)
        if not skip_bad:
            fail(
                f"{plural(len(found.bad), 'bad line')} in {file}, nothing imported: fix them, "
                "or import the good ones with --skip-bad"
            )
    skipped = {number for number, _ in found.bad}

    async def work(store: MemoryStore) -> tuple[ImportProgress, list[str]]:
        turns = _good_turns(file, skipped)
        done = await _add_with_bars(store, turns, found.good, batch_size, writers)
        return done, await store.optimize()

    done, indexed = with_store(settings, work, create=True)
    typer.echo(
        f"imported {plural(done.written, 'turn')}: {done.new:,} new, "
        f"{done.written - done.new:,} already there, {plural(len(found.bad), 'bad line')} "
        "skipped"
    )
    if indexed:
        typer.echo(f"built HNSW indexes for {plural(len(indexed), 'large user')}")


def export_line(user_id: str, memory: Memory) -> dict[str, Any]:
    """One line of `recall export`: the fields `recall import` reads, the memory's id and kind
    included, its time as ISO 8601 with its offset."""
    return {
        "id": memory.id,
        "user_id": user_id,
        "conversation_id": memory.conversation_id,
        "user_message": memory.user_message,
        "ai_response": memory.ai_response,
        "created_at": memory.created_at.isoformat(),
        "metadata": memory.metadata,
        "kind": memory.kind,
    }


@app.command("export")
def export(
    ctx: typer.Context,
    user: UserOpt,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", dir_okay=False, help="File to write (default: standard output)."
        ),
    ] = None,
) -> None:
    """Write every memory of a user as JSON lines, newest first, in the format `recall import`
    reads (with each memory's id and kind): importing the file gives the same memories back."""
    settings = settings_of(ctx)
    # a file appears whole or not at all: written beside, renamed when complete
    partial = None if output is None else output.with_name(output.name + ".partial")

    async def work(store: MemoryStore) -> int:
        count = 0
        with (
            partial.open("w", encoding="utf-8") if partial is not None else nullcontext(sys.stdout)
        ) as fh:
            async for memory in store.export(user):
                fh.write(json.dumps(export_line(user, memory), ensure_ascii=False) + "\n")
                count += 1
        return count

    try:
        count = with_store(settings, work)
    except BaseException:
        if partial is not None:
            partial.unlink(missing_ok=True)
        raise
    if output is not None and partial is not None:
        partial.replace(output)
    typer.echo(f"exported {plural(count, 'memory', 'memories')} of {user!r}", err=True)


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
    from recall.creation.markdown_notes import note_files, read_notes

    files = note_files(directory)
    if not files:
        fail(f"no MEMORY.md or memory/YYYY-MM-DD.md in {directory}")
    done = ImportProgress()
    with_store(
        settings_of(ctx),
        lambda store: store.add_turns(read_notes(directory, user), progress=done),
        create=True,
    )
    typer.echo(
        f"imported {plural(done.written, 'paragraph')} from {plural(len(files), 'file')}: "
        f"{done.new:,} new, {done.written - done.new:,} already there"
    )
