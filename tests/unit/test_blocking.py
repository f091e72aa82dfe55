"""recall's own loop for sync callers (`recall.nodes.blocking.run_blocking`): results and
errors come back, the caller's context goes with the work, and no call waits for ever: not on
work that is not a coroutine, not past its timeout, not on a loop whose thread is busy, not in
a forked child."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from recall.errors import StoreError
from recall.nodes import blocking
from recall.nodes.blocking import run_blocking

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


async def whose() -> str:
    await asyncio.sleep(0)
    return WHO.get()


async def fails() -> None:
    raise ValueError("no")


def test_results_errors_and_the_callers_context_come_back() -> None:
    WHO.set("alice")
    assert run_blocking(whose) == "alice"
    assert blocking.is_portal(blocking.portal_loop())
    with pytest.raises(ValueError, match="no"):
        run_blocking(fails)


def test_work_that_is_not_a_coroutine_is_refused_not_waited_for() -> None:
    with pytest.raises(TypeError):
        run_blocking(lambda: None)  # type: ignore[arg-type,return-value]


def test_work_past_its_timeout_is_cancelled() -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match=r"past 0\.1 s"):
        run_blocking(slow, timeout_s=0.1)
    assert cancelled.wait(5)


@pytest.fixture
def busy_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop running in a thread that is stuck in a blocking call (as a loop whose thread
    called `graph.invoke` is)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    while not loop.is_running():
        time.sleep(0.01)
    release = threading.Event()
    loop.call_soon_threadsafe(release.wait)
    yield loop
    release.set()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_a_loop_whose_thread_is_busy_is_given_up_on(
    busy_loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blocking, "ANSWER_S", 0.2)
    with pytest.raises(StoreError, match="did not take the call"):
        run_blocking(whose, loop=busy_loop)


def test_a_loop_that_has_ended_is_refused() -> None:
    ended = asyncio.new_event_loop()
    ended.close()
    with pytest.raises(StoreError, match="not running"):
        run_blocking(whose, loop=ended)


FORKED = """
import asyncio, os, signal
from recall.nodes.blocking import run_blocking

async def pid() -> int:
    return os.getpid()

assert run_blocking(pid) == os.getpid()  # the parent's loop, started
child = os.fork()
if child == 0:
    signal.alarm(10)  # a hang ends the child with SIGALRM
    os._exit(0 if run_blocking(pid) == os.getpid() else 1)
_, status = os.waitpid(child, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_starts_a_loop_of_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
