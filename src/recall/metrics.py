"""Retrieval metrics over a sliding window, alerts with
hysteresis, and a Prometheus view of both.

Seed metrics: average and p95 retrieval time, search success rate, average similarity, results
per query, empty-result rate, authentication failures, embedding errors and database errors.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recall.errors import EmbeddingError, InvalidInputError, StoreError

__all__ = [
    "METRICS",
    "AlertRules",
    "Outcome",
    "RetrievalMetrics",
    "outcome_of",
    "prometheus_registry",
]

log = structlog.stdlib.get_logger(__name__)

Outcome = Literal["ok", "empty", "no_user", "no_message", "timeout", "embedding", "database",
                  "invalid_input", "unexpected", "config"]  # fmt: skip
_ERRORS = ("timeout", "embedding", "database", "invalid_input", "unexpected", "config")


def outcome_of(exc: BaseException) -> Outcome:
    """The error kind a failure is counted under: embedding, database, invalid_input or
    unexpected."""
    if isinstance(exc, EmbeddingError):
        return "embedding"
    if isinstance(exc, StoreError):
        return "database"
    if isinstance(exc, InvalidInputError):
        return "invalid_input"
    return "unexpected"


@dataclass(frozen=True, slots=True)
class AlertRules:
    """When to warn: checked over the window once it holds `min_samples` searches.

    Attributes:
        p95_latency_ms: retrieval p95 above this fires `latency`.
        min_success_rate: successful searches (ok or empty) / searches below this fires
            `success_rate`.
        max_empty_rate: empty results / successful searches above this fires `empty_rate`.
        max_errors: errors of one kind (timeout, embedding, database, ...) in the window at or
            above this fires `errors.<kind>`.
        min_samples: no rate alert is judged on fewer searches than this.
    """

    p95_latency_ms: float = 1000.0
    min_success_rate: float = 0.95
    max_empty_rate: float = 0.9
    max_errors: int = 5
    min_samples: int = 20


@dataclass(slots=True)
class _Event:
    at: float
    outcome: str
    latency_ms: float
    results: int
    similarities: tuple[float, ...]


@dataclass(slots=True)
class RetrievalMetrics:
    """Records every retrieval and keeps the last `window_s` seconds of them.

    Thread-safe. `snapshot()` gives the retrieval metrics over the window; totals never reset.
    Alerts (`rules`) log one `memory.alert.fired` warning when a rule is crossed and one
    `memory.alert.resolved` when it recovers, not one per request.
    """

    window_s: float = 300.0
    rules: AlertRules = field(default_factory=AlertRules)
    alerts_enabled: bool = True
    clock: Callable[[], float] = time.monotonic
    _events: deque[_Event] = field(default_factory=deque)
    _totals: dict[str, int] = field(default_factory=dict)
    _firing: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(
        self,
        outcome: Outcome,
        latency_ms: float,
        similarities: Sequence[float] = (),
        *,
        alerts: bool = True,
    ) -> None:
        """Record one retrieval and re-check the alert rules (unless `alerts` is False: the
        caller's `alert_on_failures` setting is off)."""
        now = self.clock()
        with self._lock:
            self._events.append(
                _Event(now, outcome, latency_ms, len(similarities), tuple(similarities))
            )
            self._totals[outcome] = self._totals.get(outcome, 0) + 1
            self._trim(now)
            snap = self._snapshot_locked()
            changes = self._evaluate(snap) if self.alerts_enabled and alerts else []
        for name, fired, value in changes:
            if fired:
                log.warning("memory.alert.fired", alert=name, value=value)
            else:
                log.info("memory.alert.resolved", alert=name, value=value)

    def _trim(self, now: float) -> None:
        while self._events and now - self._events[0].at > self.window_s:
            self._events.popleft()

    def timeline(self, buckets: int = 10) -> list[dict[str, float]]:
        """The window cut into `buckets` equal spans, oldest first: each span's searches,
        median and p95 latency (ms) and empty results, for a chart. Counts only: no user's
        data is in it.

        Raises:
            ValueError: `buckets` is not between 1 and 100.
        """
        if not 1 <= buckets <= 100:
            raise ValueError("buckets must be between 1 and 100")
        with self._lock:
            now = self.clock()
            self._trim(now)
            events = list(self._events)
        span = self.window_s / buckets
        out: list[dict[str, float]] = []
        for b in range(buckets):
            start = now - self.window_s + b * span
            inside = [
                e
                for e in events
                if start <= e.at < start + span and e.outcome in ("ok", "empty", *_ERRORS)
            ]
            latencies = sorted(e.latency_ms for e in inside)
            out.append(
                {
                    "seconds_ago": round(now - start, 1),
                    "searches": float(len(inside)),
                    "p50_latency_ms": latencies[len(latencies) // 2] if latencies else 0.0,
                    "p95_latency_ms": _p95(latencies),
                    "empty": float(sum(e.outcome == "empty" for e in inside)),
                }
            )
        return out

    def snapshot(self) -> dict[str, Any]:
        """The metrics over the current window, plus the error counts by kind."""
        with self._lock:
            self._trim(self.clock())
            return self._snapshot_locked()

    def _snapshot_locked(self) -> dict[str, Any]:
        searches = [e for e in self._events if e.outcome in ("ok", "empty", *_ERRORS)]
        succeeded = [e for e in searches if e.outcome in ("ok", "empty")]
        latencies = sorted(e.latency_ms for e in searches)
        sims = [s for e in succeeded for s in e.similarities]
        errors = {kind: sum(e.outcome == kind for e in self._events) for kind in _ERRORS}
        return {
            "window_s": self.window_s,
            "searches": len(searches),
            "avg_latency_ms": sum(latencies) / len(latencies) if latencies else 0.0,
            "p50_latency_ms": latencies[len(latencies) // 2] if latencies else 0.0,
            "p95_latency_ms": _p95(latencies),
            "success_rate": len(succeeded) / len(searches) if searches else 1.0,
            "avg_similarity": sum(sims) / len(sims) if sims else 0.0,
            "results_per_query": (
                sum(e.results for e in succeeded) / len(succeeded) if succeeded else 0.0
            ),
            "empty_rate": (
                sum(e.outcome == "empty" for e in succeeded) / len(succeeded) if succeeded else 0.0
            ),
            "auth_failures": sum(e.outcome == "no_user" for e in self._events),
            "errors": errors,
        }

    def _evaluate(self, snap: dict[str, Any]) -> list[tuple[str, bool, float]]:
        rules = self.rules
        enough = snap["searches"] >= rules.min_samples
        state = {
            "latency_p95": (enough and snap["p95_latency_ms"] > rules.p95_latency_ms,
                            snap["p95_latency_ms"]),
            "success_rate": (enough and snap["success_rate"] < rules.min_success_rate,
                             snap["success_rate"]),
            "empty_rate": (enough and snap["empty_rate"] > rules.max_empty_rate,
                           snap["empty_rate"]),
        }  # fmt: skip
        for kind, count in snap["errors"].items():
            state[f"errors.{kind}"] = (count >= rules.max_errors, float(count))
        changes = []
        for name, (bad, value) in state.items():
            if bad and name not in self._firing:
                self._firing.add(name)
                changes.append((name, True, float(value)))
            elif not bad and name in self._firing:
                self._firing.discard(name)
                changes.append((name, False, float(value)))
        return changes

    @property
    def firing(self) -> set[str]:
        """The alerts firing now."""
        with self._lock:
            return set(self._firing)

    def totals(self) -> dict[str, int]:
        """Retrievals by outcome since the process started."""
        with self._lock:
            return dict(self._totals)

    def log_summary(self) -> None:
        """Emit one `memory.metrics.summary` event with the window's metrics."""
        snap = self.snapshot()
        log.info("memory.metrics.summary", **{k: v for k, v in snap.items() if k != "errors"},
                 errors=snap["errors"])  # fmt: skip


def _p95(sorted_values: list[float]) -> float:
    if not sorted_values:
        return 0.0
    index = max(0, min(len(sorted_values) - 1, round(0.95 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


class _Collector(Collector):
    def __init__(self, metrics: RetrievalMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        snap = self._metrics.snapshot()
        gauges = {
            "avg_latency_ms": "Average retrieval time over the window, milliseconds.",
            "p95_latency_ms": "95th percentile retrieval time over the window, milliseconds.",
            "success_rate": "Searches that did not fail / searches, over the window.",
            "avg_similarity": "Average cosine similarity of returned memories, over the window.",
            "results_per_query": "Memories returned per successful search, over the window.",
            "empty_rate": "Successful searches that returned nothing, over the window.",
            "searches": "Searches in the window.",
            "auth_failures": "Retrievals without an authenticated user, over the window.",
        }
        for key, doc in gauges.items():
            yield GaugeMetricFamily(f"recall_retrieval_{key}", doc, value=float(snap[key]))
        errors = GaugeMetricFamily(
            "recall_retrieval_window_errors", "Retrieval errors over the window.", labels=["kind"]
        )
        for kind, count in snap["errors"].items():
            errors.add_metric([kind], float(count))
        yield errors
        total = CounterMetricFamily(
            "recall_retrievals", "Retrievals since start, by outcome.", labels=["outcome"]
        )
        for outcome, count in sorted(self._metrics.totals().items()):
            total.add_metric([outcome], float(count))
        yield total
        firing = GaugeMetricFamily(
            "recall_alert_firing", "1 while an alert rule is crossed.", labels=["alert"]
        )
        for name in sorted(self._metrics.firing):
            firing.add_metric([name], 1.0)
        yield firing


def prometheus_registry(metrics: RetrievalMetrics) -> CollectorRegistry:
    """A registry exposing `metrics` (serve it with `prometheus_client.generate_latest`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(metrics))
    return registry


METRICS = RetrievalMetrics()
"""The process-wide metrics the default nodes record into."""
