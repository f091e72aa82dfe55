"""The benchmarks' shared machinery: every script logs as deployed (structlog configured,
INFO and up, no debug events), and compared systems are timed in turns."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
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


async def test_timed_interleaved_takes_turns_in_blocks_and_turns_the_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from latency import timed_interleaved

    ran: list[tuple[str, int]] = []

    def call(name: str, i: int) -> Callable[[], Awaitable[tuple[str, int]]]:
        async def run() -> tuple[str, int]:
            ran.append((name, i))
            return name, i

        return run

    calls = {name: [call(name, i) for i in range(5)] for name in ("ours", "theirs")}
    out = await timed_interleaved(calls, block=2)

    assert ran == [
        ("ours", 0), ("ours", 1), ("theirs", 0), ("theirs", 1),  # block 0: ours first
        ("theirs", 2), ("theirs", 3), ("ours", 2), ("ours", 3),  # block 1: theirs first
        ("ours", 4), ("theirs", 4),  # the last, short block: ours first again
    ]  # fmt: skip
    for name in calls:
        times, results = out[name]
        assert results == [(name, i) for i in range(5)]  # in the queries' order
        assert len(times) == 5 and all(t >= 0 for t in times)


async def test_timed_interleaved_refuses_systems_with_different_queries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from latency import timed_interleaved

    async def nothing() -> None:
        return None

    with pytest.raises(ValueError, match="same number of calls"):
        await timed_interleaved({"ours": [nothing] * 3, "theirs": [nothing] * 2}, block=2)


def test_counts_reads_the_option_and_requires_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from common import counts

    assert counts("2,4,10,20", default=10, option="--sizes") == [2, 4, 10, 20]
    with pytest.raises(SystemExit, match=r"--sizes must include the default \(10\)"):
        counts("2,4", default=10, option="--sizes")


def test_rotated_starts_each_turn_one_further(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from common import rotated

    assert [rotated([2, 4, 10], turn) for turn in range(4)] == [
        [2, 4, 10], [4, 10, 2], [10, 2, 4], [2, 4, 10],
    ]  # fmt: skip
    assert rotated([2, 4, 10], -1) == [10, 2, 4]  # pool_size's warm-up round


def test_floor_reads_the_execution_time_and_the_leaf_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from floor import scan_node, server_ms

    leaf = {"Node Type": "Index Only Scan", "Index Name": "cover", "Relation Name": "vectors"}
    plan = [
        {
            "Plan": {
                "Node Type": "Limit",
                "Plans": [{"Node Type": "Sort", "Plans": [{"Node Type": "Subquery Scan",
                                                           "Plans": [leaf]}]}],
            },
            "Execution Time": 0.412,
        }
    ]  # fmt: skip
    assert server_ms(plan) == 0.412
    assert scan_node(plan[0]["Plan"]) == "Index Only Scan on cover"
    assert scan_node({"Node Type": "Seq Scan", "Relation Name": "memories"}) == (
        "Seq Scan on memories"
    )
