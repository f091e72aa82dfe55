"""How commands print: counts in words, and memories as text or JSON (with the second
stage's explanations for `recall search --explain`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import typer

from recall.memory import Memory

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
