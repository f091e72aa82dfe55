"""Named SQL blocks: `queries.sql` holds every statement, each after a `-- name: <name>` line."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["parse_blocks", "query"]

_NAME = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)


def parse_blocks(text: str) -> dict[str, bytes]:
    """Split a file of named blocks into {name: statement}; duplicate names are an error.

    Raises:
        ValueError: a name appears twice or a block is empty.
    """
    parts = _NAME.split(text)
    blocks: dict[str, bytes] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statement = body.strip()
        if name in blocks:
            raise ValueError(f"SQL block {name!r} is defined twice")
        if not statement:
            raise ValueError(f"SQL block {name!r} is empty")
        # bytes: psycopg accepts them as a query, and they are not mistaken for user text.
        blocks[name] = statement.encode()
    return blocks


@cache
def _blocks() -> dict[str, bytes]:
    return parse_blocks(resources.files("recall.db").joinpath("queries.sql").read_text("utf-8"))


def query(name: str) -> bytes:
    """Return the statement named `name` from `queries.sql` (read once, on first use).

    Raises:
        KeyError: no block has that name.
    """
    return _blocks()[name]
