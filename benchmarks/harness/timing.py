"""Timing on a shared, noisy machine: calls timed one by one, compared systems taking turns in
blocks (so that a change in the machine's speed falls on all of them alike), percentiles."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

Call = Callable[[], Awaitable[Any]]
"""One timed operation: a coroutine function without arguments (its result is kept)."""

BLOCK = 25  # calls of one system before the next system's, when systems take turns
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def rotated(items: Sequence[T], turn: int) -> list[T]:
    """`items` started at position `turn` (modulo their number): the order for the turn-th
    block when compared variants take turns, so each goes first equally often."""
    k = turn % len(items)
    return [*items[k:], *items[:k]]


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> list[float]:
    """The `qs` percentiles of `values` (by default p50, p95 and p99)."""
    return [float(np.percentile(values, q)) for q in qs]


def ratio_interval(
    times: Sequence[float], base: Sequence[float], q: float, *, resamples: int = 2000
) -> tuple[float, float]:
    """A 95% bootstrap interval of `times`' `q` percentile over `base`'s: the calls resampled
    in pairs (the same question's call on both paths, by position), seeded."""
    a, b = np.asarray(times), np.asarray(base)
    picks = np.random.default_rng(56).integers(0, len(a), size=(resamples, len(a)))
    ratios = np.percentile(a[picks], q, axis=1) / np.percentile(b[picks], q, axis=1)
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    return float(lo), float(hi)


async def timed(calls: Sequence[Call]) -> tuple[list[float], list[Any]]:
    """Await the calls one after the other: their times in ms, and their results."""
    times, results = [], []
    for call in calls:
        t0 = time.perf_counter()
        results.append(await call())
        times.append((time.perf_counter() - t0) * 1000)
    return times, results


async def timed_warm(calls: Sequence[Call]) -> tuple[list[float], list[float], list[Any]]:
    """Each call twice: the first pass (the first touch of each user's pages) warms the
    caches and is returned apart; the second pass is the measurement. Returns the first
    pass's times, the second pass's times and its results."""
    first, _ = await timed(calls)
    warm, results = await timed(calls)
    return first, warm, results


async def timed_interleaved(
    calls: Mapping[K, Sequence[Call]], block: int = BLOCK, *, first_turn: int = 0
) -> dict[K, tuple[list[float], list[Any]]]:
    """The systems' call lists (of equal length, the same queries) in alternating blocks of
    `block`, the order of the systems turning with each block (starting at `first_turn`, for
    a caller that runs the lists again and keeps turning), so that a change in the machine's
    speed during the run falls on all of them alike. Returns each system's times in ms and
    results, in the calls' order.

    Raises:
        ValueError: the systems have different numbers of calls.
    """
    names = list(calls)
    if len({len(system_calls) for system_calls in calls.values()}) > 1:
        raise ValueError("every system needs the same number of calls (the same queries)")
    out: dict[K, tuple[list[float], list[Any]]] = {name: ([], []) for name in names}
    for b, start in enumerate(range(0, len(calls[names[0]]), block)):
        for name in rotated(names, first_turn + b):
            times, results = await timed(calls[name][start : start + block])
            out[name][0].extend(times)
            out[name][1].extend(results)
    return out


def blocks(count: int, block: int = BLOCK) -> int:
    """How many blocks `timed_interleaved` makes of `count` calls."""
    return -(-count // block)
