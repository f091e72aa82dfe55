from datetime import UTC, datetime

import pytest

from recall.errors import InvalidInputError
from recall.memory import MAX_ID_LENGTH, clean_id, clean_text, make_turn


def test_nul_is_removed_and_surrogates_replaced() -> None:
    assert clean_text("a\x00b", "t", max_length=100) == "ab"
    assert clean_text("x\ud800y", "t", max_length=100) == "x\ufffdy"


def test_long_text_is_cut() -> None:
    assert clean_text("a" * 10_000_000, "t", max_length=2000) == "a" * 2000


@pytest.mark.parametrize("value", ["", "   ", "\n\t", "\x00\x00"])
def test_empty_text_is_refused(value: str) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        clean_text(value, "user_message", max_length=10)


@pytest.mark.parametrize("value", [None, 3, b"bytes", ["a"]])
def test_non_string_text_is_refused(value: object) -> None:
    with pytest.raises(InvalidInputError, match="must be a string"):
        clean_text(value, "user_message", max_length=10)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "empty"),
        ("  ", "empty"),
        (None, "must be a string"),
        (42, "must be a string"),
        ("a\x00b", "NUL"),
        ("a\udc00", "surrogate"),
        ("u" * (MAX_ID_LENGTH + 1), "at most"),
    ],
)
def test_bad_ids_are_refused_not_altered(value: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        clean_id(value, "user_id")


def test_ids_are_kept_exactly() -> None:
    for uid in ["john_doe", "john-doe", "%", "_", "\\", "o'neil", " padded "]:
        assert clean_id(uid, "user_id") == uid


def test_optional_conversation_id() -> None:
    assert clean_id(None, "conversation_id", required=False) is None


def test_content_hash_depends_on_user_conversation_and_text() -> None:
    base = make_turn("u", "hello there", "hi!", conversation_id="c1")
    assert make_turn("u", "hello there", "hi!", conversation_id="c1").content_hash == (
        base.content_hash
    )
    for other in [
        make_turn("v", "hello there", "hi!", conversation_id="c1"),
        make_turn("u", "hello there", "hi!", conversation_id="c2"),
        make_turn("u", "hello there!", "hi!", conversation_id="c1"),
        make_turn("u", "hello there", "hi!!", conversation_id="c1"),
    ]:
        assert other.content_hash != base.content_hash


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ([1, 2], "must be a mapping"),
        ({"x": object()}, "JSON-serializable"),
        ({"x": float("nan")}, "JSON-serializable"),
        ({"x": "a\x00"}, "NUL"),
        ({"x": "y" * 70_000}, "bytes as JSON"),
    ],
)
def test_bad_metadata_is_refused(metadata: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        make_turn("u", "hello there", "hi", metadata=metadata)


def test_deeply_nested_metadata_is_refused() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(100_000):
        node["a"] = {}
        node = node["a"]  # type: ignore[assignment]
    with pytest.raises(InvalidInputError, match="nested too deeply"):
        make_turn("u", "hello there", "hi", metadata=deep)


def test_created_at_naive_is_utc_and_strings_parse() -> None:
    naive = make_turn("u", "hello there", "hi", created_at=datetime(2024, 1, 2, 3, 4))
    assert naive.created_at == datetime(2024, 1, 2, 3, 4, tzinfo=UTC)
    parsed = make_turn("u", "hello there", "hi", created_at="2024-01-02T03:04:00+02:00")
    assert parsed.created_at is not None and parsed.created_at.utcoffset() is not None
    with pytest.raises(InvalidInputError, match="ISO 8601"):
        make_turn("u", "hello there", "hi", created_at="yesterday")
    with pytest.raises(InvalidInputError, match="datetime"):
        make_turn("u", "hello there", "hi", created_at=12345)
