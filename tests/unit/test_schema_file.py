"""`src/recall/db/schema.sql` read as text: each function there names the migration its body
comes from (`-- body: NNNN_name.sql`), and that migration holds the same body. Whether the
file is what the migrations leave in a database is tests/integration/test_schema.py's
question; this one keeps the file's pointers into the history true."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import pytest

from recall.db.migrate import load_migrations
from recall.db.sql import SCHEMA_FILE

_CREATE = re.compile(r"^CREATE OR REPLACE FUNCTION ", re.MULTILINE)
_FUNCTION = re.compile(
    r"^-- body: (?P<file>\S+)\n"
    r"CREATE OR REPLACE FUNCTION (?P<name>recall\.\w+)\((?P<args>[^)]*)\)"
    r".*?\bAS (?P<tag>\$\w*\$)(?P<body>.*?)(?P=tag);$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class SchemaFunction:
    """One function of schema.sql: its name, arguments as written, body and its migration."""

    name: str
    args: str
    body: str
    migration: str


def schema_functions(text: str | None = None) -> list[SchemaFunction]:
    """The functions of schema.sql (or of `text`), in the file's order."""
    if text is None:
        text = resources.files("recall.db").joinpath(SCHEMA_FILE).read_text("utf-8")
    found = [
        SchemaFunction(m["name"], " ".join(m["args"].split()), m["body"], m["file"])
        for m in _FUNCTION.finditer(text)
    ]
    # a function this reader missed (no `-- body:` line, another form) would go unchecked
    assert len(found) == len(_CREATE.findall(text)), "a function without its `-- body:` line"
    return found


def _normal(text: str) -> str:
    return " ".join(text.split())


def wrong_pointers(functions: list[SchemaFunction]) -> list[str]:
    """The functions whose body is not in the migration they name (whitespace aside)."""
    migrations = {f"{m.version:04d}_{m.name}.sql": _normal(m.statements) for m in load_migrations()}
    return [
        f"{f.name}({f.args}): {f.migration}"
        for f in functions
        if _normal(f.body) not in migrations.get(f.migration, "")
    ]


def test_each_body_is_the_one_its_migration_wrote() -> None:
    functions = schema_functions()
    assert len(functions) >= 20
    wrong = wrong_pointers(functions)
    assert not wrong, f"not the body of the migration named: {wrong}"


def test_a_function_without_its_pointer_or_with_a_wrong_one_is_seen() -> None:
    one = (
        "-- body: 0002_keyword_search.sql\n"
        "CREATE OR REPLACE FUNCTION recall.tsvector_tokens(v tsvector) RETURNS integer\n"
        "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$\n"
        "    SELECT coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0)::integer\n"
        "    FROM unnest(v) AS t\n"
        "$$;\n"
    )
    [f] = schema_functions(one)
    assert (f.name, f.args) == ("recall.tsvector_tokens", "v tsvector")
    assert wrong_pointers([f]) == []
    moved = one.replace("0002_keyword_search.sql", "0003_memory_creation.sql")
    assert wrong_pointers(schema_functions(moved)) == [
        "recall.tsvector_tokens(v tsvector): 0003_memory_creation.sql"
    ]
    unnamed = one + "CREATE OR REPLACE FUNCTION recall.g() RETURNS int LANGUAGE sql AS $$ 1 $$;\n"
    with pytest.raises(AssertionError, match="without its `-- body:` line"):
        schema_functions(unnamed)
