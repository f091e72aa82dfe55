"""The one error hierarchy of `recall`: every error it raises on purpose is a `RecallError`."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "ExtensionMissingError",
    "InvalidInputError",
    "MigrationError",
    "RecallError",
    "StoreError",
]


class RecallError(Exception):
    """Base class of every error `recall` raises on purpose."""


class ConfigError(RecallError):
    """A setting is missing or invalid; the message names the environment variable."""


class InvalidInputError(RecallError, ValueError):
    """An argument cannot be stored or searched (empty text, wrong type, empty user id...)."""


class StoreError(RecallError):
    """The database failed or could not be reached; wraps the `psycopg.Error` as `__cause__`."""


class ExtensionMissingError(StoreError):
    """The PostgreSQL server has no `vector` extension (pgvector) available."""


class MigrationError(StoreError):
    """A migration file failed to apply, or the migrations on disk are inconsistent."""


class EmbeddingError(RecallError):
    """The embedding model failed to load or to embed a text."""


class EmbeddingMismatchError(EmbeddingError):
    """The database was built with another embedding model or dimension than the one configured."""
