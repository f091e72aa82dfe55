"""Which plan a `RecallStore` semantic search takes, how wide it looks, and the index builds
and calibrations that writes and searches set off (docs/basestore.md tells it whole).

Small namespaces are compared exactly. A namespace with `store_index_threshold` vectors or more
gets an HNSW index of its own, built once a write takes it past the threshold (before the batch
returns up to `SYNC_BUILD_MAX` vectors) or a search meets it; a prefix holding
`store_wide_threshold` vectors or more and a large share of the store goes through the index
over every namespace (which holds every vector: migration 0029). Each index is calibrated once
built and again when it has grown by a quarter (`recall.basestore.breadth`), then a share of
its searches is checked against the exact scan in the background (`recall.basestore.questions`,
issue 47). The plan comes from what this process knows (indexes read every few seconds, prefix
sizes counted every five minutes): a stale choice costs speed, never results.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any, Literal

import psycopg
import structlog
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from recall.basestore.breadth import breadth_of, stale, usable
from recall.basestore.jobs import Jobs
from recall.basestore.pending import PendingVectors
from recall.basestore.questions import FIRST_QUESTIONS, Tally
from recall.config import Settings
from recall.db.calibration import (
    LADDER,
    TARGET,
    calibrate_index,
    question_asked,
    record_breadth,
)
from recall.db.items import prefix_size
from recall.db.rls import as_owner
from recall.db.sql import fetch_value
from recall.db.storeindex import (
    EVERY_NAMESPACE,
    Breadth,
    StoreIndexes,
    build_store_index,
    namespaces_due,
    read_store_indexes,
)

__all__ = ["IndexPlanner", "Through"]

log = structlog.stdlib.get_logger(__name__)

Through = Literal["namespace", "every"] | None

INDEXES_TTL_S = 5.0  # how long the list of finished indexes is trusted
SIZES_TTL_S = 300.0  # how long a prefix's counted size is trusted
MAX_SIZES = 10_000  # prefixes whose size is remembered (the memory is cleared when full)
WIDE_SHARE = 2  # the index over every namespace serves prefixes holding half of the vectors
REPEAT_GROWTH = 0.05  # a calibration is repeated when the index grew this much while it ran
SYNC_BUILD_MAX = 5_000  # a namespace's index built before its batch returns (issue 38)


def _index_of(prefix: str, through: Through) -> str:
    """The index a search of `prefix` through `through` scans, by the `ns` it is recorded
    under: the prefix's own, or the one over every namespace."""
    return prefix if through == "namespace" else EVERY_NAMESPACE


class IndexPlanner:
    """One store's view of its indexes and of the prefixes it searched, and its builds.

    Args:
        pool: the store's pool (autocommit connections: an index build needs one).
        settings: the thresholds and the HNSW parameters.
    """

    def __init__(self, pool: AsyncConnectionPool, settings: Settings) -> None:
        self._pool = pool
        self.threshold = settings.store_index_threshold
        self.wide = settings.store_wide_threshold
        self.ef_search = settings.hnsw_ef_search
        self._m = settings.hnsw_m
        self._ef_construction = settings.hnsw_ef_construction
        self._indexes = StoreIndexes({}, 0)
        self._indexes_at = -INDEXES_TTL_S
        self._sizes: dict[str, tuple[int, float]] = {}
        self._own: dict[str, int] = {}  # namespaces' vectors: counted, plus written since
        self._grown: dict[tuple[str, int], int] = {}  # vectors written into an index since
        # counts and builds one at a time (once per key), never crowding out the searches
        self._jobs = Jobs("recall-store-indexing")
        self.sample = settings.store_breadth_sample
        self._tallies: dict[tuple[str, int], Tally] = {}
        self._asked: dict[tuple[str, int], int] = {}  # searches through each index
        self.graphs = PendingVectors(pool)  # pending vectors join their graphs (0028)

    async def refresh(self, conn: AsyncConnection[Any], *, force: bool = False) -> None:
        """Read the finished indexes again when the last read is older than a few seconds, and
        calibrate (in the background) those that are not, or have grown since."""
        if force or time.monotonic() - self._indexes_at >= INDEXES_TTL_S:
            self._indexes = await read_store_indexes(conn)
            self._indexes_at = time.monotonic()
            if self._indexes.leave_pending:
                self.graphs.leftovers()
            for ns, dims in self._indexes.names:
                # a queued or running build calibrates the index itself when it ends
                if self._stale(ns, dims) and not self._jobs.queued(f"build:{dims}:{ns}"):
                    self._jobs.spawn(f"calibrate:{dims}:{ns}", partial(self._calibrate, ns, dims))

    async def refresh_now(self) -> None:
        """Read the finished indexes again now (for a caller that changed them)."""
        async with self._pool.connection() as conn:
            await self.refresh(conn, force=True)

    def through(self, prefix: str, dims: int) -> Through:
        """The plan of a semantic search under `prefix` (None: the exact scan)."""
        names = self._indexes.names
        if prefix and (prefix, dims) in names and self._usable(prefix, dims):
            return "namespace"
        known = self._sizes.get(prefix)
        if (
            known is not None
            and known[0] >= self.wide
            and (EVERY_NAMESPACE, dims) in names
            and self._usable(EVERY_NAMESPACE, dims)
            and known[0] * WIDE_SHARE >= self._indexes.vectors
        ):
            return "every"
        return None

    def pending(self, dims: int, namespaces: Iterable[str]) -> frozenset[str]:
        """Of `namespaces`, those whose new vectors at `dims` are written pending: the index
        that takes them leaves pending vectors out (migration 0028). Read with the finished
        indexes, a few seconds old at most: a namespace indexed since costs its writes a graph
        insert, never a result."""
        return frozenset(ns for ns in namespaces if self._indexes.waits(ns, dims))

    def _usable(self, ns: str, dims: int) -> bool:
        return usable(self._indexes.breadths.get((ns, dims)), self._vectors(ns, dims))

    def _vectors(self, ns: str, dims: int) -> int:
        """What the index holds, as far as this process knows: its estimate (a vacuum's
        count), or its calibration's count plus what this process wrote into it since."""
        calibrated = self._indexes.breadths.get((ns, dims))
        since = calibrated.vectors if calibrated is not None else 0
        grown = since + self._grown.get((ns, dims), 0)
        return max(self._indexes.sizes.get((ns, dims), 0), grown)

    def _stale(self, ns: str, dims: int) -> bool:
        return stale(self._indexes.breadths.get((ns, dims)), self._vectors(ns, dims))

    def breadth(self, prefix: str, dims: int, through: Through) -> int:
        """How wide a search through `through` looks (hnsw.ef_search): the index's
        (`recall.basestore.breadth.breadth_of`)."""
        return self._breadth(_index_of(prefix, through), dims)

    def halved(self, prefix: str, dims: int, through: Through) -> bool:
        """Whether the index a search through `through` scans holds halfvec (every index built
        since issue 56; `recall.db.storeindex.scan_order`)."""
        return self._halved(_index_of(prefix, through), dims)

    def _halved(self, ns: str, dims: int) -> bool:
        return (ns, dims) in self._indexes.halved

    def _breadth(self, ns: str, dims: int) -> int:
        calibrated = self._indexes.breadths.get((ns, dims))
        return breadth_of(calibrated, self._vectors(ns, dims), self.ef_search)

    async def written(self, counts: Mapping[str, int], dims: int, pending: bool = False) -> None:
        """Note the vectors a committed batch wrote, by namespace. A namespace without an index
        that the batch may have taken past the threshold is counted now; there, one holding at
        most `SYNC_BUILD_MAX` vectors gets its index before this returns (seconds: the searches
        and writes after a bulk load go through it), a larger one in the background at once. One
        not counted yet, written a little, is counted in the background; an indexed one adds to
        its growth since its calibration. Pending vectors written join their graphs now. Never
        raises: the batch has committed, and a failed build is logged and left to the
        background."""
        if pending:
            self.graphs.wake()
        for ns, count in counts.items():
            if (ns, dims) in self._indexes.names:
                self._grown[(ns, dims)] = self._grown.get((ns, dims), 0) + count
                continue
            known = self._own.get(ns)
            if known is not None and known + count < self.threshold:
                self._own[ns] = known + count
                continue
            if len(self._own) >= MAX_SIZES:
                self._own.clear()
            if known is not None or count >= self.threshold:
                await self._build_now(ns, dims)
            else:
                self._jobs.spawn(f"own:{dims}:{ns}", partial(self._count_own, ns, dims))

    async def _build_now(self, ns: str, dims: int) -> None:
        """Count `ns` (up to one past `SYNC_BUILD_MAX`) and, at the threshold, build its index
        now when it is that small (and no other build holds the lock), else in the
        background; its calibration follows in the background."""
        try:
            async with self._pool.connection() as conn, as_owner(conn):
                own = int(await fetch_value(
                    conn, "store_namespace_vectors_upto",
                    {"ns": ns, "dims": dims, "cap": max(SYNC_BUILD_MAX, self.threshold) + 1},
                ) or 0)  # fmt: skip
                self._own[ns] = own
                if own < self.threshold:
                    return
                built = None
                if own <= SYNC_BUILD_MAX:
                    built = await build_store_index(
                        conn, ns, dims, m=self._m, ef_construction=self._ef_construction,
                        wait=False, analyze=True,
                    )  # fmt: skip
                if built is None:  # too large to wait for, or another build runs
                    self._jobs.spawn(f"build:{dims}:{ns}", lambda: self._build(ns, dims))
                    return
                log.info("store.index.built_on_write", vectors=own)
                await self.refresh(conn, force=True)  # which queues its calibration
        except psycopg.Error:
            log.exception("store.index.build_failed", every_namespace=False)

    async def _count_own(self, ns: str, dims: int) -> None:
        try:
            async with self._pool.connection() as conn:
                own = int(await fetch_value(
                    conn, "store_namespace_vectors_upto",
                    {"ns": ns, "dims": dims, "cap": self.threshold},
                ) or 0)  # fmt: skip
        except psycopg.Error:
            log.exception("store.index.size_failed")
            return
        self._own[ns] = own
        if own >= self.threshold and (ns, dims) not in self._indexes.names:
            self._jobs.spawn(f"build:{dims}:{ns}", lambda: self._build(ns, dims))

    def asked(self, prefix: str, dims: int, through: Through, vector: Any) -> None:
        """Note a semantic search that went through an index: until `FIRST_QUESTIONS` of them
        have been checked since its calibration, every one, then a share
        (`store_breadth_sample`: every round(1 / share)-th search through the index), is
        checked in the background against the exact scan, and the index's breadth follows what
        its questions need (`recall.basestore.questions`). One check per index waits at a time;
        a search sampled while one waits is not checked. A share of 0 checks none."""
        if through is None or vector is None or self.sample <= 0:
            return
        ns = _index_of(prefix, through)
        # every round(1 / sample)-th search through the index: the same searches in any run;
        # before that, the first questions: the probes' cold start ends after a few hundred
        # searches rather than after MIN_QUESTIONS / sample (issue 56: 5,000 at 1%)
        asked = self._asked.get((ns, dims), 0) + 1
        self._asked[(ns, dims)] = asked
        first = self.tally(ns, dims).questions < FIRST_QUESTIONS
        if first or asked % max(1, round(1 / self.sample)) == 0:
            self._jobs.spawn(f"question:{dims}:{ns}", lambda: self._check(ns, dims, vector))

    def tally(self, ns: str, dims: int) -> Tally:
        """The questions index (`ns`, `dims`) was checked on since its last calibration."""
        return self._tallies.setdefault((ns, dims), Tally())

    async def _check(self, ns: str, dims: int, vector: Any) -> None:
        """Check one question on index (`ns`, `dims`): its exact nearest, then the index at the
        ladder's breadths up to one past its own; move the breadth when the tally says so."""
        current = self._breadth(ns, dims)
        wider = [b for b in LADDER if b > current][:1]
        breadths = [b for b in LADDER if b <= current] + wider
        try:
            async with self._pool.connection() as conn, as_owner(conn):
                halved = self._halved(ns, dims)
                asked = await question_asked(conn, ns, dims, vector, breadths, halved=halved)
                if asked is None:
                    return
                tally = self.tally(ns, dims)
                tally.add(*asked)
                chosen = tally.decide(current, LADDER, TARGET)
                calibrated = self._indexes.breadths.get((ns, dims))
                if chosen is None or calibrated is None:
                    return
                vectors = max(calibrated.vectors, self._vectors(ns, dims))
                await record_breadth(conn, ns, dims, Breadth(chosen, tally.recall(chosen), vectors))
                log.info(
                    "store.index.breadth_from_questions",
                    every_namespace=not ns,
                    dims=dims,
                    ef_search=chosen,
                    was=calibrated.ef_search,
                    recall=round(tally.recall(chosen), 4),
                    questions=tally.questions,
                )
                await self.refresh(conn, force=True)
        except psycopg.Error:
            log.exception("store.index.question_failed", every_namespace=not ns)

    def searched(self, prefix: str, dims: int) -> None:
        """Note a semantic search under `prefix`: count the prefix in the background when its
        size is unknown or old, and build the index it deserves."""
        known = self._sizes.get(prefix)
        if known is None or time.monotonic() - known[1] >= SIZES_TTL_S:
            self._jobs.spawn(f"size:{dims}:{prefix}", lambda: self._size(prefix, dims))

    def _size_cap(self) -> int:
        """How far a prefix is counted: as far as the thresholds and the wide plan's share
        need to know."""
        share = -(-self._indexes.vectors // WIDE_SHARE)
        return max(self.threshold, self.wide, share)

    async def _size(self, prefix: str, dims: int) -> None:
        try:
            async with self._pool.connection() as conn:
                size = await prefix_size(conn, prefix, self._size_cap())
                own = 0
                if prefix and size >= self.threshold and (prefix, dims) not in self._indexes.names:
                    own = int(await fetch_value(
                        conn, "store_namespace_vectors", {"ns": prefix, "dims": dims}
                    ) or 0)  # fmt: skip
        except psycopg.Error:
            log.exception("store.index.size_failed")
            return
        if len(self._sizes) >= MAX_SIZES:
            self._sizes.clear()
        self._sizes[prefix] = (size, time.monotonic())
        if own >= self.threshold:
            self._jobs.spawn(f"build:{dims}:{prefix}", lambda: self._build(prefix, dims))
        elif size >= self.wide and (EVERY_NAMESPACE, dims) not in self._indexes.names:
            self._jobs.spawn(f"build:{dims}:", lambda: self._build(EVERY_NAMESPACE, dims))

    async def _build(self, ns: str, dims: int) -> None:
        try:
            async with self._pool.connection() as conn, as_owner(conn):
                await build_store_index(
                    conn, ns, dims, m=self._m, ef_construction=self._ef_construction, wait=True,
                    analyze=ns != EVERY_NAMESPACE,  # a namespace that just grew: its exact scans
                )  # fmt: skip
                await self._calibrate_on(conn, ns, dims)
        except psycopg.Error:
            log.exception("store.index.build_failed", every_namespace=not ns)

    async def _calibrate(self, ns: str, dims: int) -> None:
        try:
            async with self._pool.connection() as conn, as_owner(conn):
                await self._calibrate_on(conn, ns, dims)
        except psycopg.Error:
            log.exception("store.index.calibration_failed", every_namespace=not ns)

    async def _calibrate_on(self, conn: AsyncConnection[Any], ns: str, dims: int) -> Breadth:
        """Calibrate index (`ns`, `dims`) on `conn` (the owner's), record it, read the
        indexes again."""
        self._grown.pop((ns, dims), None)
        self._tallies.pop((ns, dims), None)  # its questions' answers were a smaller index's
        await self.refresh(conn, force=True)  # an index just built: how it holds its vectors
        breadth = await calibrate_index(conn, ns, dims, halved=self._halved(ns, dims))
        await record_breadth(conn, ns, dims, breadth)
        await self.refresh(conn, force=True)
        if ns != EVERY_NAMESPACE:
            after = int(await fetch_value(
                conn, "store_namespace_vectors", {"ns": ns, "dims": dims}
            ) or 0)  # fmt: skip
            if after > breadth.vectors * (1 + REPEAT_GROWTH):
                # written into while it was probed (a bulk load): the graph held vectors its
                # snapshot could not see, which crowd its scans, and the breadth came out too
                # wide (1,000 for 42,000 vectors in one load); measured again once this ends
                log.info("store.index.calibration_repeated", vectors=breadth.vectors, after=after)
                self._jobs.spawn(
                    f"calibrate:{dims}:{ns}:{after}", partial(self._calibrate, ns, dims)
                )
        return breadth

    async def build_due(self, dims: int, *, every: bool) -> list[str]:
        """Build and calibrate now the index of every namespace at or over the threshold (and,
        with `every`, the index over every namespace); return the namespaces (and '' for the
        latter) indexed by this call.

        Raises:
            psycopg.Error: a build failed.
        """
        built: list[str] = []
        async with self._pool.connection() as conn, as_owner(conn):
            due = await namespaces_due(conn, dims, self.threshold)
            if every and (EVERY_NAMESPACE, dims) not in (await read_store_indexes(conn)).names:
                due.append(EVERY_NAMESPACE)
            for ns in due:
                name = await build_store_index(
                    conn, ns, dims, m=self._m, ef_construction=self._ef_construction, wait=True
                )
                if name is not None:
                    built.append(ns)
                    await self._calibrate_on(conn, ns, dims)
            await self.refresh(conn, force=True)
        return built

    async def wait(self) -> None:
        """Wait until the counts and builds queued in the background, and the pending vectors'
        joining, have finished."""
        await self._jobs.wait()
        await self.graphs.wait()

    async def close(self) -> None:
        """Start nothing new and cancel what runs (a build cut short leaves an invalid index,
        which the next build drops and builds again)."""
        await self._jobs.close()
        await self.graphs.close()
