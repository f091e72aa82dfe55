"""`recall add|search|recent|forget`: a user's memories (`recall import|export|import-notes`
are in `importing`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from recall.cli.invocation import fail, settings_of, with_store
from recall.cli.options import JsonOpt, ModeOpt, ThresholdOpt, UserOpt, limit_option
from recall.cli.output import plural, print_explained, print_memories
from recall.limits import MAX_LIMIT, RECENT_LIMIT
from recall.store.checks import memory_uuid

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
        create=True,
    )
    typer.echo(memory.id)


@app.command()
def search(
    ctx: typer.Context,
    user: UserOpt,
    text: Annotated[str, typer.Argument(help="What to search for.")],
    limit: Annotated[int | None, limit_option(MAX_LIMIT)] = None,
    threshold: ThresholdOpt = None,
    mode: ModeOpt = None,
    as_json: JsonOpt = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Also show the best memories the threshold keeps out, and why each came or "
            "not: the message's words it holds, how close in meaning and how recent it is, and "
            "the gate.",
        ),
    ] = False,
    explain_raw: Annotated[
        bool,
        typer.Option(
            "--explain-raw", help="As --explain, with the raw parts of each score by feature."
        ),
    ] = False,
) -> None:
    """Search a user's memories (mode RECALL_MODE, else hybrid: meaning and keywords)."""
    explained = explain or explain_raw
    found = with_store(
        settings_of(ctx),
        # what was left out (None) the store fills in, and it says which memories pass; a
        # search box, not a turn of conversation: the gate reads no intent
        lambda store: store.find(
            user,
            text,
            limit,
            threshold,
            mode=mode,
            explain=explained,
            kept_out=explained,
            intent=False,
        ),
    )
    if explained:
        print_explained(found, as_json, raw=explain_raw)
    else:
        print_memories(found.memories, as_json)


@app.command()
def recent(
    ctx: typer.Context,
    user: UserOpt,
    n: Annotated[int, typer.Option("-n", min=1, max=MAX_LIMIT, help="How many.")] = RECENT_LIMIT,
    as_json: JsonOpt = False,
) -> None:
    """Show a user's most recent memories."""
    print_memories(with_store(settings_of(ctx), lambda store: store.recent(user, n)), as_json)


def parse_before(text: str) -> datetime:
    """`--before`: a date (YYYY-MM-DD, its midnight in UTC) or an ISO 8601 time (UTC when it
    has no offset). A value that is neither ends the command before anything is erased."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(
            f"--before {text!r} is not a date: give YYYY-MM-DD or an ISO 8601 time "
            "(2024-06-01T12:00:00+02:00)"
        )
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@app.command()
def forget(
    ctx: typer.Context,
    user: UserOpt,
    before: Annotated[
        str | None,
        typer.Option(
            help="Only the memories dated before this: YYYY-MM-DD (midnight UTC) or an ISO 8601 "
            "time."
        ),
    ] = None,
    memory: Annotated[str | None, typer.Option(help="Only this memory (its id).")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase every memory of a user, or only those dated before a time (--before), or one
    (--memory)."""
    if before is not None and memory is not None:
        fail("give --before or --memory, not both")
    settings = settings_of(ctx)
    if memory is not None:
        if memory_uuid(memory) is None:
            fail(f"{memory!r} is not a memory id")
        if not yes:
            typer.confirm(f"Erase memory {memory} of {user!r}?", abort=True)
        if not with_store(settings, lambda store: store.delete(user, memory)):
            fail(f"{user!r} has no memory {memory}: nothing erased")
        typer.echo("erased 1 memory")
        return
    if before is not None:
        at = parse_before(before)
        if not yes:
            typer.confirm(
                f"Erase every memory of {user!r} dated before {at.isoformat()}?", abort=True
            )
        erased = with_store(settings, lambda store: store.forget_before(user, at))
        typer.echo(f"erased {plural(erased, 'memory', 'memories')} dated before {at.isoformat()}")
        return
    if not yes:
        typer.confirm(f"Erase every memory of {user!r}?", abort=True)

    from recall.outbox import existing_outboxes

    # turns still waiting for the database are the user's data too
    with existing_outboxes(settings.queue_path) as outboxes:
        erased = with_store(settings, lambda store: store.forget_user(user, outboxes=outboxes))
    typer.echo(f"erased {plural(erased, 'memory', 'memories')}")
