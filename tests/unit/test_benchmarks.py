"""The benchmarks' layout and shared library (benchmarks/lib): one script per question, each
started through `lib.run.run` (logging as deployed), none imported by another; compared
systems timed in turns; each script's section of docs/benchmarks.md replaced in place."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


@pytest.fixture(autouse=True)
def _benchmarks_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/<script>.py` has it


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


def _imported_from(tree: ast.Module) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.setdefault(node.module, set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update({alias.name: set() for alias in node.names})
    return out


def test_the_suite_is_the_scripts_that_remain() -> None:
    assert [p.stem for p in SCRIPTS] == [
        "bulk_writers", "consolidation", "ef_search", "embedding", "latency", "load", "locomo",
        "pool_size",
    ]  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_benchmark_starts_through_lib_run_and_publishes_its_section(script: Path) -> None:
    tree = ast.parse(script.read_text())
    imported = _imported_from(tree)
    assert {"parser", "run"} <= imported["lib.run"]
    assert "publish" in imported["lib.report"]
    (stmt,) = _main_block(tree)
    assert ast.unparse(stmt) == "run(main)"
    publishes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "publish"
    ]
    assert [ast.unparse(kw) for call in publishes for kw in call.keywords] == [
        "write=not args.no_write"
    ]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_is_another_scripts_library(script: Path) -> None:
    imported = _imported_from(ast.parse(script.read_text()))
    scripts = {p.stem for p in SCRIPTS}
    assert not {module.split(".")[0] for module in imported} & scripts


def test_the_library_imports_no_script() -> None:
    scripts = {p.stem for p in SCRIPTS}
    for module in sorted((BENCHMARKS / "lib").glob("*.py")):
        imported = _imported_from(ast.parse(module.read_text()))
        assert not {name.split(".")[0] for name in imported} & scripts, module.name


@pytest.mark.parametrize("kind", ["async def", "def"])
def test_run_configures_logging_before_main(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "bench.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "import structlog\n"
        "from lib.run import run\n"
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


def test_parser_has_no_write_and_the_locomo_file_when_asked() -> None:
    from lib.corpus import LOCOMO
    from lib.run import parser

    assert parser("doc").parse_args([]).no_write is False
    assert parser("doc").parse_args(["--no-write"]).no_write is True
    assert not hasattr(parser("doc").parse_args([]), "data")
    assert parser("doc", data=True).parse_args([]).data == LOCOMO


def _recorder(ran: list[tuple[str, int]]) -> Callable[[str, int], Callable[[], Awaitable[object]]]:
    def call(name: str, i: int) -> Callable[[], Awaitable[object]]:
        async def run() -> tuple[str, int]:
            ran.append((name, i))
            return name, i

        return run

    return call


async def test_timed_interleaved_takes_turns_in_blocks_and_turns_the_order() -> None:
    from lib.timing import timed_interleaved

    ran: list[tuple[str, int]] = []
    call = _recorder(ran)
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


async def test_timed_interleaved_goes_on_turning_from_first_turn() -> None:
    from lib.timing import blocks, timed_interleaved

    ran: list[tuple[str, int]] = []
    call = _recorder(ran)
    calls = {name: [call(name, i) for i in range(2)] for name in ("a", "b", "c")}
    for round_ in range(2):  # a caller's rounds over the same lists, turning on
        await timed_interleaved(calls, block=1, first_turn=round_ * blocks(2, block=1))

    assert [name for name, _i in ran] == [
        "a", "b", "c", "b", "c", "a",  # round 0: turns 0 and 1
        "c", "a", "b", "a", "b", "c",  # round 1: turns 2 and 3, not 0 and 1 again
    ]  # fmt: skip


async def test_timed_interleaved_refuses_systems_with_different_queries() -> None:
    from lib.timing import timed_interleaved

    async def nothing() -> None:
        return None

    with pytest.raises(ValueError, match="same number of calls"):
        await timed_interleaved({"ours": [nothing] * 3, "theirs": [nothing] * 2}, block=2)


def test_counts_reads_the_option_and_requires_the_default() -> None:
    from lib.run import counts

    assert counts("2,4,10,20", default=10, option="--sizes") == [2, 4, 10, 20]
    with pytest.raises(SystemExit, match=r"--sizes must include the default \(10\)"):
        counts("2,4", default=10, option="--sizes")


def test_rotated_starts_each_turn_one_further() -> None:
    from lib.timing import rotated

    assert [rotated([2, 4, 10], turn) for turn in range(4)] == [
        [2, 4, 10], [4, 10, 2], [10, 2, 4], [2, 4, 10],
    ]  # fmt: skip
    assert rotated([2, 4, 10], -1) == [10, 2, 4]  # pool_size's warm-up round


def test_percentiles_default_to_p50_p95_p99() -> None:
    from lib.timing import percentiles

    values = [float(v) for v in range(1, 101)]
    assert percentiles(values) == pytest.approx([50.5, 95.05, 99.01])
    assert percentiles(values, [0, 100]) == [1.0, 100.0]


def test_write_section_replaces_its_own_section_only_and_appends_a_new_one(
    tmp_path: Path,
) -> None:
    from lib.report import write_section

    doc = tmp_path / "benchmarks.md"
    doc.write_text(
        "# Benchmarks\n\nintro\n\n<!-- a:start -->\nold a\n<!-- a:end -->\n\n"
        "<!-- b:start -->\nold b\n<!-- b:end -->\n"
    )
    write_section("a", "new a\n", doc)
    write_section("c", "new c", doc)
    assert doc.read_text() == (
        "# Benchmarks\n\nintro\n\n<!-- a:start -->\nnew a\n<!-- a:end -->\n\n"
        "<!-- b:start -->\nold b\n<!-- b:end -->\n\n<!-- c:start -->\nnew c\n<!-- c:end -->\n"
    )


def test_table_is_markdown() -> None:
    from lib.report import table

    assert table(["a", "b"], [[1, "x"], [2.5, None]]) == (
        "| a | b |\n|---|---|\n| 1 | x |\n| 2.5 | None |"
    )


@pytest.mark.parametrize(
    ("n", "large_users", "large_size"),
    [(1_000, 1, 250), (100_000, 1, 25_000), (1_000_000, 5, 50_000)],
)
def test_skewed_users_hold_every_memory_a_quarter_in_large_users(
    n: int, large_users: int, large_size: int
) -> None:
    from lib.data import skewed_users

    users = skewed_users(n, np.random.default_rng(n))
    large = {u: size for u, size in users.items() if u.startswith("large")}
    typical = sorted(size for u, size in users.items() if u not in large)
    assert sum(users.values()) == n
    assert list(large.values()) == [large_size] * large_users
    assert typical[-1] <= 1000 and typical[1] >= 10  # the last user made may hold fewer


def test_exact_top_is_the_users_nearest_memories() -> None:
    from lib.data import DIMS, Data, exact_top, queries_for, unit

    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(50, DIMS)))
    data = Data(
        {"u": 50}, {"u": [("a", "b")] * 50}, {"u": vectors}, {"u": [f"m{i}" for i in range(50)]}
    )
    q = vectors[7]
    assert "m7" in exact_top(data, "u", q)
    cosines = vectors @ q
    assert exact_top(data, "u", q, k=5) == {f"m{i}" for i in np.argsort(-cosines)[:5]}
    ((user, query),) = queries_for(data, ["u"], 1, rng)
    assert user == "u" and np.linalg.norm(query) == pytest.approx(1.0, abs=1e-6)
