"""docs/architecture.md's tree of `src/recall/` matches the tree: every module is named in it
(under its package) and every module it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "recall"
DOC = ROOT / "docs" / "architecture.md"
_ENTRY = re.compile(r"^  (\w+/|\w+\.py)\s")  # a package or a top-level module, at indent 2
_MODULE = re.compile(r"(?<![\w/])(?:(\w+)/)?(\w+)\.py\b")  # "bulk.py" or "db/items.py"


def documented() -> dict[str, set[str]]:
    """{entry ("db/", "config.py"): the modules named in its text} from the doc's tree block."""
    text = DOC.read_text("utf-8")
    block = text[text.index("```\nsrc/recall/\n") :]
    block = block[: block.index("\n```", 4)]
    entries: dict[str, set[str]] = {}
    current: str | None = None
    for line in block.splitlines()[2:]:
        if line.lstrip().startswith("#"):
            continue
        if match := _ENTRY.match(line):
            current = match.group(1)
            entries.setdefault(current, set())
            line = line[match.end() :]
        elif not line.startswith("    "):
            current = None  # migrations/, graphs/, benchmarks/: outside src/recall/
        if current is not None:
            for package, module in _MODULE.findall(line):
                entry = f"{package}/" if package else current
                entries.setdefault(entry, set()).add(f"{module}.py")
    return entries


def actual() -> dict[str, set[str]]:
    """The same from the tree: a package's modules (its __init__.py aside), a module itself."""
    out: dict[str, set[str]] = {}
    for path in SRC.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            out[f"{path.name}/"] = {p.name for p in path.glob("*.py") if p.name != "__init__.py"}
        elif path.suffix == ".py":
            out[path.name] = set()
    return out


def test_every_module_is_in_docs_architecture() -> None:
    doc, tree = documented(), actual()
    missing = sorted(set(tree) - set(doc))
    assert not missing, f"docs/architecture.md does not list {missing}"
    for entry, modules in tree.items():
        absent = sorted(modules - doc[entry])
        assert not absent, f"docs/architecture.md: {entry} does not name {absent}"


def test_every_module_named_in_docs_architecture_exists() -> None:
    doc, tree = documented(), actual()
    assert set(doc) <= set(tree), f"gone from src/recall/: {sorted(set(doc) - set(tree))}"
    for entry, named in doc.items():
        if entry.endswith("/"):
            gone = sorted(named - tree[entry])
            assert not gone, f"docs/architecture.md: {entry} names {gone}, not in the tree"
