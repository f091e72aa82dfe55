import re
from pathlib import Path

import pytest

from recall.db.memories import MEMORY_COLUMNS
from recall.db.migrate import load_migrations
from recall.db.sql import parse_blocks, query


def test_blocks_parse_by_name() -> None:
    blocks = parse_blocks("-- name: a\nSELECT 1;\n\n-- name: b\nSELECT %(x)s;\n")
    assert blocks == {"a": b"SELECT 1;", "b": b"SELECT %(x)s;"}


def test_duplicate_and_empty_blocks_are_errors() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_blocks("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")
    with pytest.raises(ValueError, match="empty"):
        parse_blocks("-- name: a\n\n-- name: b\nSELECT 2;\n")


def test_queries_file_loads_and_has_no_string_formatting() -> None:
    statement = query("search_indexed")
    assert b"%(user_id)s" in statement
    assert b"recall.search_indexed(" in statement
    with pytest.raises(KeyError):
        query("no_such_query")


def test_migrations_are_numbered_from_one_in_order() -> None:
    """Numbers are unique and ascending from 1; a gap is a number reserved for parallel work
    (0014 when 0015 landed), which `pending_migrations` applies whenever it lands: it compares
    sets of versions, not the highest one."""
    versions = [m.version for m in load_migrations()]
    assert versions[0] == 1 and versions == sorted(set(versions))


def test_the_only_memory_insert_in_the_code_is_the_import_batch() -> None:
    """Issue 31: one row goes in through recall.insert_memory (migration 0018, checked live by
    tests/integration/test_row_level_security.py); the code's SQL holds one more INSERT into
    recall.memories, an import batch's set-based merge, and Python holds none."""
    src = Path(__file__).resolve().parents[2] / "src" / "recall"
    found = []
    for path in sorted(src.rglob("*.sql")):
        for name, body in parse_blocks(path.read_text("utf-8")).items():
            if b"INSERT INTO recall.memories" in body:
                found.append(f"{path.name}:{name}")
    assert found == ["queries.sql:merge_import"]
    assert not [p for p in src.rglob("*.py") if "INSERT INTO recall.memories" in p.read_text()]


def test_the_import_batch_writes_the_columns_the_one_insert_writes() -> None:
    """The import's set-based INSERT (merge_import) and the single-row one
    (recall.insert_memory, migration 0018) name the same columns in the same order and resolve
    a conflict on the same key, so the two statements cannot drift apart. The import names
    `id` first as well (issue 37: a memory read back from `recall export` keeps its id; a
    single row is always a new memory)."""

    def shape(text: str) -> tuple[list[str], str]:
        columns = re.search(r"INSERT INTO recall\.memories(?: AS \w+)? \(([^)]*)\)", text)
        conflict = re.search(r"ON CONFLICT \(([^)]*)\) DO NOTHING", text)
        assert columns is not None and conflict is not None, text
        return [c.strip() for c in columns.group(1).split(",")], conflict.group(1)

    [one] = [m for m in load_migrations() if m.version == 18]
    body = one.statements[one.statements.index("CREATE FUNCTION recall.insert_memory") :]
    batch_columns, batch_conflict = shape(query("merge_import").decode())
    assert (batch_columns[1:], batch_conflict) == shape(body)
    assert batch_columns == ["id", *MEMORY_COLUMNS]  # the one parameter builder's names
    assert shape(body)[0] == list(MEMORY_COLUMNS)
    copy = re.search(r"COPY recall_import \(([^)]*)\)", query("copy_import").decode())
    assert copy is not None
    assert [c.strip() for c in copy.group(1).split(",")] == ["ord", "id", *MEMORY_COLUMNS]
