"""Shared by the benchmarks: a fresh database on the embedded (or given) server, and tables."""

from __future__ import annotations

import asyncio
import inspect
import os
import platform
import re
import subprocess
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from psycopg import sql
from psycopg.conninfo import make_conninfo

from recall.db.embedded import EmbeddedServer
from recall.db.pool import connect_once
from recall.logs import configure_logging

ROOT = Path(__file__).resolve().parents[1]
BENCH_DATA_DIR = ROOT / ".recall" / "bench-pgdata"
T = TypeVar("T")


def run(main: Callable[[], Coroutine[Any, Any, None] | None]) -> None:
    """A benchmark's entry point: logging as deployed (structlog configured: INFO and up, JSON
    lines on stderr, no debug events inside timed calls; RECALL_LOG_LEVEL overrides), then
    `main`, on an event loop when it is a coroutine function."""
    configure_logging()
    result = main()
    if inspect.iscoroutine(result):
        asyncio.run(result)


async def fresh_database(name: str) -> str:
    """Drop and create database `name` on RECALL_BENCH_DATABASE_URL's server, or on an
    embedded server in .recall/bench-pgdata; return its URL."""
    server_url = os.environ.get("RECALL_BENCH_DATABASE_URL") or await EmbeddedServer(
        BENCH_DATA_DIR
    ).astart(stop_at_exit=True)
    conn = await connect_once(server_url)
    try:
        await conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    finally:
        await conn.close()
    return make_conninfo(server_url, dbname=name)


async def settle(url: str) -> None:
    """After a load, as the table owner (VACUUM is not the app role's): VACUUM (ANALYZE) the
    memories, the steady state autovacuum reaches (statistics, visibility map), so autovacuum
    does not process the fresh table during the timings; then CHECKPOINT, so the load's dirty
    pages are written now and not by a checkpoint spread over the timings."""
    owner = await connect_once(url)
    try:
        await owner.execute("VACUUM (ANALYZE) recall.memories")
        await owner.execute("CHECKPOINT")
    finally:
        await owner.close()


def rotated(items: list[T], turn: int) -> list[T]:
    """`items` started at position `turn` (modulo their number): the order for the turn-th
    block when compared variants take turns, so each goes first equally often."""
    k = turn % len(items)
    return items[k:] + items[:k]


def counts(text: str, *, default: int, option: str) -> list[int]:
    """The comma-separated whole numbers of a command-line option, which must include the
    setting's default (the ratios in the report are to it)."""
    values = [int(v) for v in text.split(",")]
    if default not in values:
        raise SystemExit(f"{option} must include the default ({default})")
    return values


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def machine() -> str:
    """One line describing the machine and versions, for the record."""
    cpu = platform.processor() or platform.machine()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        cpu = model
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"


def git_revision() -> str:
    """The commit the benchmark ran on."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - the git on PATH
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        dirty = subprocess.run(
            # the benchmarks' own output file does not count as a change to what was measured
            [  # noqa: S607 - the git on PATH
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!docs/benchmarks.md",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return (out.stdout.strip() or "unknown") + (" + uncommitted changes" if dirty else "")
    except OSError:
        return "unknown"


def publish(name: str, body: str, *, write: bool) -> None:
    """Print a benchmark's section and, when `write`, put it in docs/benchmarks.md."""
    print(body)
    if write:
        write_section(name, body)


def write_section(name: str, body: str, path: Path = ROOT / "docs" / "benchmarks.md") -> None:
    """Replace the section between `<!-- name:start -->` and `<!-- name:end -->` in
    docs/benchmarks.md (appending it when missing), leaving other benchmarks' sections."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{start}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    text = (
        pattern.sub(lambda _m: block, text) if pattern.search(text) else text + "\n" + block + "\n"
    )
    path.write_text(text)
