"""The store's own argument checks (`recall.memory` checks the turns themselves)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from recall.errors import InvalidInputError
from recall.limits import MAX_LIMIT, check_limit, check_threshold
from recall.memory import clean_id

__all__ = [
    "MAX_LIMIT",
    "check_limit",
    "check_now",
    "check_threshold",
    "imported_id",
    "memory_key",
    "memory_uuid",
]


def check_now(now: object) -> datetime:
    """The moment a search is asked, in UTC: `now`, or the clock's when it is None. A naive
    `now` is taken as UTC, as `recall.search.when.time_window` takes it, so that the time a
    message names and the age `explain` gives are read from one and the same moment.

    Raises:
        InvalidInputError: `now` is neither None nor a datetime.
    """
    if now is None:
        return datetime.now(UTC)
    if not isinstance(now, datetime):
        raise InvalidInputError(f"now must be a datetime, not {type(now).__name__}")
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def memory_uuid(value: object) -> UUID | None:
    """A memory id as a UUID; None for a string that is no UUID (no memory has that id).

    Raises:
        InvalidInputError: `value` is not a string (or a UUID).
    """
    if isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise InvalidInputError(f"memory_id must be a string, not {type(value).__name__}")
    try:
        return UUID(value)
    except ValueError:
        return None  # not an id we could have issued: nothing to find


def memory_key(user_id: object, memory_id: object) -> tuple[str, UUID | None]:
    """The checked user id and the memory id as a UUID (None: no memory has that id).

    Raises:
        InvalidInputError: the user id is unusable, or the memory id is not a string.
    """
    uid = clean_id(user_id, "user_id")
    assert uid is not None  # required ids are never None
    return uid, memory_uuid(memory_id)


def imported_id(value: object) -> UUID | None:
    """The id an imported memory keeps (a line of `recall export` has one), or None for none.

    Raises:
        InvalidInputError: `value` is given but is not a memory id (a UUID string).
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise InvalidInputError(f"id must be a memory id (a UUID), not {value!r:.60}")
