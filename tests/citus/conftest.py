"""Fixtures for a live Citus cluster (collected only with RECALL_TEST_CITUS=1: `make
test-citus`). The cluster is scripts/citus-cluster's, in RECALL_TEST_CITUS_DIR."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from recall.db.pool import connect_once
from tests.conftest import ROOT, add_citus_nodes

SCRIPT = ROOT / "scripts" / "citus-cluster"


class Cluster:
    """The running cluster: restart a worker, add one (to the cluster and to a database)."""

    def __init__(self, folder: Path, coordinator: str) -> None:
        self.folder = folder
        self.coordinator = coordinator

    async def _script(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            str(SCRIPT), *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0, out.decode()
        return out.decode().strip()

    async def restart_worker(self, index: int, down_s: float) -> None:
        """Stop worker `index` (1-based), keep it down `down_s` seconds, start it again."""
        await self._script("restart-worker", str(self.folder), str(index), str(down_s))

    async def add_worker(self, database_url: str) -> str:
        """Start one more worker and add it to the cluster and to `database_url`'s database;
        return its URL (maintenance database)."""
        port = (await self._script("add-worker", str(self.folder))).splitlines()[-1]
        worker = f"postgresql://postgres@localhost:{int(port)}/postgres"
        dbname = str(conninfo_to_dict(database_url)["dbname"])
        conn = await connect_once(worker)
        try:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        finally:
            await conn.close()
        await add_citus_nodes(
            database_url, [make_conninfo(worker, dbname=dbname)], only_workers=True
        )
        return worker


@pytest.fixture(scope="session")
def cluster(server_url: str) -> Cluster:
    return Cluster(Path(os.environ["RECALL_TEST_CITUS_DIR"]), server_url)
