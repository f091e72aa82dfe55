"""How many memories one call may ask for: the store's check, which the settings use too, so a
limit the store would refuse fails when the process starts (issue 48)."""

from __future__ import annotations

from recall.errors import InvalidInputError

__all__ = ["MAX_LIMIT", "check_limit"]

MAX_LIMIT = 1000


def check_limit(limit: object, name: str = "limit") -> int:
    """`limit` if it is an integer from 1 to `MAX_LIMIT`.

    Raises:
        InvalidInputError: it is not.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"{name} must be an integer between 1 and {MAX_LIMIT}")
    return limit
