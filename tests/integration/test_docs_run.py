"""Docs that run (issue 55): every Python block of README.md, docs/nodes.md and docs/agents.md is
executed, in order, in one namespace per page, against a fresh database with the default
model. A block with a top-level `await` runs on the test's loop; any other runs in a thread of
its own, where no loop runs, as in a script."""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.model

PAGES = ["README.md", "docs/nodes.md", "docs/agents.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(page: str) -> list[str]:
    """The page's Python blocks, in order."""
    return BLOCK.findall((ROOT / page).read_text("utf-8"))


def test_each_page_has_python_blocks() -> None:
    assert all(blocks(page) for page in PAGES)


@pytest.mark.parametrize("page", PAGES)
async def test_every_python_block_runs(page: str, process_database: str) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs_{Path(page).stem}"}
    for number, source in enumerate(blocks(page), start=1):
        code = compile(
            source,
            f"{page}, block {number}",
            "exec",
            flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            dont_inherit=True,  # not this module's `from __future__ import annotations`
        )
        if code.co_flags & inspect.CO_COROUTINE:
            await eval(code, namespace)  # noqa: S307  # our own docs
        else:
            await asyncio.to_thread(exec, code, namespace)  # our own docs
