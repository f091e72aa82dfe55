"""Memory in sync code: recall's own event loop, in a daemon thread, runs the async work that a
sync graph (`invoke`, `stream`) or a sync middleware hook asks for.

The core of recall is async (psycopg's async pool, the model in a worker thread). A sync caller
cannot run it with `asyncio.run`, which would make a new loop a call, and a store's pool belongs
to the loop it was opened on. So every sync call goes to one long-lived loop: the process-wide
store opened there serves every later sync call, and a writer's background work (the drainer of
its durable queue) goes on there between calls. At interpreter exit the writers that ran there
finish their attempts in flight and try each queued turn once (`TurnWriter.finish`), for at most
`EXIT_FLUSH_S` in all (what is still queued stays on disk for the next process), then the loop's
process-wide store is closed. Decision 0048 says why this and not a loop a call.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future, wait
from typing import Any, TypeVar

import structlog

from recall.errors import StoreError
from recall.store.shared import close_default_store

__all__ = [
    "ANSWER_S",
    "EXIT_FLUSH_S",
    "at_exit",
    "is_portal",
    "portal_loop",
    "run_blocking",
    "run_or",
]

log = structlog.stdlib.get_logger(__name__)

T = TypeVar("T")

EXIT_FLUSH_S = 10.0
"""The longest the exit hook waits for the writers that ran on recall's loop, all together."""

ANSWER_S = 2.0
"""How long a loop other than recall's own has to start a sync call's work before the call
gives up: a loop whose thread is itself blocked in `invoke` never would."""

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_exit_work: dict[int, weakref.WeakMethod[Callable[[], Awaitable[None]]]] = {}
_hooked = False
_fork_hooked = False


def portal_loop() -> asyncio.AbstractEventLoop:
    """Recall's own event loop, started in a daemon thread on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            threading.Thread(target=serve, name="recall-loop", daemon=True).start()
            started.wait()
            _loop = loop
            _hook_exit()
        return _loop


def _forget_in_child() -> None:
    """A forked child has the parent's loop object but not the thread that runs it: it starts
    its own on first use."""
    global _loop, _hooked
    _loop, _hooked = None, False
    _exit_work.clear()


def is_portal(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` is recall's own (a sync caller's work runs there)."""
    return loop is _loop


def _check_loop(target: asyncio.AbstractEventLoop, given: asyncio.AbstractEventLoop | None) -> None:
    """Refuse a call `target` cannot serve: the caller's own running loop, or a `given` loop
    that is not running."""
    try:
        current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    if target is current:
        raise StoreError(
            "a sync call was made from the event loop its store runs on; use the async API "
            "(ainvoke, astream) there"
        )
    if given is not None and (given.is_closed() or not given.is_running()):
        raise StoreError(
            "the store was opened on an event loop that is not running; in a sync graph give "
            "the node no store (the process-wide one) or a store opened with "
            "recall.nodes.blocking.run_blocking(MemoryStore.connect(...).open)"
        )


def _taken(done: Future[Any]) -> None:
    """Wait up to `ANSWER_S` for a loop other than recall's own to start the work (`done`
    running); else cancel it, so that loop never runs it, and refuse."""
    wait([done], timeout=ANSWER_S)
    if done.cancel():  # still pending: the loop has not taken it, and now never runs it
        raise StoreError(
            "the store's event loop did not take the call: its thread is busy, perhaps in "
            "this very invoke; call the async API (ainvoke, astream) from code running on "
            "that loop"
        )


def run_blocking(
    work: Callable[[], Coroutine[Any, Any, T]],
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    timeout_s: float | None = None,
) -> T:
    """Run `work()` to its end on `loop` (recall's own when None) and return its result; the
    caller's context variables (structlog's bound values, LangGraph's config) go with it.

    A loop other than recall's own must start the work within `ANSWER_S`: when the caller
    blocks that loop's thread (`graph.invoke` called from code running on it, whose steps run
    in worker threads), it never would.

    Raises:
        StoreError: `loop` is the caller's own running loop, not running (a store opened on a
            loop that has ended cannot serve a sync call) or does not start the work in time.
        TimeoutError: the work ran past `timeout_s` (it is cancelled).
        Whatever `work()` raised.
    """
    target = loop or portal_loop()
    _check_loop(target, loop)
    context = contextvars.copy_context()
    done: Future[T] = Future()
    task: asyncio.Task[T] | None = None

    def begin() -> None:
        nonlocal task
        if not done.set_running_or_notify_cancel():  # the caller gave up before the loop came
            return
        try:
            task = target.create_task(work(), context=context)
        except BaseException as exc:  # not a coroutine, a closing loop: the caller hears it
            done.set_exception(exc)
            return

        def finish(t: asyncio.Task[T]) -> None:
            if t.cancelled():
                done.set_exception(asyncio.CancelledError())
            elif (exc := t.exception()) is not None:
                done.set_exception(exc)
            else:
                done.set_result(t.result())

        task.add_done_callback(finish)

    target.call_soon_threadsafe(begin)
    if loop is not None:
        _taken(done)
    try:
        return done.result(timeout_s)
    except TimeoutError:
        if done.done():  # the work's own TimeoutError
            raise
        if task is not None:
            target.call_soon_threadsafe(task.cancel)
        raise TimeoutError(f"the work ran past {timeout_s} s") from None


def run_or(
    work: Callable[[], Coroutine[Any, Any, T]],
    fallback: Callable[[], T],
    *,
    event: str,
    loop: asyncio.AbstractEventLoop | None = None,
) -> T:
    """`run_blocking` for a caller that must never fail its turn (a node's, the middleware's or
    the tool's sync side): a failure is logged as `event` with kind "sync", and `fallback()`
    returned."""
    try:
        return run_blocking(work, loop=loop)
    except Exception as exc:
        log.error(event, kind="sync", error=str(exc))
        return fallback()


def at_exit(key: object, work: Callable[[], Awaitable[None]]) -> None:
    """Have `work()`, a bound method, run on recall's loop at interpreter exit, once per `key`,
    while its object lives (a writer dropped before exit is not kept alive for it).

    It runs when the threading module shuts down (`threading._register_atexit`, the hook
    `concurrent.futures` itself uses), before the worker threads stop taking work: a flush
    embeds and writes in worker threads, which an `atexit` hook finds closed ("cannot schedule
    new futures after interpreter shutdown"). That is also before every `atexit` hook, the
    embedded server's stop among them, so the database is still there. A sync call made after
    it (from a non-daemon thread still running at exit) is not flushed: its turn stays queued
    on disk for the next process.
    """
    _exit_work[id(key)] = weakref.WeakMethod(work)
    _hook_exit()


def _hook_exit() -> None:
    """The exit hook, once (again in a forked child, whose `_at_exit` then runs twice: the
    second finds nothing to do), and the fork hook, once a process."""
    global _hooked, _fork_hooked
    if not _hooked:
        _hooked = True
        register = getattr(threading, "_register_atexit", atexit.register)
        register(_at_exit)
    if not _fork_hooked:
        _fork_hooked = True
        os.register_at_fork(after_in_child=_forget_in_child)


def _at_exit() -> None:
    loop = _loop
    if loop is None or loop.is_closed() or not loop.is_running():
        return
    works = [w for ref in _exit_work.values() if (w := ref()) is not None]
    _exit_work.clear()

    async def all_of() -> None:
        async with asyncio.timeout(EXIT_FLUSH_S):
            try:
                await asyncio.gather(*(w() for w in works), return_exceptions=True)
            finally:
                await close_default_store()

    try:
        run_blocking(all_of, timeout_s=EXIT_FLUSH_S + 1)
    except Exception as exc:  # at exit: say so, never raise
        log.warning("memory.sync.exit_flush", error=str(exc) or type(exc).__name__)
