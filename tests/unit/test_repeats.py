"""A turn that a concurrent attempt stored between `recall.add_turn`'s hash lookup and its
nearness search is that turn, not a repeat of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from recall.memory import make_turn
from recall.rows import MemoryRow
from recall.store.repeats import Repeats


class _NoDatabase:
    """A store core whose every database call fails the test: nothing is to be counted."""

    def conn(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a repeat was counted")


def _row(user_message: str, ai_response: str, conversation_id: str | None) -> MemoryRow:
    return MemoryRow(
        id=uuid4(),
        conversation_id=conversation_id,
        user_message=user_message,
        ai_response=ai_response,
        created_at=datetime(2026, 11, 28, tzinfo=UTC),
        metadata={},
        kind="turn",
        distance=None,
        bm25=None,
    )


async def test_the_turn_itself_among_the_near_rows_is_returned_uncounted() -> None:
    turn = make_turn("u", "I drive a Toyota Prius.", "Noted.", conversation_id="t1")
    itself = _row("I drive a Toyota Prius.", "Noted.", "t1")
    other = _row("I drive a Toyota Prius!", "Noted.", "t0")  # a repeat, nearer in the list
    found = await Repeats(_NoDatabase()).repeat_among(turn, [other, itself])  # type: ignore[arg-type]
    assert found is not None and found.id == str(itself.id)
    assert "recall" not in found.metadata


async def test_the_same_words_in_another_conversation_are_not_the_turn_itself() -> None:
    turn = make_turn("u", "I drive a Toyota Prius.", "Noted.", conversation_id="t1")
    elsewhere = _row("I drive a Toyota Prius.", "Noted.", "t0")

    class Counting:
        def conn(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("counting reaches the database")

    # a turn repeated in another conversation is counted as a repeat
    with pytest.raises(RuntimeError, match="counting reaches the database"):
        await Repeats(Counting()).repeat_among(turn, [elsewhere])  # type: ignore[arg-type]
