import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from recall.db.migrate import (
    apply_migrations,
    bind_embedding_space,
    ensure_extension,
    load_migrations,
    pending_migrations,
)
from recall.db.pool import connect_once
from recall.errors import EmbeddingMismatchError, ExtensionMissingError, MigrationError
from recall.rows import VectorExtension
from tests.conftest import Databases


async def _versions(url: str) -> list[tuple[int, str]]:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(b"SELECT version, name FROM recall.schema_migrations ORDER BY 1")
        return [(r[0], r[1]) for r in await cur.fetchall()]
    finally:
        await conn.close()


ALL = [(m.version, m.name) for m in load_migrations()]
VERSIONS = [v for v, _ in ALL]


async def test_apply_twice_is_a_no_op(databases: Databases) -> None:
    url = await databases.create()
    conn = await connect_once(url)
    try:
        assert [m.version for m in await pending_migrations(conn)] == VERSIONS
        assert await apply_migrations(conn) == VERSIONS
        assert await apply_migrations(conn) == []
        assert await pending_migrations(conn) == []
    finally:
        await conn.close()
    assert await _versions(url) == ALL


async def test_two_processes_migrating_at_once_apply_each_file_once(databases: Databases) -> None:
    url = await databases.create()
    script = (
        "import asyncio, sys\n"
        "from recall.db.pool import connect_once\n"
        "from recall.db.migrate import apply_migrations\n"
        "async def main():\n"
        "    conn = await connect_once(sys.argv[1])\n"
        "    print(await apply_migrations(conn))\n"
        "asyncio.run(main())\n"
    )
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, url, stdout=asyncio.subprocess.PIPE
        )
        for _ in range(3)
    ]
    outputs = [(await p.communicate())[0].decode().strip().splitlines()[-1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    # each file was applied by exactly one process
    applied = sorted(v for out in outputs for v in json.loads(out))
    assert applied == VERSIONS
    assert await _versions(url) == ALL


async def test_each_file_is_its_own_transaction(databases: Databases, tmp_path: Path) -> None:
    url = await databases.create()
    real = load_migrations()[0]
    (tmp_path / "0001_memories.sql").write_text(real.statements)
    (tmp_path / "0002_broken.sql").write_text(
        "CREATE TABLE recall.half_done (x int);\nSELECT no_such_function();\n"
    )
    conn = await connect_once(url)
    try:
        with pytest.raises(MigrationError, match=r"0002_broken\.sql failed"):
            await apply_migrations(conn, load_migrations(tmp_path))
        cur = await conn.execute(b"SELECT to_regclass('recall.half_done')")
        row = await cur.fetchone()
        assert row is not None and row[0] is None  # the failed file left nothing behind
    finally:
        await conn.close()
    assert await _versions(url) == [(1, "memories")]


async def test_an_edited_released_file_is_refused(databases: Databases, tmp_path: Path) -> None:
    url = await databases.create()
    conn = await connect_once(url)
    try:
        await apply_migrations(conn)
        edited = load_migrations()[0].statements + "\n-- edited\n"
        (tmp_path / "0001_memories.sql").write_text(edited)
        with pytest.raises(MigrationError, match="append-only"):
            await apply_migrations(conn, load_migrations(tmp_path))
    finally:
        await conn.close()


def test_badly_named_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "1_init.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql"):
        load_migrations(tmp_path)


async def test_embedding_space_mismatch_names_both_models_and_the_fix(
    databases: Databases,
) -> None:
    url = await databases.create()
    conn = await connect_once(url)
    try:
        await apply_migrations(conn)
        await bind_embedding_space(conn, "model-a", 64)
        await bind_embedding_space(conn, "model-a", 64)  # same model: fine
        with pytest.raises(EmbeddingMismatchError) as err:
            await bind_embedding_space(conn, "model-b", 384)
    finally:
        await conn.close()
    message = str(err.value)
    assert "model-a" in message and "64" in message
    assert "model-b" in message and "384" in message
    assert "recall reembed" in message


class _NoVectorServer:
    """Answers the extension query as a PostgreSQL without pgvector installed would."""

    class info:  # mimics psycopg's attribute
        server_version = 160000

    def cursor(self, **_: Any) -> Any:
        class Cursor:
            async def execute(self, *_: Any) -> None:
                return None

            async def fetchone(self) -> VectorExtension:
                return VectorExtension(installed=None, available=None)

        return Cursor()


async def test_a_server_without_pgvector_gets_one_clear_error() -> None:
    with pytest.raises(ExtensionMissingError, match=r"install pgvector.*RECALL_DATABASE_URL"):
        await ensure_extension(_NoVectorServer())  # type: ignore[arg-type]


async def test_the_real_server_has_pgvector(database_url: str) -> None:
    conn = await connect_once(database_url)
    try:
        await ensure_extension(conn)
        cur = await conn.execute(b"SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = await cur.fetchone()
        assert row is not None and tuple(int(x) for x in row[0].split(".")[:2]) >= (0, 7)
    finally:
        await conn.close()
