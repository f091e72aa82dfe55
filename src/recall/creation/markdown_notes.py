"""Markdown memory notes: `MEMORY.md` and daily `memory/YYYY-MM-DD.md` files,
split into paragraphs and stored as memories of kind "note", dated by their file name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["note_files", "read_notes"]

_DAILY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")
_BLANK = re.compile(r"\n\s*\n")


def note_files(root: Path) -> list[tuple[Path, datetime | None]]:
    """The note files under `root` with their date (None for MEMORY.md), oldest first.

    Looks for `MEMORY.md` and `memory/MEMORY.md`, and `memory/YYYY-MM-DD.md`; a daily file
    whose name is not a real date is skipped.
    """
    found: list[tuple[Path, datetime | None]] = []
    for candidate in (root / "MEMORY.md", root / "memory" / "MEMORY.md"):
        if candidate.is_file():
            found.append((candidate, None))
    daily = root / "memory"
    if daily.is_dir():
        for path in sorted(daily.iterdir()):
            match = _DAILY.match(path.name)
            if not match or not path.is_file():
                continue
            try:
                year, month, dom = (int(g) for g in match.groups())
                day = datetime(year, month, dom, 12, tzinfo=UTC)
            except ValueError:
                continue
            found.append((path, day))
    return found


def read_notes(root: Path, user_id: str) -> Iterator[dict[str, Any]]:
    """One `add_turns` item per paragraph of every note file (kind "note").

    A paragraph is text between blank lines; headings stay with their paragraph. The source
    file (relative to `root`) and the paragraph number go into metadata, so re-importing the
    same files stores nothing twice, and an edited paragraph is stored as a new note.
    """
    for path, day in note_files(root):
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        source = path.relative_to(root).as_posix()
        for number, paragraph in enumerate(p.strip() for p in _BLANK.split(text)):
            if not paragraph:
                continue
            yield {
                "user_id": user_id,
                "user_message": paragraph,
                "ai_response": "",
                "kind": "note",
                "conversation_id": source,
                "created_at": day,
                "metadata": {"source": source, "paragraph": number},
            }
