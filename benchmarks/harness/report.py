"""What a benchmark prints and writes: Markdown tables, the machine and the commit, and its
section of docs/benchmarks.md."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"
# sections kept beside the plan they measure, not in docs/benchmarks.md
DOCS = {"scale-out": ROOT / "docs" / "scaling.md"}


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def machine() -> str:
    """One line describing the machine and versions, for the record."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):  # no /proc/cpuinfo, or no model in it
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"


def git_revision() -> str:
    """The commit the benchmark runs on, "+ uncommitted changes" when the tree differs from it
    (docs/benchmarks.md, the benchmarks' own output, does not count). Read it when a run
    starts: the code that runs, whatever changes during the run."""

    def git(*args: str) -> str:
        out = subprocess.run(  # noqa: S603 - git with this module's own arguments
            ["git", *args],  # noqa: S607 - the git on PATH
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD") or "unknown"
        dirty = git(
            "status", "--porcelain", "--untracked-files=no", "--", ".", f":!{DOC.relative_to(ROOT)}"
        )
    except OSError:
        return "unknown"
    return commit + (" + uncommitted changes" if dirty else "")


def publish(name: str, body: str, *, write: bool) -> None:
    """Print a benchmark's section and, when `write`, put it in docs/benchmarks.md (or in the
    document `DOCS` names for it)."""
    print(body)
    if write:
        write_section(name, body, DOCS.get(name, DOC))


def write_section(name: str, body: str, path: Path = DOC) -> None:
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
