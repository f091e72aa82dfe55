from collections.abc import Callable
from pathlib import Path

import pytest

from recall.config import Settings, default_data_home, process_settings
from recall.errors import ConfigError, InvalidInputError
from recall.limits import check_limit, check_threshold


def test_defaults_are_the_seeds() -> None:
    s = Settings()
    assert (s.max_memories, s.similarity_threshold, s.search_timeout_ms) == (3, 0.5, 5000)
    assert (s.embedding_cache_ttl, s.max_query_length, s.connection_pool_size) == (300, 1000, 10)
    assert (s.min_message_length, s.max_message_length) == (5, 2000)
    assert s.filter_system_messages and s.filter_error_responses
    assert (s.hnsw_m, s.hnsw_ef_construction, s.hnsw_ef_search) == (16, 200, 100)
    assert s.data_dir == default_data_home() / "pgdata"  # per user (decision 0016)
    assert s.embedding_model is None  # not configured: the database's model, else bge-small


def test_reads_recall_variables_and_database_url_fallback() -> None:
    s = Settings.from_env(
        {
            "DATABASE_URL": "postgresql://fallback",
            "RECALL_MAX_MEMORIES": "7",
            "RECALL_SIMILARITY_THRESHOLD": "0.25",
            "RECALL_FILTER_SYSTEM_MESSAGES": "off",
            "RECALL_DATA_DIR": "/tmp/x",
        }
    )
    assert s.database_url == "postgresql://fallback"
    assert s.max_memories == 7
    assert s.similarity_threshold == 0.25
    assert s.filter_system_messages is False
    assert s.data_dir == Path("/tmp/x")


def test_recall_database_url_wins_over_database_url() -> None:
    s = Settings.from_env(
        {"DATABASE_URL": "postgresql://a", "RECALL_DATABASE_URL": "postgresql://b"}
    )
    assert s.database_url == "postgresql://b"


def test_empty_url_means_embedded() -> None:
    assert Settings.from_env({"RECALL_DATABASE_URL": "  "}).database_url is None


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("RECALL_MAX_MEMORIES", "0"),
        ("RECALL_MAX_MEMORIES", "three"),
        ("RECALL_SIMILARITY_THRESHOLD", "1.5"),
        ("RECALL_SEARCH_TIMEOUT_MS", "-1"),
        ("RECALL_HNSW_M", "1"),
        ("RECALL_HNSW_EF_CONSTRUCTION", "10"),
        ("RECALL_FILTER_ERROR_RESPONSES", "maybe"),
        ("RECALL_CONNECTION_POOL_SIZE", "0"),
        ("RECALL_EMBEDDING_BACKEND", "tensorflow"),
    ],
)
def test_invalid_values_name_the_variable(var: str, value: str) -> None:
    with pytest.raises(ConfigError, match=var):
        Settings.from_env({var: value})


def test_repr_hides_the_database_url() -> None:
    assert "secret" not in repr(Settings(database_url="postgresql://u:secret@h/db"))


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(AttributeError):
        s.max_memories = 5  # type: ignore[misc]
    assert s.replace(max_memories=5).max_memories == 5


def test_the_data_live_in_one_folder_per_user_whatever_the_current_one() -> None:
    s = Settings.from_env({"XDG_DATA_HOME": "/srv/data"})
    assert s.data_dir == Path("/srv/data/recall/pgdata")
    assert s.queue_path == Path("/srv/data/recall/outbox.sqlite3")
    home = Settings.from_env({"HOME": "/home/ana"})
    assert home.data_dir == Path("/home/ana/.local/share/recall/pgdata")
    assert default_data_home({"HOME": "/home/ana"}) == Path("/home/ana/.local/share/recall")
    assert Settings.from_env({"RECALL_DATA_DIR": "here/pg"}).data_dir == Path("here/pg")
    assert Settings().data_dir.is_absolute() and Settings().queue_path.is_absolute()


def test_a_process_reads_its_settings_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALL_MAX_MEMORIES", "4")
    first = process_settings()
    monkeypatch.setenv("RECALL_MAX_MEMORIES", "6")
    assert process_settings() is first and first.max_memories == 4
    process_settings.cache_clear()  # a new process (a test, a CLI invocation) reads again
    assert process_settings().max_memories == 6


def test_settings_that_fail_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALL_MAX_MEMORIES", "many")
    with pytest.raises(ConfigError, match="RECALL_MAX_MEMORIES"):
        process_settings()
    monkeypatch.setenv("RECALL_MAX_MEMORIES", "5")
    assert process_settings().max_memories == 5


@pytest.mark.parametrize(
    ("field", "check", "values"),
    [
        ("max_memories", check_limit, [0, 1, 3, 1000, 1001, -5]),
        ("similarity_threshold", check_threshold, [-0.01, 0.0, 0.5, 1.0, 1.01, float("nan")]),
    ],
)
def test_the_settings_take_what_the_store_takes(
    field: str, check: Callable[[object], object], values: list[object]
) -> None:
    """Issue 48: a limit or threshold the store would refuse on every call fails at start,
    because the settings ask the store's own check (`recall.limits`)."""
    for value in values:
        # the field by name: a value of whatever type, as a caller may give one
        try:
            check(value)
        except InvalidInputError:
            with pytest.raises(ConfigError, match=field.upper()):
                Settings(**{field: value})  # type: ignore[arg-type]
        else:
            assert getattr(Settings(**{field: value}), field) == value  # type: ignore[arg-type]
