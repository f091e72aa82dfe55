"""Databases for benchmarks: a fresh one per run (or one kept between runs), on a given server
or an embedded one."""

from __future__ import annotations

import os

from psycopg import sql
from psycopg.conninfo import make_conninfo

from recall.db.embedded import EmbeddedServer
from recall.db.pool import connect_once

from .report import ROOT

BENCH_DATA_DIR = ROOT / ".recall" / "bench-pgdata"
SERVER_URL = "RECALL_BENCH_DATABASE_URL"


async def server_url() -> str:
    """The URL of the benchmarks' server: $RECALL_BENCH_DATABASE_URL, or an embedded server in
    .recall/bench-pgdata (started once, stopped at exit)."""
    return os.environ.get(SERVER_URL) or await EmbeddedServer(BENCH_DATA_DIR).astart(
        stop_at_exit=True
    )


async def fresh_database(name: str) -> str:
    """Drop and create database `name` on the benchmarks' server (`server_url`); return its
    URL. The database stays after the run, for a look with psql."""
    server = await server_url()
    conn = await connect_once(server)
    try:
        await conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    finally:
        await conn.close()
    return make_conninfo(server, dbname=name)


async def kept_database(name: str) -> tuple[str, bool]:
    """Database `name` on the benchmarks' server, created when missing: its URL, and whether
    it was there before (a run's data kept for the next run)."""
    server = await server_url()
    conn = await connect_once(server)
    try:
        cur = await conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        existed = await cur.fetchone() is not None
        if not existed:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    finally:
        await conn.close()
    return make_conninfo(server, dbname=name), existed


async def drop_database(name: str) -> None:
    """Drop database `name` from the benchmarks' server, if it is there."""
    conn = await connect_once(await server_url())
    try:
        await conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    finally:
        await conn.close()


async def settle(url: str, *tables: str) -> None:
    """After a load, as the tables' owner (VACUUM is not the app role's): VACUUM (ANALYZE)
    `tables` (by default the memories), the steady state autovacuum reaches (statistics,
    visibility map), so autovacuum does not process a fresh table during the timings; then
    CHECKPOINT, so the load's dirty pages are written now and not by a checkpoint spread over
    the timings."""
    owner = await connect_once(url)
    try:
        for table in tables or ("recall.memories",):
            await owner.execute(
                sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(*table.split(".")))
            )
        await owner.execute("CHECKPOINT")
    finally:
        await owner.close()
