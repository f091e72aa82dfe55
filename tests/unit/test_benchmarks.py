"""Every benchmark logs as deployed: structlog configured, INFO and up, no debug events."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "common.py")


def _main_block(tree: ast.Module) -> list[ast.stmt]:
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            return node.body
    return []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_benchmark_starts_through_common_run(script: Path) -> None:
    tree = ast.parse(script.read_text())
    imported = {
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "common"
        for alias in node.names
    }
    assert "run" in imported
    (stmt,) = _main_block(tree)
    assert ast.unparse(stmt) == "run(main)"


@pytest.mark.parametrize("kind", ["async def", "def"])
def test_common_run_configures_logging_before_main(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "bench.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "import structlog\n"
        "from common import run\n"
        f"{kind} main():\n"
        "    log = structlog.stdlib.get_logger('recall.bench')\n"
        "    log.debug('bench.debug', n=1)\n"
        "    log.info('bench.info', n=2)\n"
        "run(main)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RECALL_LOG_LEVEL"}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, env=env
    )
    events = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events] == ["bench.info"]
    assert events[0]["level"] == "info" and events[0]["n"] == 2
    assert "bench.debug" not in out.stderr + out.stdout
