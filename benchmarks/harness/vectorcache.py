"""Vectors embedded once and kept: a table from a text's key (its kind, "doc" as the store embeds
a stored turn or "query" as it embeds a message, and the sha1 of the text) to its vector, in an
.npz file under .recall/, so that every run of a benchmark searches with the same vectors and
only the texts it has not seen are embedded."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np

from recall.embeddings import Embedder

Kind = Literal["doc", "query"]
CHUNK = 512  # documents embedded between two writes of the file, so a stopped run resumes


def key(kind: Kind, text: str) -> str:
    """The table's key of `text` embedded as `kind`."""
    return kind + ":" + hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324  # a cache key


def saved(path: Path) -> dict[str, np.ndarray]:
    """The table kept in `path` (empty when there is none)."""
    if not path.exists():
        return {}
    with np.load(path) as kept:
        return dict(zip(kept["keys"].tolist(), kept["vectors"], strict=True))


def save(table: dict[str, np.ndarray], path: Path) -> None:
    """Write `table` to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(table)
    np.savez(path, keys=np.array(keys), vectors=np.vstack([table[k] for k in keys]))


async def embed_missing(
    embedder: Embedder,
    texts: Iterable[str],
    kind: Kind,
    table: dict[str, np.ndarray],
    path: Path,
    label: str,
) -> None:
    """Embed the texts of `kind` missing from `table` with `embedder` (the store's), add them
    to it in place, and keep the table in `path` (documents in chunks, the file written after
    each)."""
    todo = [t for t in dict.fromkeys(texts) if key(kind, t) not in table]
    if not todo:
        return
    if kind == "query":
        for text in todo:
            table[key(kind, text)] = np.asarray(await embedder.embed_query(text), np.float32)
        save(table, path)
    else:
        for start in range(0, len(todo), CHUNK):
            part = todo[start : start + CHUNK]
            done = await embedder.embed_documents(part)
            for text, vec in zip(part, done, strict=True):
                table[key(kind, text)] = np.asarray(vec, np.float32)
            save(table, path)
    print(f"{label}: {len(todo)} {kind} texts embedded", flush=True)
