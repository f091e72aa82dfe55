"""Which embeddings to load: the one place that decides.

`RECALL_EMBEDDING_MODEL` names an offline model (`bge-small-en-v1.5`, the default, or
`all-MiniLM-L6-v2` from the `minilm` extra) or any LangChain integration as `provider:model`.
Left unset, it means "not configured": a database already bound to a model
(`recall.embedding_space`) keeps that model, so an upgrade never leaves the stored vectors
unsearchable; a new database gets the default. Callers read the bound model from the database
(`recall.db.migrate.bound_model`) and pass it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import structlog
from langchain_core.embeddings import Embeddings

from recall.config import DEFAULT_EMBEDDING_MODEL, Settings
from recall.embeddings.bge import BGE_MODEL_NAME, BgeSmallEmbeddings
from recall.embeddings.minilm import (
    MINILM_EXTRA,
    MINILM_MODEL_NAME,
    MiniLMEmbeddings,
    check_backend,
    minilm_installed,
)
from recall.errors import ConfigError

__all__ = [
    "ModelChoice",
    "choose_model",
    "configured_embeddings",
    "legacy_hint",
    "load_embeddings",
]

log = structlog.stdlib.get_logger(__name__)

_SETTING = "RECALL_EMBEDDING_MODEL"
_BOUND = "the database's model, recall.embedding_space.model_name"
_ALIASES = {
    BGE_MODEL_NAME: BGE_MODEL_NAME,
    f"BAAI/{BGE_MODEL_NAME}": BGE_MODEL_NAME,
    MINILM_MODEL_NAME: MINILM_MODEL_NAME,
    f"sentence-transformers/{MINILM_MODEL_NAME}": MINILM_MODEL_NAME,
}
_hinted: set[str] = set()  # bound models whose legacy notice this process has logged


def load_embeddings(
    spec: str,
    *,
    backend: str = "onnx",
    cache_dir: Path | None = None,
    source: str = _SETTING,
) -> Embeddings:
    """Build embeddings from a model's name: an offline model (`bge-small-en-v1.5`, the
    default, or `all-MiniLM-L6-v2` from the `minilm` extra), or `provider:model`.

    `provider:model` goes through LangChain's `init_embeddings`, so the matching integration
    (e.g. `langchain-openai` for `openai:text-embedding-3-small`) must be installed.
    `backend` and `cache_dir` apply to all-MiniLM-L6-v2 only (see `MiniLMEmbeddings`).

    Args:
        spec: the model's name.
        backend: how all-MiniLM-L6-v2 runs (`onnx` or `torch`).
        cache_dir: where all-MiniLM-L6-v2's exported graph is kept.
        source: where the spec came from, for error messages.

    Returns:
        The embeddings, not loaded yet (the offline models load on first use).

    Raises:
        ConfigError: the spec names nothing loadable, or a model whose extra is not installed.
    """
    model = _ALIASES.get(spec)
    if model == BGE_MODEL_NAME:
        return BgeSmallEmbeddings()
    if model == MINILM_MODEL_NAME:
        if not minilm_installed():
            raise ConfigError(
                f"{source}={spec!r} needs the minilm extra (torch, sentence-transformers and "
                f"the model's weights): {MINILM_EXTRA}"
            )
        return MiniLMEmbeddings(backend=check_backend(backend), cache_dir=cache_dir)
    if ":" not in spec:
        raise ConfigError(
            f"{source}={spec!r} is invalid: use {BGE_MODEL_NAME!r} (the default), "
            f"{MINILM_MODEL_NAME!r} or 'provider:model' (e.g. 'openai:text-embedding-3-small')"
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


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model to load, and why.

    Attributes:
        spec: the name to load (`load_embeddings`).
        source: where it came from, for messages: the setting, the database, or the default.
        legacy: the setting is unset and the database is bound to another model than the
            default; `legacy_hint` says how to move.
    """

    spec: str
    source: str
    legacy: bool


def choose_model(configured: str | None, bound: str | None) -> ModelChoice:
    """Decide which model to load.

    Args:
        configured: `Settings.embedding_model` (None: not configured).
        bound: the model the database's vectors come from (None: no vectors yet, or no
            database involved).

    Returns:
        An explicit setting when there is one (a database bound to another model then refuses
        it: `bind_embedding_space`); else the database's model; else the default.
    """
    if configured is not None:
        return ModelChoice(configured, _SETTING, legacy=False)
    if bound is not None and _ALIASES.get(bound, bound) != DEFAULT_EMBEDDING_MODEL:
        return ModelChoice(bound, _BOUND, legacy=True)
    return ModelChoice(DEFAULT_EMBEDDING_MODEL, "the default embedding model", legacy=False)


def legacy_hint(settings: Settings, bound: str | None) -> str | None:
    """How to move to the default model, when the setting is unset and the database holds
    another model's vectors (None otherwise): what `recall stats` prints and the log says."""
    if not choose_model(settings.embedding_model, bound).legacy:
        return None
    return (
        f"this database holds embeddings from {bound!r}, and RECALL_EMBEDDING_MODEL is unset, "
        f"so recall keeps using {bound!r}. The default is now {DEFAULT_EMBEDDING_MODEL!r} "
        "(better retrieval, no torch): run `recall reembed` (RECALL_EMBEDDING_MODEL unset) to "
        f"re-embed every memory with it while searches stay up, or set "
        f"RECALL_EMBEDDING_MODEL={bound} to keep the current model"
    )


def configured_embeddings(settings: Settings, bound: str | None = None) -> Embeddings:
    """The embeddings to use with a database bound to `bound` (None: nothing bound yet, or no
    database; then the setting, else the default), as `choose_model` decides.

    With the setting unset and the database on another model, it says once per process (the
    `embedding.model.legacy` event) how to move to the default.

    Raises:
        ConfigError: the model cannot be built; for the database's model, the message also
            says how to move off it.
    """
    choice = choose_model(settings.embedding_model, bound)
    if choice.legacy and choice.spec not in _hinted:
        _hinted.add(choice.spec)
        log.warning(
            "embedding.model.legacy",
            model=choice.spec,
            default=DEFAULT_EMBEDDING_MODEL,
            hint=legacy_hint(settings, bound),
        )
    try:
        return load_embeddings(
            choice.spec,
            backend=settings.embedding_backend,
            cache_dir=settings.model_cache_dir,
            source=choice.source,
        )
    except ConfigError as exc:
        if not choice.legacy:
            raise
        raise ConfigError(
            f"{exc}. Or move this database to {DEFAULT_EMBEDDING_MODEL!r}: `recall reembed` "
            f"(RECALL_EMBEDDING_MODEL unset); or set RECALL_EMBEDDING_MODEL to a model recall "
            f"can load that gives the same vectors"
        ) from exc
