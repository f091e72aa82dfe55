"""How a setting names the embeddings to load: an offline model by name (the default
all-MiniLM-L6-v2, or bge-small-en-v1.5), or any LangChain integration as `provider:model`."""

from __future__ import annotations

from pathlib import Path

from langchain_core.embeddings import Embeddings

from recall.config import DEFAULT_EMBEDDING_MODEL, Settings
from recall.embeddings.bge import BGE_MODEL_NAME, BgeSmallEmbeddings
from recall.embeddings.minilm import MiniLMEmbeddings, check_backend
from recall.errors import ConfigError

__all__ = ["configured_embeddings", "load_embeddings"]


def load_embeddings(
    spec: str,
    *,
    backend: str = "onnx",
    cache_dir: Path | None = None,
    source: str = "RECALL_EMBEDDING_MODEL",
) -> Embeddings:
    """Build embeddings from a setting: an offline model's name (`all-MiniLM-L6-v2`, the
    default, or `bge-small-en-v1.5`), or `provider:model`.

    `provider:model` goes through LangChain's `init_embeddings`, so the matching integration
    (e.g. `langchain-openai` for `openai:text-embedding-3-small`) must be installed.
    `backend` and `cache_dir` apply to the default model only (see `MiniLMEmbeddings`).

    `source` names where the spec came from, for error messages.

    Raises:
        ConfigError: the spec is not the default model and cannot be resolved.
    """
    if spec in (DEFAULT_EMBEDDING_MODEL, f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}"):
        return MiniLMEmbeddings(backend=check_backend(backend), cache_dir=cache_dir)
    if spec in (BGE_MODEL_NAME, f"BAAI/{BGE_MODEL_NAME}"):
        return BgeSmallEmbeddings()
    if ":" not in spec:
        raise ConfigError(
            f"{source}={spec!r} is invalid: use {DEFAULT_EMBEDDING_MODEL!r}, "
            f"{BGE_MODEL_NAME!r} or 'provider:model' (e.g. 'openai:text-embedding-3-small')"
        )
    try:
        from langchain.embeddings import (  # type: ignore[import-not-found,unused-ignore]  # optional
            init_embeddings,
        )
    except ImportError as exc:
        raise ConfigError(
            f"{source}={spec!r} needs the `langchain` package and the provider's "
            "integration package (pip install langchain langchain-<provider>)"
        ) from exc
    try:
        return init_embeddings(spec)  # type: ignore[no-any-return,unused-ignore]  # untyped in some langchain versions
    except Exception as exc:
        raise ConfigError(f"{source}={spec!r} could not be loaded: {exc}") from exc


def configured_embeddings(settings: Settings) -> Embeddings:
    """The embeddings `settings` name (model, backend and cache directory)."""
    return load_embeddings(
        settings.embedding_model,
        backend=settings.embedding_backend,
        cache_dir=settings.model_cache_dir,
    )
