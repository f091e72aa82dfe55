"""`make run`'s server step (scripts/run-example), with stand-ins for `langgraph` and `recall`:
no colours off a terminal, one line once the server answers, and the embedded database stopped
when the server stops."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, free_port

LANGGRAPH = """#!{python}
import http.server, os, sys, threading, time
port = int(sys.argv[sys.argv.index("--port") + 1])
print("LOG_COLOR=" + os.environ.get("LOG_COLOR", "unset"), flush=True)
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", port), Ok)
threading.Thread(target=server.serve_forever, daemon=True).start()
time.sleep(1.5)  # answers for a while, then stops as after Ctrl-C
"""
RECALL = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../calls"
case "$*" in
  "db stop") echo "stopped" ;;
esac
"""


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, text in (("langgraph", LANGGRAPH.format(python=sys.executable)), ("recall", RECALL)):
        (venv / "bin" / name).write_text(text)
        (venv / "bin" / name).chmod(0o755)
    (venv / "bin" / "python").symlink_to(sys.executable)
    return venv


def _run(venv: Path, port: int, **env: str) -> subprocess.CompletedProcess[str]:
    """scripts/run-example with the stand-ins, off a terminal, with no database URL unless
    `env` gives one."""
    base = {k: v for k, v in os.environ.items() if k not in ("RECALL_DATABASE_URL", "DATABASE_URL")}
    return subprocess.run(
        [str(ROOT / "scripts" / "run-example"), str(venv), str(port)],
        capture_output=True,
        text=True,
        cwd=venv.parent,
        env={**base, **env},
        timeout=60,
    )


def test_the_server_is_announced_and_the_database_stopped(tmp_path: Path) -> None:
    venv, port = _venv(tmp_path), free_port()
    done = _run(venv, port)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "LOG_COLOR=false" in out  # not a terminal: no colour codes in the logs
    assert "Threads and runs live in the dev server's" in out
    assert "the memories live in the database named\nabove" in out  # by `recall db start`
    assert f"recall: the example server answers at http://127.0.0.1:{port}" in out
    assert out.rstrip().endswith("recall: stopping the embedded database: stopped")
    # no other `recall` start: each is a Python start-up, seconds on a loaded machine
    assert (venv / "calls").read_text() == "db stop\n"


def test_a_database_url_is_left_running(tmp_path: Path) -> None:
    venv, port = _venv(tmp_path), free_port()
    done = _run(venv, port, RECALL_DATABASE_URL="postgresql://elsewhere/db")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopping the embedded database" not in done.stdout
    assert not (venv / "calls").exists()
