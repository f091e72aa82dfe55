"""What `RecallStore` embeds: LangGraph's `IndexConfig` resolved to an embedder, a dimension
and field paths, and the texts a value yields for those paths.

`embed` may be a LangChain `Embeddings`, a sync or async function of texts, a model name
(`bge-small-en-v1.5`, `all-MiniLM-L6-v2`) or a `"provider:model"` string; left out, it is the
model `RECALL_EMBEDDING_MODEL` names, else the one the database's memories are bound to, else
the default (`recall.embeddings.configured_embeddings` decides). Paths follow LangGraph's syntax
(`$`, `a.b`, `a[*].b`, `a[0]`), read by LangGraph's own `get_text_at_path`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path

from recall.config import Settings
from recall.embeddings import Embedder, configured_embeddings, embedder_for, load_embeddings
from recall.errors import ConfigError

__all__ = ["IndexSpec", "keyword_text", "resolve_index"]


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """A resolved index: the embedder, its dimension and the default field paths."""

    embedder: Embedder
    dims: int
    fields: tuple[str, ...]

    def texts(
        self, value: Mapping[str, Any], fields: Sequence[str] | None
    ) -> list[tuple[str, int, str]]:
        """(path, ordinal, text) for each non-blank text `value` yields at `fields` (the
        store's paths when None). A path that matches nothing yields nothing."""
        out: list[tuple[str, int, str]] = []
        for path in self.fields if fields is None else fields:
            for ordinal, text in enumerate(get_text_at_path(value, path)):
                if text.strip():
                    out.append((path, ordinal, text))
        return out


async def resolve_index(
    index: IndexConfig | None, settings: Settings, bound: str | None = None
) -> IndexSpec | None:
    """The `IndexSpec` for `index` (None: the store embeds nothing).

    `bound` is the model the database's memories are bound to (`recall.db.migrate.
    bound_model`), used when `embed` is left out and no model is configured.

    Raises:
        ConfigError: `embed` cannot be used, `fields` is not a list of paths, or `dims` is not
            a positive integer.
        EmbeddingError: the model failed when asked for its dimension.
    """
    if index is None:
        return None
    if not isinstance(index, Mapping):
        raise ConfigError(f"index must be an IndexConfig dict, not {type(index).__name__}")
    embeddings = _embeddings(index.get("embed"), settings, bound)
    dims = index.get("dims")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
        raise ConfigError(f"index dims must be a positive integer, not {dims!r}")
    fields = index.get("fields") or ["$"]
    if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
        raise ConfigError(f"index fields must be a list of paths such as ['$'], not {fields!r}")
    embedder = embedder_for(embeddings, settings, dimensions=dims)
    return IndexSpec(embedder, dims or await embedder.dimensions(), tuple(fields))


def _embeddings(embed: object, settings: Settings, bound: str | None) -> Embeddings:
    if embed is None:
        return configured_embeddings(settings, bound)
    if isinstance(embed, str):
        return load_embeddings(embed, cache_dir=settings.model_cache_dir, source="index embed")
    if isinstance(embed, Embeddings) or callable(embed):
        return ensure_embeddings(embed)
    raise ConfigError(
        "index embed must be an Embeddings, a function of texts, or a model name, "
        f"not {type(embed).__name__}"
    )


def keyword_text(value: Any) -> str:
    """Every text and number in `value`, in order: what keyword search reads of an item that
    the store does not index."""
    if isinstance(value, Mapping):
        return " ".join(t for v in value.values() if (t := keyword_text(v)))
    if isinstance(value, list | tuple):
        return " ".join(t for v in value if (t := keyword_text(v)))
    if isinstance(value, bool) or value is None:
        return ""
    return str(value)
