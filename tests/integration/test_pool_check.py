"""The pool checks a connection before lending it unless it came back moments ago."""

from __future__ import annotations

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from recall.db.pool import RecentUseCheck, connect_once


async def test_only_idle_connections_pay_for_a_check(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[object] = []
    real = AsyncConnectionPool.check_connection

    async def counting(conn: psycopg.AsyncConnection[object]) -> None:
        checked.append(conn)
        await real(conn)

    monkeypatch.setattr(AsyncConnectionPool, "check_connection", counting)
    checker = RecentUseCheck(window_s=60)
    conn = await connect_once(database_url)
    try:
        await checker.check(conn)  # never lent before: checked
        assert len(checked) == 1
        await checker.returned(conn)
        await checker.check(conn)  # back a moment ago: no round trip
        assert len(checked) == 1
        checker.window_s = 0.0
        await checker.check(conn)  # idle past the window: checked again
        assert len(checked) == 2
    finally:
        await conn.close()
    with pytest.raises(psycopg.OperationalError):
        await checker.check(conn)  # a closed connection fails its check: the pool drops it
