"""How many memories one call may ask for, how many it gets when it does not say, and the
threshold it may ask at: the store's checks, which the settings use too, so a limit or a
threshold the store would refuse fails when the process starts; and the defaults of the calls
that list memories, each defined here once and used by the store and by every caller that
shows its number (issue 48)."""

from __future__ import annotations

from recall.errors import InvalidInputError

__all__ = [
    "KEYWORD_LIMIT",
    "MAX_LIMIT",
    "PAGE_SIZE",
    "RECENT_LIMIT",
    "check_limit",
    "check_threshold",
]

MAX_LIMIT = 1000
# a search's own default is `Settings.max_memories` (RECALL_MAX_MEMORIES): the store resolves it
KEYWORD_LIMIT = 5  # `MemoryStore.keyword_search` and the keyword-search node
# `MemoryStore.recent` and `conversation_recent`, the RecentMemory node, `recall recent`
RECENT_LIMIT = 5
PAGE_SIZE = 20  # `MemoryStore.page` and the inspector's pages (its list and its search)


def check_limit(limit: object, name: str = "limit") -> int:
    """`limit` if it is an integer from 1 to `MAX_LIMIT`.

    Raises:
        InvalidInputError: it is not.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"{name} must be an integer between 1 and {MAX_LIMIT}")
    return limit


def check_threshold(threshold: object) -> float:
    """`threshold` as a float if it is a number from 0 to 1.

    Raises:
        InvalidInputError: it is not.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidInputError("similarity_threshold must be a number between 0 and 1")
    if not 0.0 <= float(threshold) <= 1.0:
        raise InvalidInputError("similarity_threshold must be between 0 and 1")
    return float(threshold)
