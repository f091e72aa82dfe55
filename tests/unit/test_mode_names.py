"""The retrieval mode: one name (`mode`, RECALL_MODE), one check (`parse_mode`), the old
names (`retrieval_mode`, RECALL_RETRIEVAL_MODE) kept as deprecated aliases (issue 39)."""

from __future__ import annotations

from typing import get_args

import pytest

from recall.config import RETRIEVAL_MODES, Settings, StoreMode, parse_mode
from recall.errors import ConfigError, InvalidInputError


def test_parse_mode_is_the_one_check() -> None:
    assert parse_mode("keyword") == "keyword"
    with pytest.raises(InvalidInputError, match="mode must be one of semantic, keyword, hybrid"):
        parse_mode("fuzzy", InvalidInputError)
    with pytest.raises(ConfigError, match=r"^must be one of"):
        parse_mode(None, ConfigError, "")


def test_a_store_search_adds_recent_to_the_one_list() -> None:
    """Issue 48: RecallStore's searches (`recall.db.items`, `recall.basestore.operations`)
    kept a second list of the modes; theirs is built from RetrievalMode."""
    assert get_args(StoreMode) == (*RETRIEVAL_MODES, "recent")


def test_the_setting_is_mode() -> None:
    assert Settings().mode == "hybrid"
    assert Settings.from_env({"RECALL_MODE": "semantic"}).mode == "semantic"
    with pytest.raises(ConfigError, match="RECALL_MODE"):
        Settings.from_env({"RECALL_MODE": "fuzzy"})


def test_the_old_names_still_work_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="RECALL_MODE"):
        assert Settings.from_env({"RECALL_RETRIEVAL_MODE": "keyword"}).mode == "keyword"
    with pytest.warns(DeprecationWarning, match="deprecated"):
        old = Settings(retrieval_mode="semantic")
    assert old.mode == "semantic" and old.retrieval_mode is None
    assert old.replace(max_memories=2).mode == "semantic"  # no second warning: filterwarnings
    with (
        pytest.warns(DeprecationWarning, match="deprecated"),
        pytest.raises(ConfigError, match="disagree"),
    ):
        Settings.from_env({"RECALL_MODE": "semantic", "RECALL_RETRIEVAL_MODE": "keyword"})
    with (
        pytest.warns(DeprecationWarning, match="deprecated"),
        pytest.raises(ConfigError, match="RETRIEVAL_MODE"),
    ):
        Settings(retrieval_mode="fuzzy")  # type: ignore[arg-type]  # what a user may pass
