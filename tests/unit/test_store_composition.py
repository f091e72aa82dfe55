"""MemoryStore holds its parts instead of inheriting them (issue 39, decision 0033): a reader
following a value through the calls goes from a store method to the part that does the work,
and on to the SQL, without having to know which base class supplies a method."""

from __future__ import annotations

import ast
import inspect
import textwrap

from recall.store.bulk import Bulk
from recall.store.candidates import Candidates
from recall.store.conversations import Conversations
from recall.store.erasure import Erasure
from recall.store.maintenance import Maintenance
from recall.store.memory_store import MemoryStore
from recall.store.reads import Reads
from recall.store.repeats import Repeats
from recall.store.search import Search
from recall.store.writes import Writes

PARTS = (Bulk, Candidates, Conversations, Erasure, Maintenance, Reads, Repeats, Search, Writes)


def test_the_store_and_its_parts_inherit_nothing() -> None:
    assert MemoryStore.__bases__ == (object,)
    for part in PARTS:
        assert part.__bases__ == (object,), part


def test_the_store_holds_each_part_as_an_attribute_of_its_type() -> None:
    init = ast.parse(textwrap.dedent(inspect.getsource(MemoryStore.__init__)))
    made: dict[str, str] = {}  # attribute -> the part class called to make it
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            target, call = node.targets[0], node.value
            if isinstance(target, ast.Attribute) and isinstance(call.func, ast.Name):
                made[target.attr] = call.func.id
    held = set(made.values()) | {"Repeats"}  # Repeats is handed to Writes, not held
    assert {p.__name__ for p in PARTS} <= held, made


def test_each_store_method_that_a_part_has_is_one_call_to_that_part() -> None:
    """A facade method named as a part's method calls a held part and decides nothing:
    its body (after the docstring) is one statement."""
    by_name = {name for part in PARTS for name, _ in inspect.getmembers(part, inspect.isfunction)}
    checked = 0
    for name, method in inspect.getmembers(MemoryStore, inspect.isfunction):
        if name.startswith("_") or name not in by_name:
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
        fn = tree.body[0]
        assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        body = [
            s
            for s in fn.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        calls = [
            n.func for n in ast.walk(fn)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Attribute)
            and isinstance(n.func.value.value, ast.Name) and n.func.value.value.id == "self"
        ]  # fmt: skip
        assert len(body) == 1 and calls, name
        checked += 1
    assert checked >= 15
