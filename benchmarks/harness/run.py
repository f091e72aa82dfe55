"""A benchmark's entry point and command line."""

from __future__ import annotations

import argparse
import asyncio
import inspect
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recall.logs import configure_logging

from .corpus import LOCOMO


def run(main: Callable[[], Coroutine[Any, Any, None] | None]) -> None:
    """A benchmark's entry point: logging as deployed (structlog configured: INFO and up, JSON
    lines on stderr, no debug events inside timed calls; RECALL_LOG_LEVEL overrides), then
    `main`, on an event loop when it is a coroutine function."""
    configure_logging()
    result = main()
    if inspect.iscoroutine(result):
        asyncio.run(result)


def parser(doc: str | None, *, data: bool = False) -> argparse.ArgumentParser:
    """The script's command line, described by its docstring, with `--no-write` (print the
    table only, leave docs/benchmarks.md as it is) and, when `data`, `--data` (the LoCoMo
    file)."""
    out = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    out.add_argument("--no-write", action="store_true", help="do not touch docs/benchmarks.md")
    if data:
        out.add_argument("--data", type=Path, default=LOCOMO, help="the LoCoMo JSON file")
    return out


def counts(text: str, *, default: int, option: str) -> list[int]:
    """The comma-separated whole numbers of a command-line option, which must include the
    setting's default (the ratios in the report are to it)."""
    values = [int(v) for v in text.split(",")]
    if default not in values:
        raise SystemExit(f"{option} must include the default ({default})")
    return values


def moment(text: str) -> datetime:
    """`--now`: an ISO 8601 timestamp as a moment in UTC (UTC when it names no offset)."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 timestamp: {text!r}") from exc
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
