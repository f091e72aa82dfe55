"""A newcomer's first `make run`: from a fresh clone to the example server answering.

    python benchmarks/first_run.py [--runs 3] [--no-warm-up]

Each run clones this repository's committed HEAD into a new temporary folder and runs
`make run` there with a free SERVER_PORT, its own XDG_DATA_HOME (so a new embedded database)
and its own model cache, no RECALL_* variable from the caller, and times how long until
`http://127.0.0.1:PORT/ok` answers; the `.venv` install alone is timed too (until `make`'s install
stamp appears). Then the server is stopped as Ctrl-C stops it (which stops the embedded
database) and the folder removed. pip's own cache (~/.cache/pip) is left as it is: with the
warm-up run first (not counted), every counted run finds it warm, as a second clone would.
Reports each run and the median. Writes docs/benchmarks.md (section "first-run").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from lib.report import ROOT, git_revision, machine, publish, table
from lib.run import parser, run

TIMEOUT_S = 600.0  # a run that takes longer than this is a failure, not a number
STAMP = Path(".venv") / ".recall-installed-run"  # the Makefile's RUN_STAMP


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(port: int) -> bool:
    """Whether the example server answers on `port`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=1):
            return True
    except OSError:
        return False


def stop(proc: subprocess.Popen[bytes], clone: Path, env: dict[str, str]) -> None:
    """Stop `make run` as Ctrl-C does (the script stops the embedded database), then make sure
    the database is down."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    recall = clone / ".venv" / "bin" / "recall"
    if recall.exists():
        subprocess.run(  # noqa: S603 - the clone's own recall command
            [str(recall), "db", "stop"], cwd=clone, env=env, capture_output=True, check=False
        )


def one_run(repository: Path) -> tuple[float, float]:
    """Clone, `make run` until the server answers, stop; (install s, until answering s)."""
    with tempfile.TemporaryDirectory(prefix="recall-first-run-") as tmp:
        clone = Path(tmp) / "recall"
        subprocess.run(  # noqa: S603 - git with our own arguments
            ["git", "clone", "--quiet", str(repository), str(clone)],  # noqa: S607 - git on PATH
            check=True,
        )
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
        env.update(
            SERVER_PORT=str(port),
            XDG_DATA_HOME=str(Path(tmp) / "data"),
            RECALL_MODEL_CACHE_DIR=str(Path(tmp) / "models"),
        )
        log = (Path(tmp) / "make-run.log").open("wb")
        start = time.perf_counter()
        proc = subprocess.Popen(  # noqa: S603 - make with our own arguments
            ["make", "run", f"SERVER_PORT={port}"],  # noqa: S607 - make on PATH
            cwd=clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as one, as Ctrl-C does
        )
        installed = None
        try:
            while True:
                elapsed = time.perf_counter() - start
                if installed is None and (clone / STAMP).exists():
                    installed = elapsed
                if answers(port):
                    break
                if proc.poll() is not None or elapsed > TIMEOUT_S:
                    log.close()
                    tail = (Path(tmp) / "make-run.log").read_text(errors="replace")[-3000:]
                    raise SystemExit(f"make run did not serve (exit {proc.returncode}):\n{tail}")
                time.sleep(0.25)
            return installed or elapsed, elapsed
        finally:
            stop(proc, clone, env)
            log.close()
            shutil.rmtree(clone / ".venv", ignore_errors=True)


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--runs", type=int, default=3, help="counted runs")
    cli.add_argument("--no-warm-up", action="store_true", help="count the first run too")
    args = cli.parse_args()
    revision = git_revision()
    if not args.no_warm_up:
        install, total = one_run(ROOT)
        print(f"warm-up (not counted): install {install:.1f} s, answering at {total:.1f} s")
    runs = [one_run(ROOT) for _ in range(args.runs)]
    rows: list[list[object]] = [
        [i + 1, f"{install:.1f}", f"{total:.1f}"] for i, (install, total) in enumerate(runs)
    ]
    rows.append(
        [
            "median",
            f"{statistics.median(r[0] for r in runs):.1f}",
            f"**{statistics.median(r[1] for r in runs):.1f}**",
        ]
    )
    body = f"""## First run: a fresh clone's `make run` until the server answers

{revision}: `git clone` of the committed HEAD into a new folder, then `make run` (a new
`.venv`: `pip install -e .[server]`, no torch; a new embedded database; the example server),
timed until `/ok` answers; {args.runs} runs after {"no" if args.no_warm_up else "one"} uncounted
warm-up run, so pip's wheel cache (~/.cache/pip) is warm, as for a second clone on the same
machine. A first clone ever on a machine also downloads the wheels. Target: <= 45 s (issue 29).
{machine()}.

{table(["run", "install s", "until the server answers s"], rows)}
"""
    publish("first-run", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
