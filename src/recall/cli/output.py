"""How commands print: counts in words, and memories as text or JSON (with the store's
explanations for `recall search --explain`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import typer

from recall.memory import Memory
from recall.store.explaining import raw_lines
from recall.store.results import SearchResult

__all__ = [
    "plural",
    "print_explained",
    "print_memories",
]


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


def print_explained(result: SearchResult, as_json: bool, raw: bool = False) -> None:
    """Print an explained search (`MemoryStore.find(..., explain=True, kept_out=True)`) as the
    store decided it: each memory marked as returned or kept out (`Found.passes`), with the
    reasons in words (`Found.why`) and, with `raw`, the raw parts of its score. Nothing is
    decided here."""
    if as_json:
        rows = [
            {**_memory_json(f.memory), "passes": f.passes, "why": list(f.why)} for f in result.found
        ]
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    applies = f"threshold {result.threshold:g}" if result.threshold_applies else "no threshold"
    typer.echo(f"mode {result.mode}, limit {result.limit}, {applies}")
    if not result.found:
        typer.echo("no memories found")
        return
    for f in result.found:
        m = f.memory
        verdict = "returned" if f.passes else "kept out"
        score = "" if m.score is None else f"[{m.score:.3f}] "
        typer.echo(f"{score}{verdict}: {m.created_at:%Y-%m-%d %H:%M} {m.id}")
        typer.echo(f"  user: {m.user_message}")
        typer.echo(f"  ai:   {m.ai_response}")
        for line in f.why:
            typer.echo(f"  - {line}")
        if raw:
            if m.explanation is None:
                typer.echo("  raw: none (this mode has no second stage)")
            else:
                for line in raw_lines(m.explanation, result.verdict):
                    typer.echo(f"  raw {line}")
