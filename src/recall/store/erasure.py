"""Erasure: one memory, a user's memories before a date, everything of a user across tables,
indexes and writer queues, and retention (memories past an age or over a per-user cap).

Every removal is logged with its count: `memory.forget.done` (scope `memory`, `before` or
`user`) and `memory.retention.done`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog

from recall.config import MAX_RETENTION_DAYS, Settings
from recall.db.memories import (
    delete_memory,
    forget_before,
    forget_over_cap,
    forget_user_rows,
    users_over_cap,
    users_with_memories_before,
)
from recall.db.userindex import drop_user_index, index_name
from recall.errors import InvalidInputError
from recall.memory import clean_id
from recall.outbox import Outbox
from recall.store.checks import memory_key
from recall.store.core import StoreCore
from recall.store.maintenance import Maintenance

__all__ = ["Erasure", "Retention", "retention_limits"]

log = structlog.stdlib.get_logger(__name__)


def _checked_limits(days: int | None, cap: int | None) -> tuple[int | None, int | None]:
    """The retention limits `(days, max_per_user)`, refused when out of range.

    Raises:
        InvalidInputError: one is below 1, or `days` is over `MAX_RETENTION_DAYS`.
    """
    for name, value in (("days", days), ("max_per_user", cap)):
        if value is not None and (isinstance(value, bool) or value < 1):
            raise InvalidInputError(f"retention {name} must be >= 1, not {value!r}")
    if days is not None and days > MAX_RETENTION_DAYS:  # further back is no date
        raise InvalidInputError(f"retention days must be <= {MAX_RETENTION_DAYS}, not {days}")
    return days, cap


@dataclass(frozen=True, slots=True)
class Retention:
    """What one `MemoryStore.apply_retention` call removed.

    Attributes:
        expired: memories older than the retention days.
        over_cap: memories beyond a user's cap: restatements whose source is stored first,
            then the oldest of the others.
        users: users who lost at least one memory.
    """

    expired: int = 0
    over_cap: int = 0
    users: int = 0


def retention_limits(
    settings: Settings, days: int | None, max_per_user: int | None
) -> tuple[int | None, int | None]:
    """The age limit and per-user cap a retention run applies: those given, else the
    settings' (`retention_days`, `retention_max_per_user`); None where neither sets one."""
    return (
        settings.retention_days if days is None else days,
        settings.retention_max_per_user if max_per_user is None else max_per_user,
    )


class Erasure:
    """`MemoryStore.delete`, `forget_before`, `forget_user` and `apply_retention`.

    Args:
        core: the state the store's parts share.
        maintenance: its background index build of a user stops when the user is forgotten.
    """

    def __init__(self, core: StoreCore, maintenance: Maintenance) -> None:
        self.core = core
        self.maintenance = maintenance

    async def delete(self, user_id: str, memory_id: str) -> bool:
        """Delete one of the user's memories; return whether it existed.

        Raises:
            InvalidInputError, StoreError.
        """
        uid, mid = memory_key(user_id, memory_id)
        if mid is None:
            return False
        async with self.core.conn("delete", user=uid, fence=(uid,)) as conn:
            deleted = await delete_memory(conn, uid, mid)
        self.core.drop_cached(uid)
        log.info("memory.forget.done", scope="memory", count=int(deleted))
        return deleted

    async def forget_before(self, user_id: str, before: datetime) -> int:
        """Delete the user's memories dated before `before` (of every kind); the newer ones,
        the user's trackers and summaries stay.

        Returns:
            How many memories were deleted.

        Raises:
            InvalidInputError: a bad user id, or `before` is not a timezone-aware datetime.
            StoreError: the database failed (nothing is deleted).
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        if not isinstance(before, datetime) or before.tzinfo is None:
            raise InvalidInputError("before must be a timezone-aware datetime")
        count = await self._forget_before(uid, before)
        log.info("memory.forget.done", scope="before", count=count)
        return count

    async def _forget_before(self, uid: str, before: datetime) -> int:
        async with self.core.conn("forget_before", user=uid, fence=(uid,)) as conn:
            count = await forget_before(conn, uid, before)
        self.core.drop_cached(uid)
        return count

    async def apply_retention(
        self,
        *,
        days: int | None = None,
        max_per_user: int | None = None,
        now: datetime | None = None,
    ) -> Retention:
        """Remove every user's memories older than `days`, then each user's beyond
        `max_per_user` (issue 37: first the restatements whose source is still stored, oldest
        first, then the oldest of the others): an age pass over the users, then a cap pass,
        each removing one user's memories per transaction. A failure leaves the removals
        before it done: users the age pass reached may not have had the cap pass yet.

        Args:
            days: the age limit; None: `settings.retention_days` (None there: no age limit).
            max_per_user: the per-user cap; None: `settings.retention_max_per_user` (None
                there: no cap).
            now: the time the age is measured from (the current time when None).

        Returns:
            The counts removed, also logged as `memory.retention.done`.

        Raises:
            InvalidInputError: `days` or `max_per_user` is below 1, or `days` is over
                `recall.config.MAX_RETENTION_DAYS`.
            StoreError: the database failed (removals done before it stay done).
        """
        days, cap = _checked_limits(*retention_limits(self.core.settings, days, max_per_user))
        expired = over_cap = 0
        touched: set[str] = set()
        if days is not None:
            cutoff = (now or datetime.now(UTC)) - timedelta(days=days)
            async with self.core.conn("retention", all_users=True) as conn:
                users = await users_with_memories_before(conn, cutoff)
            for uid in users:
                if removed := await self._forget_before(uid, cutoff):
                    expired += removed
                    touched.add(uid)
        if cap is not None:
            async with self.core.conn("retention", all_users=True) as conn:
                users = await users_over_cap(conn, cap)
            for uid in users:
                async with self.core.conn("retention", user=uid, fence=(uid,)) as conn:
                    removed = await forget_over_cap(conn, uid, cap)
                self.core.drop_cached(uid)
                if removed:
                    over_cap += removed
                    touched.add(uid)
        done = Retention(expired=expired, over_cap=over_cap, users=len(touched))
        log.info(
            "memory.retention.done",
            expired=done.expired,
            over_cap=done.over_cap,
            users=done.users,
            days=days,
            max_per_user=cap,
        )
        return done

    async def forget_user(self, user_id: str, *, outboxes: Sequence[Outbox] = ()) -> int:
        """Erase everything of the user: memories (turns, notes, model-written), bookkeeping,
        tracker, rolling summaries, their own HNSW index, and turns still waiting in the given
        writer queues (`TurnWriter.outbox`).

        Returns:
            How many memories were deleted (queued turns included).

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        await self.maintenance.stop_build(uid)
        async with self.core.conn("forget_user", user=uid) as conn:
            forgotten = await forget_user_rows(conn, uid)
        # an index may exist without its row when a build raced the erasure: drop by name
        name = forgotten.hnsw_index or index_name(uid)
        async with self.core.conn("forget_user", owner=True, fence=(uid,)) as conn:
            await drop_user_index(conn, name)
        self.core.drop_cached(uid)
        count = forgotten.memories
        for outbox in outboxes:
            count += await outbox.forget(uid)
        log.info("memory.forget.done", scope="user", count=count)
        return count
