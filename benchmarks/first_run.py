"""A newcomer's first `make run`: from a fresh clone to the example server answering.

    python benchmarks/first_run.py [--runs 3] [--no-warm-up] [--cold]

Each run clones this repository's committed HEAD into a new temporary folder and runs
`make run` there with a free SERVER_PORT, its own XDG_DATA_HOME (so a new embedded database)
and its own model cache, no RECALL_* variable from the caller, and times how long until
`http://127.0.0.1:PORT/ok` answers; the `.venv` install alone is timed too (until `make`'s install
stamp appears). Then the server is stopped as Ctrl-C stops it (which stops the embedded
database) and the folder removed. The installers' caches (pip's ~/.cache/pip, which holds uv's
own wheel, and uv's ~/.cache/uv) are left as they are: with the warm-up run first (not
counted), every counted run finds them warm, as a second clone would. With `--cold` each run
gets empty caches of its own instead (PIP_CACHE_DIR, UV_CACHE_DIR), as a first clone ever on
the machine: everything is downloaded (or read from the machine's local indexes, if pip is
configured with some) and unpacked again; no warm-up then.
Reports each run and the median, and the load average before and after.
Writes docs/benchmarks.md (section "first-run", or "first-run-cold" with `--cold`).
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
import textwrap
import time
import urllib.request
from pathlib import Path

from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run

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


def one_run(repository: Path, *, cold: bool = False) -> tuple[float, float]:
    """Clone, `make run` until the server answers, stop; (install s, until answering s).
    `cold`: with empty installer caches."""
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
        if cold:
            env.update(PIP_CACHE_DIR=str(Path(tmp) / "pip"), UV_CACHE_DIR=str(Path(tmp) / "uv"))
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
    cli.add_argument("--cold", action="store_true", help="empty installer caches in each run")
    args = cli.parse_args()
    revision = git_revision()
    load_before = "/".join(f"{x:.1f}" for x in os.getloadavg())
    if not (args.no_warm_up or args.cold):
        install, total = one_run(ROOT)
        print(f"warm-up (not counted): install {install:.1f} s, answering at {total:.1f} s")
    runs = []
    for i in range(args.runs):
        runs.append(one_run(ROOT, cold=args.cold))
        print(f"run {i + 1}: install {runs[-1][0]:.1f} s, answering at {runs[-1][1]:.1f} s")
    load_after = "/".join(f"{x:.1f}" for x in os.getloadavg())
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
    if args.cold:
        title = "First run, cold caches: a first clone ever on a machine"
        caches = (
            "each run with empty pip and uv caches of its own, as a first clone ever on a "
            "machine (the wheels downloaded, or read from the machine's local indexes, and "
            "unpacked)"
        )
    else:
        title = "First run: a fresh clone's `make run` until the server answers"
        warm_up = "no" if args.no_warm_up else "one"
        caches = (
            f"{args.runs} runs after {warm_up} uncounted warm-up run, so the installers' caches "
            "(~/.cache/pip for uv's own wheel, ~/.cache/uv) are warm, as for a second clone on "
            "the same machine (section first-run-cold: a first clone ever)"
        )
    about = textwrap.fill(
        f"{revision}: `git clone` of the committed HEAD into a new folder, then `make run` (a "
        "new `.venv` without pip; uv installed into it with pip, then `uv pip install -e "
        ".[server]` from pip's configured sources, no torch; a new embedded database, "
        f"migrated; the example server), timed until `/ok` answers; {caches}. Target: <= 45 s "
        f"(issue 29). {machine()}; load average (1/5/15 min) {load_before} before, "
        f"{load_after} after: the machine is shared with other jobs, so times vary with it.",
        width=96,
        break_on_hyphens=False,
    )
    body = f"""## {title}

{about}

{table(["run", "install s", "until the server answers s"], rows)}
"""
    section = "first-run-cold" if args.cold else "first-run"
    publish(section, body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
