"""The package's shape, checked: imports go only down the floors, nothing imports the CLI or
the server, only `recall.config` reads the environment, only `recall.db` runs SQL, and no
module grows past 400 lines nor any function past 60 (issue 56; docs/architecture.md)."""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "recall"

# The floors, lowest first. A module may import from lower floors and from its own package.
FLOORS: dict[str, int] = {
    "config": 0,
    "errors": 0,
    "limits": 0,
    "memory": 0,
    "rows": 0,
    "messages": 0,
    "metrics": 0,
    "logs": 0,
    "testing": 0,
    "embeddings": 1,
    "search": 1,
    "db": 2,
    "outbox": 2,
    "store": 3,
    "basestore": 3,
    "creation": 4,
    "nodes": 5,
    "agents": 6,
    "example": 7,
    "server": 8,
    "cli": 8,
}
TOP = {"__init__", "__main__"}  # the package's face: may import anything
SQL_CALLS = {"execute", "executemany", "executescript", "copy", "fetchone", "fetchall", "fetchmany"}
MAX_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> Iterator[tuple[Path, str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        unit = rel.parts[0].removesuffix(".py")
        yield path, unit, ast.parse(path.read_text("utf-8"), str(path))


def _runtime_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of every `recall.*` import outside `if TYPE_CHECKING:` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "recall":
                for alias in node.names:
                    yield node.lineno, f"recall.{alias.name}"
            elif node.module.startswith("recall."):
                yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("recall."):
                    yield node.lineno, alias.name


def test_every_unit_has_a_floor() -> None:
    units = {unit for _path, unit, _tree in _modules()} - TOP
    assert units <= set(FLOORS), f"give these a floor: {sorted(units - set(FLOORS))}"


def test_imports_only_go_down() -> None:
    wrong = []
    for path, unit, tree in _modules():
        if unit in TOP:
            continue
        for line, module in _runtime_imports(tree):
            target = module.split(".")[1]
            if target == unit:
                continue
            if target in TOP or FLOORS.get(target, 99) >= FLOORS[unit]:
                if FLOORS[unit] == 0 and FLOORS.get(target) == 0:
                    continue  # the bottom floor's modules share it (no cycle: Python says)
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_cli_or_the_server() -> None:
    wrong = [
        f"{path.relative_to(SRC)}:{line} imports {module}"
        for path, unit, tree in _modules()
        if unit not in {"cli", "server", "__main__"}
        for line, module in _runtime_imports(tree)
        if module.split(".")[1] in {"cli", "server"}
    ]
    assert not wrong, "\n".join(wrong)


def _uses_outside(allowed: set[str], found: Callable[[ast.AST], str | None]) -> list[str]:
    """Where a module outside the `allowed` units has a node that `found` names."""
    wrong = []
    for path, unit, tree in _modules():
        if unit in allowed:
            continue
        for node in ast.walk(tree):
            what = found(node)
            if what is not None:
                wrong.append(f"{path.relative_to(SRC)}:{getattr(node, 'lineno', 0)} {what}")
    return wrong


def _environment_use(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "putenv"}:
        return f"uses os.{node.attr}"
    if isinstance(node, ast.Attribute) and node.attr == "from_env":
        return "reads Settings.from_env() (the process reads once: process_settings())"
    return None


def _sql_call(node: ast.AST) -> str | None:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    return f"calls .{node.func.attr}()" if node.func.attr in SQL_CALLS else None


def test_only_the_settings_read_the_environment() -> None:
    wrong = _uses_outside({"config"}, _environment_use)
    assert not wrong, "\n".join(wrong)


def test_only_the_storage_layers_run_sql() -> None:
    """PostgreSQL's (`recall.db`) and the writer's local SQLite queue (`recall.outbox`)."""
    wrong = _uses_outside({"db", "outbox"}, _sql_call)
    assert not wrong, "\n".join(wrong)


def test_each_module_name_appears_once() -> None:
    """Issue 48: two `search.py` (the store's and the storage layer's), two `candidates.py`, ...
    made a traceback or an import line ambiguous; a name says which module it is."""
    seen: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path.stem not in TOP:
            seen.setdefault(path.stem, []).append(str(path.relative_to(SRC)))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not twice, twice


def test_the_row_types_live_on_the_lowest_floor() -> None:
    """Issue 48: every row type read from the database is in `recall.rows` (floor 0), so the
    storage layer and the search floor share them without importing each other for them."""
    import recall.rows

    for path, _unit, tree in _modules():
        if path.name == "rows.py":
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Row"):
                pytest.fail(f"{path.relative_to(SRC)} defines {node.name}: it belongs in rows.py")
    assert {"MemoryRow", "CandidateRow"} <= set(recall.rows.__all__)
    assert FLOORS["rows"] == 0


def _long_functions(tree: ast.Module) -> list[str]:
    """The functions of `tree` over `MAX_FUNCTION_LINES` lines, docstring included."""
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_is_over_400_lines_nor_a_function_over_60(path: Path) -> None:
    text = path.read_text("utf-8")
    lines = len(text.splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines"
    assert _long_functions(ast.parse(text)) == [], f"{path.relative_to(SRC)}"


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The import reader finds what the floor check needs, so the checks above can fail."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from recall.store import MemoryStore\n"
        "from recall import cli\n"
        "if TYPE_CHECKING:\n"
        "    from recall.nodes import retrieve_memories\n"
    )
    assert list(_runtime_imports(tree)) == [(2, "recall.store"), (3, "recall.cli")]
    call = ast.parse("conn.execute(q)\nos.environ.get('X')\nSettings.from_env()\n")
    found = [f(n) for n in ast.walk(call) for f in (_sql_call, _environment_use) if f(n)]
    assert found == [
        "calls .execute()",
        "reads Settings.from_env() (the process reads once: process_settings())",
        "uses os.environ",
    ]
    long = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    assert _long_functions(ast.parse(long)) == [f"f ({MAX_FUNCTION_LINES + 1} lines)"]
    assert _long_functions(ast.parse("def g():\n    return 1\n")) == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_circle_even_through_type_checking_or_a_function() -> None:
    """Issue 31: a module and its connector imported each other, held open by a type-only
    import one way and an import inside a function the other. Every `recall` import counts
    here, wherever it is written; a circle is reported as the modules on it."""
    modules = {_module_name(path): tree for path, _unit, tree in _modules()}
    graph: dict[str, set[str]] = {}
    for name, tree in modules.items():
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "recall" or node.module.startswith("recall."):
                    for alias in node.names:
                        sub = f"{node.module}.{alias.name}"
                        targets.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("recall."))
        graph[name] = {t for t in targets if t in modules and t != name}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")
